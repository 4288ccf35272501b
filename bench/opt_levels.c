/* opt_levels.c — training-step time of one generated model (bench/opt_levels.sh builds it
 * once per spec and level).
 *
 * Compiled against a model with -DOB_MODEL=<model>. Fills every input with a batch of
 * deterministic pseudo-random values in [0, 1), runs WARMUP steps, then STEPS timed steps
 * (CLOCK_MONOTONIC around the loop) and prints
 *   <ms per step> <final loss>
 * Usage: opt_levels [STEPS [WARMUP [BATCH]]]   (defaults 20, 3 and the smaller of 128 and the
 * model's max batch; models without inputs run with n = 1).
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define OB_STR_(x) #x
#define OB_STR(x) OB_STR_(x)
#define OB_CAT_(a, b) a##b
#define OB_CAT(a, b) OB_CAT_(a, b)
#ifndef OB_MODEL
#error "compile with -DOB_MODEL=<model name>"
#endif
#include OB_STR(OB_MODEL.h)
typedef OB_CAT(OB_MODEL, _real) ob_real;

static uint64_t rng_state = 0x243F6A8885A308D3u;
static double rng_uniform(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

int main(int argc, char **argv) {
    const cannl_model_api *api = &OB_CAT(OB_MODEL, _api);
    const int steps = argc > 1 ? atoi(argv[1]) : 20, warmup = argc > 2 ? atoi(argv[2]) : 3;
    int64_t n = argc > 3 ? atoll(argv[3]) : 128;
    if (n > api->max_batch) n = api->max_batch;
    if (api->num_inputs == 0) n = 1;
    if (steps < 1 || warmup < 0 || n < 1 || api->num_inputs > 16) {
        fprintf(stderr, "usage: %s [STEPS [WARMUP [BATCH]]]\n", argv[0]);
        return 2;
    }
    void *m = api->create(1u);
    ob_real *inputs[16] = {0};
    if (!m) return 2;
    for (int32_t i = 0; i < api->num_inputs; ++i) {
        const int64_t count = n * api->inputs[i].size;
        inputs[i] = (ob_real *)malloc((size_t)count * sizeof(ob_real));
        if (!inputs[i]) return 2;
        for (int64_t k = 0; k < count; ++k) inputs[i][k] = (ob_real)rng_uniform();
    }
    const void *const *in = (const void *const *)inputs;
    double loss = 0;
    for (int s = 0; s < warmup; ++s) loss = api->train_step(m, in, n);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int s = 0; s < steps; ++s) loss = api->train_step(m, in, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6) / steps;
    printf("%.4f %.9g\n", ms, loss);
    for (int32_t i = 0; i < api->num_inputs; ++i) free(inputs[i]);
    api->destroy(m);
    return 0;
}
