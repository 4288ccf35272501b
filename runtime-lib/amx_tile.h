/* amx_tile.h - the AMX tile configuration that _tile_loadconfig reads (palette 1: per tile, its
 * bytes per row and its rows), for the tile kernels (quant_amx.c, gemm_bf16_amx.c). Not
 * installed. */
#ifndef CANNL_AMX_TILE_H
#define CANNL_AMX_TILE_H

#include <stdint.h>

typedef struct cannl__tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} cannl__tile_config;

#endif
