/* test_buffer.c - cannl_alloc / cannl_free: alignment, zeroing, edge sizes. */
#include "rt_test.h"

#include <stdint.h>

int main(void) {
    const size_t sizes[] = {0, 1, 7, 63, 64, 65, 1000, 4096, 1u << 20, 3u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = cannl_alloc(sizes[i]);
        CHECK(p != NULL);
        if (!p) continue;
        CHECK(((uintptr_t)p & 63u) == 0);
        int zero = 1;
        for (size_t k = 0; k < sizes[i]; k++) zero &= p[k] == 0;
        CHECK(zero);
        memset(p, 0xAB, sizes[i]); /* the whole block is writable (ASan checks) */
        cannl_free(p);
    }
    /* Many live blocks at once stay distinct and aligned. */
    void *blocks[100];
    for (int i = 0; i < 100; i++) {
        blocks[i] = cannl_alloc((size_t)i * 3 + 1);
        CHECK(blocks[i] && ((uintptr_t)blocks[i] & 63u) == 0);
    }
    for (int i = 0; i < 100; i++) cannl_free(blocks[i]);
    cannl_free(NULL);
    CHECK(cannl_alloc(SIZE_MAX) == NULL);
    CHECK(cannl_alloc(SIZE_MAX - 10) == NULL);
    CHECK(cannl_dtype_size(CANNL_F32) == 4 && cannl_dtype_size(CANNL_F64) == 8);
    CHECK(strcmp(cannl_status_str(CANNL_OK), "ok") == 0);
    return rt_finish("test_buffer");
}
