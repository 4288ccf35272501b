/* fuzz_safetensors.c - libFuzzer harness of the safetensors reader (checkpoint.c, json_min.c):
 * the input is one checkpoint file. An opened one must hold readable metadata and tensors
 * tiling its data; every tensor is read as float32 and as float64 with the shape it declares
 * (only F32/F64 tensors of rank <= 8 may be read). A refused one says why in one line naming
 * the file. */
#include "cannl_rt.h"
#include "fuzz_util.h"
#include "rt_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write(data, size, ".safetensors");
    cannl_checkpoint *ck = NULL;
    cannl_error err;
    err.msg[0] = '\0';
    if (cannl_checkpoint_open(path, NULL, &ck, &err) != CANNL_OK) {
        FUZZ_ASSERT(ck == NULL);
        fuzz_check_message(err.msg, path);
        return 0;
    }
    (void)cannl_checkpoint_meta(ck, CANNL_META_MODEL);
    (void)cannl_checkpoint_meta(ck, CANNL_META_STEP);
    cannl_tensor t;
    size_t total = 0;
    for (size_t i = 0; cannl__checkpoint_tensor(ck, i, &t); i++) {
        if (t.ndims > CANNL_MAX_DIMS) { /* opens, but cannot be read */
            t.data = NULL;
            FUZZ_ASSERT(cannl_checkpoint_read(ck, &t, &err) == CANNL_E_MISMATCH);
            continue;
        }
        int64_t count = 1;
        for (int32_t d = 0; d < t.ndims; d++) count *= t.shape[d];
        FUZZ_ASSERT(count >= 0 && (uint64_t)count <= size); /* the file holds every element */
        total += (size_t)count;
        for (int k = 0; k < 2; k++) {
            t.dtype = k ? CANNL_F64 : CANNL_F32;
            t.data = malloc((size_t)count * 8 + 1);
            FUZZ_ASSERT(t.data != NULL);
            cannl_status st = cannl_checkpoint_read(ck, &t, &err);
            if (st != CANNL_OK) fuzz_check_message(err.msg, path);
            free(t.data);
        }
    }
    FUZZ_ASSERT(total <= size);
    cannl_checkpoint_close(ck);
    return 0;
}
