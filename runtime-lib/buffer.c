/* buffer.c - 64-byte aligned, zero-filled host buffers.
 *
 * The block comes from calloc (so large blocks are lazily zeroed pages), is
 * over-allocated by the alignment plus one pointer, and the pointer returned
 * by calloc is stored just before the aligned address for cannl_free. */
#include "rt_internal.h"

#include <stdint.h>
#include <stdlib.h>

enum { CANNL__ALIGN = 64 };

void *cannl_alloc(size_t bytes) {
    const size_t extra = CANNL__ALIGN + sizeof(void *);
    if (bytes > SIZE_MAX - extra) return NULL;
    unsigned char *raw = calloc(1, bytes + extra);
    if (!raw) return NULL;
    uintptr_t base = (uintptr_t)(raw + sizeof(void *));
    uintptr_t aligned = (base + (CANNL__ALIGN - 1)) & ~(uintptr_t)(CANNL__ALIGN - 1);
    unsigned char *p = raw + (aligned - (uintptr_t)raw);
    memcpy(p - sizeof(void *), &raw, sizeof raw);
    return p;
}

void cannl_free(void *p) {
    if (!p) return;
    void *raw;
    memcpy(&raw, (unsigned char *)p - sizeof(void *), sizeof raw);
    free(raw);
}
