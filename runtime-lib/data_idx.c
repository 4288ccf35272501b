/* data_idx.c - IDX reader (the MNIST / Fashion-MNIST format), raw or gzip.
 *
 * Layout: 0x00 0x00 <type> <ndims>, then ndims big-endian uint32 sizes, then
 * the big-endian elements. Types: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32,
 * 0x0D f32, 0x0E f64. The first axis is the example axis. */
#define _POSIX_C_SOURCE 200809L

#include "data_readers.h"
#include "data_source.h"
#include "rt_internal.h"

#include <inttypes.h>

cannl_status cannl__load_idx(cannl_dataset *ds, const char *path, cannl_dtype dtype, cannl_error *err) {
    cannl__src s;
    cannl_status st = cannl__src_open(&s, path, err);
    if (st != CANNL_OK) return st;
    unsigned char magic[4];
    size_t got;
    st = cannl__src_read(&s, magic, 4, &got, err);
    if (st != CANNL_OK) goto done;
    if (got == 0) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "empty file (expected an IDX header)");
        goto done;
    }
    if (got < 4) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "truncated IDX header (%zu of 4 magic bytes)", got);
        goto done;
    }
    if (magic[0] != 0 || magic[1] != 0) {
        st = cannl__fail(err, CANNL_E_FORMAT, path,
                         "bad magic 0x%02x%02x%02x%02x (not an IDX file: must start with two zero bytes)", magic[0],
                         magic[1], magic[2], magic[3]);
        goto done;
    }
    cannl__etype t;
    switch (magic[2]) {
    case 0x08: t = CANNL__U8; break;
    case 0x09: t = CANNL__I8; break;
    case 0x0B: t = CANNL__I16; break;
    case 0x0C: t = CANNL__I32; break;
    case 0x0D: t = CANNL__F32; break;
    case 0x0E: t = CANNL__F64; break;
    default:
        st = cannl__fail(err, CANNL_E_FORMAT, path,
                         "unsupported IDX element type 0x%02x (expected 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, "
                         "0x0D f32 or 0x0E f64)", magic[2]);
        goto done;
    }
    const int nd = magic[3];
    if (nd < 1 || nd > CANNL_MAX_DIMS + 1) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "IDX header has %d dimensions (expected 1..%d)", nd,
                         CANNL_MAX_DIMS + 1);
        goto done;
    }
    unsigned char raw[4 * (CANNL_MAX_DIMS + 1)];
    st = cannl__src_read(&s, raw, (size_t)nd * 4, &got, err);
    if (st != CANNL_OK) goto done;
    if (got < (size_t)nd * 4) {
        st = cannl__fail(err, CANNL_E_FORMAT, path, "truncated IDX header (%zu of %d dimension bytes)", got, nd * 4);
        goto done;
    }
    int64_t dims[CANNL_MAX_DIMS + 1];
    for (int i = 0; i < nd; i++) dims[i] = (int64_t)cannl__load_be32(raw + 4 * i);
    st = cannl__dataset_init(ds, path, dtype, dims[0], nd - 1, dims + 1, &s, t, 4 + 4 * (int64_t)nd, err);
    if (st != CANNL_OK) goto done;
    st = cannl__read_payload(&s, ds, t, 1, err);
done:
    cannl__src_close(&s);
    return st;
}
