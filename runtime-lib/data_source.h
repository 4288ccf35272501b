/* data_source.h - the pieces the data readers share (data_source.c): a byte source over zlib
 * (plain or gzip files alike), element types and their decoding, the size-checked dataset setup
 * and payload streaming. Used by the readers (data_idx.c, data_npy.c, data_csv.c), by data.c's
 * format detection and by checkpoint.c's conversions; it uses nothing of theirs. Not installed. */
#ifndef CANNL_DATA_SOURCE_H
#define CANNL_DATA_SOURCE_H

#include "cannl_rt.h"
#include "rt_internal.h"

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

/* A byte source read through zlib (plain or gzip files). */
typedef struct cannl__src {
    gzFile gz;
    const char *path;
    int direct;         /* 1: not compressed, file_size is the data size */
    int64_t file_size;  /* size on disk */
} cannl__src;

cannl_status cannl__src_open(cannl__src *s, const char *path, cannl_error *err);
/* Read up to n bytes; *got receives the count (short only at end of data). */
cannl_status cannl__src_read(cannl__src *s, void *buf, size_t n, size_t *got, cannl_error *err);
void cannl__src_close(cannl__src *s);

/* Element types found in data files. */
typedef enum cannl__etype {
    CANNL__U8, CANNL__I8, CANNL__I16, CANNL__I32, CANNL__I64, CANNL__F32, CANNL__F64
} cannl__etype;

size_t cannl__etype_size(cannl__etype t);

/* Set up *ds (count, per-example dims, dtype, zeroed storage, source) with
 * overflow checks; dims are int64 here and must each fit in int32. If s is
 * not NULL, the count * elems elements of type t after a header of
 * header_bytes are first checked against the size of the file. */
cannl_status cannl__dataset_init(cannl_dataset *ds, const char *path, cannl_dtype dtype, int64_t count,
                                 int32_t ndims, const int64_t *dims, const cannl__src *s, cannl__etype t,
                                 int64_t header_bytes, cannl_error *err);

/* Convert n raw file elements at src into dst (a dtype array). */
void cannl__decode(const unsigned char *src, size_t n, cannl__etype t, int big_endian, void *dst,
                   cannl_dtype dtype);

/* Stream the ds->count * ds->elems elements of type t (sizes already
 * checked by cannl__dataset_init) from s into ds->data, then check that
 * nothing follows. */
cannl_status cannl__read_payload(cannl__src *s, cannl_dataset *ds, cannl__etype t, int big_endian,
                                 cannl_error *err);

#endif /* CANNL_DATA_SOURCE_H */
