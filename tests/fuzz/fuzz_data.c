/* fuzz_data.c - libFuzzer harness of the data readers: the input is one IDX, .npy or CSV file
 * (FUZZ_FORMAT, compiled once per format), maybe gzip-compressed. It is loaded as float32 and
 * as float64; a loaded dataset must be consistent (counts, finite values) and go through
 * one-hot encoding and a gather; a refused one must leave the dataset zeroed and say why in one
 * line naming the file. A CSV input is also loaded with a declared header (PATH:header). */
#include "cannl_rt.h"
#include "fuzz_util.h"
#include "rt_internal.h"

#include <math.h>

#ifndef FUZZ_FORMAT
#error "define FUZZ_FORMAT (CANNL_FMT_IDX, CANNL_FMT_NPY or CANNL_FMT_CSV) and FUZZ_SUFFIX"
#endif

static void check_loaded(cannl_dataset *ds, cannl_dtype dtype) {
    FUZZ_ASSERT(ds->count >= 0 && ds->elems >= 0 && ds->data != NULL && ds->dtype == dtype);
    FUZZ_ASSERT(ds->ndims >= 0 && ds->ndims <= CANNL_MAX_DIMS);
    int64_t elems = 1;
    for (int32_t d = 0; d < ds->ndims; d++) elems *= ds->dims[d];
    FUZZ_ASSERT(elems == ds->elems);
    const size_t n = (size_t)(ds->count * ds->elems);
    for (size_t i = 0; i < n; i++) {
        const double v = dtype == CANNL_F32 ? (double)((const float *)ds->data)[i] : ((const double *)ds->data)[i];
        FUZZ_ASSERT(isfinite(v)); /* the readers refuse nan, inf and overflow */
    }
    if (ds->count > 0) { /* the first and the last example, twice */
        const int64_t idx[4] = {0, ds->count - 1, ds->count - 1, 0};
        void *buf = malloc(4 * (size_t)ds->elems * cannl_dtype_size(dtype) + 1);
        FUZZ_ASSERT(buf != NULL);
        cannl_error err;
        FUZZ_ASSERT(cannl_dataset_gather(ds, idx, 4, buf, &err) == CANNL_OK);
        free(buf);
    }
    cannl_error err;
    const int64_t count = ds->count, elems_before = ds->elems;
    if (count > (1 << 16)) return; /* one-hot of a big file: memory, nothing new */
    if (cannl_dataset_one_hot(ds, 10, &err) == CANNL_OK)
        FUZZ_ASSERT(ds->count == count && ds->elems == 10);
    else
        FUZZ_ASSERT(ds->count == count && ds->elems == elems_before); /* left unchanged */
}

/* Load the file at path (bound: as the binding PATH:header). */
static void load(const char *path, int bound, cannl_dtype dtype) {
    cannl_dataset ds;
    cannl_error err;
    err.msg[0] = '\0';
    char spec[600];
    snprintf(spec, sizeof spec, "%s:header", path);
    cannl_status st = bound ? cannl__dataset_load_bound(&ds, spec, dtype, &err)
                            : cannl_dataset_load(&ds, path, FUZZ_FORMAT, dtype, &err);
    if (st == CANNL_OK) {
        check_loaded(&ds, dtype);
        cannl_dataset_free(&ds);
        FUZZ_ASSERT(ds.data == NULL);
    } else {
        FUZZ_ASSERT(ds.data == NULL && ds.count == 0);
        fuzz_check_message(err.msg, path);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write(data, size, FUZZ_SUFFIX);
    load(path, 0, CANNL_F32);
    load(path, 0, CANNL_F64);
    if (FUZZ_FORMAT == CANNL_FMT_CSV) load(path, 1, CANNL_F32);
    return 0;
}
