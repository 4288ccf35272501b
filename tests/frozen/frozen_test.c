/* frozen_test.c — buffers and frozen params (frozen_buffer.cannl) through the C API: they have
 * no gradient and no optimiser state, training leaves them as initialised while the other
 * params move, and they are saved in checkpoints and loaded back like params.
 * Usage: frozen_test DIR (a directory for the checkpoint). Exit 0 when every check holds.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frozen_buffer.h"

static int failures = 0;
#define CHECK(cond)                                                     \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "frozen_test:%d: failed: %s\n", __LINE__, #cond); \
            ++failures;                                                 \
        }                                                               \
    } while (0)

static double sum_abs_diff(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += fabs((double)a[i] - (double)b[i]);
    return s;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    frozen_buffer *m = frozen_buffer_create(7u);
    if (!m) return 2;
    const char *names[4] = {"mu", "w", "emb", "frozen"};
    float before[4][6];
    int64_t counts[4];
    for (int k = 0; k < 4; ++k) {
        const float *p = frozen_buffer_param(m, names[k], &counts[k]);
        CHECK(p && counts[k] <= 6);
        if (p) memcpy(before[k], p, (size_t)counts[k] * sizeof(float));
    }
    float x[4 * 3], y[4 * 2];
    for (int i = 0; i < 12; ++i) x[i] = (float)((i * 7) % 5) / 5.0f - 0.4f;
    for (int i = 0; i < 8; ++i) y[i] = (float)((i * 3) % 4) / 4.0f;
    const float *inputs[2] = {x, y};
    for (int s = 0; s < 3; ++s) CHECK(!isnan(frozen_buffer_train_step(m, inputs, 4)));
    /* No gradient for the buffer and the frozen param; the others have one and moved. */
    CHECK(frozen_buffer_grad(m, "mu", NULL) == NULL);
    CHECK(frozen_buffer_grad(m, "emb", NULL) == NULL);
    CHECK(frozen_buffer_grad(m, "w", NULL) != NULL);
    CHECK(frozen_buffer_grad(m, "frozen", NULL) != NULL);
    for (int k = 0; k < 4; ++k) {
        const double moved = sum_abs_diff(before[k], frozen_buffer_param(m, names[k], NULL), counts[k]);
        if (k == 0 || k == 2) CHECK(moved == 0);
        else CHECK(moved > 0);
    }
    /* The state: 4 params (the buffer and the frozen one among them) and Adam's two tensors
       for each of the 2 trained ones. */
    cannl_tensor t[16];
    const size_t n = frozen_buffer_state_tensors(m, t, 16);
    CHECK(n == 8);
    for (size_t i = 0; i < n; ++i) {
        CHECK(strncmp(t[i].name, "mu.", 3) != 0);
        CHECK(strncmp(t[i].name, "emb.", 4) != 0);
    }
    /* Saved and loaded back into a state initialised otherwise. */
    char path[4096];
    snprintf(path, sizeof path, "%s/frozen.safetensors", argv[1]);
    cannl_error err;
    CHECK(frozen_buffer_save(m, path, &err) == CANNL_OK);
    frozen_buffer *m2 = frozen_buffer_create(99u);
    if (!m2) return 2;
    CHECK(sum_abs_diff(before[0], frozen_buffer_param(m2, "mu", NULL), counts[0]) > 0);
    CHECK(frozen_buffer_load(m2, path, CANNL_LOAD_PARAMS, &err) == CANNL_OK);
    CHECK(sum_abs_diff(before[0], frozen_buffer_param(m2, "mu", NULL), counts[0]) == 0);
    CHECK(sum_abs_diff(before[2], frozen_buffer_param(m2, "emb", NULL), counts[2]) == 0);
    frozen_buffer_destroy(m2);
    frozen_buffer_destroy(m);
    if (failures == 0) printf("frozen_test: ok\n");
    return failures ? 1 : 0;
}
