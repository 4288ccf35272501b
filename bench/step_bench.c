/* step_bench.c — times the training step of one generated model through its C API.
 *
 * Built by bench/run.sh once per model with -DCANNL_BENCH_API=<model>_api, linked with the
 * model's generated <model>.c and the cannl runtime. Usage:
 *     step_bench BATCH WARMUP STEPS THREADS
 * Fills every input with synthetic data of the right kind (an integer input: ids uniform in
 * [0, ids); an input named `label`: one-hot classes; `target`: 0/1; `image`: pixels 0..255;
 * anything else: uniform in [-1, 1)), runs
 * WARMUP steps untimed, then times each of STEPS steps on its own, cycling through 8
 * different batches, and prints one JSON line: the median, 10th and 90th percentile step
 * times in microseconds, the process's CPU time per timed step (mean; on one thread, the step's
 * time while it had the core), and the instruction set of the runtime's kernels (cannl_isa_select:
 * the CPU's best, or CANNL_ISA). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cannl_rt.h"

extern const cannl_model_api CANNL_BENCH_API;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { BATCHES = 8 };

/* bench/step_profile.c, when linked in: where the timed steps go (weak: absent, not called). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((weak)) void cannl_bench_profile_start(void);
__attribute__((weak)) void cannl_bench_profile_report(long steps, double step_cpu_us);
#else
static void (*const cannl_bench_profile_start)(void) = 0;
static void (*const cannl_bench_profile_report)(long, double) = 0;
#endif

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s BATCH WARMUP STEPS THREADS\n", argv[0]);
        return 2;
    }
    const cannl_model_api *api = &CANNL_BENCH_API;
    const long batch = atol(argv[1]), warmup = atol(argv[2]), steps = atol(argv[3]);
    const int threads = atoi(argv[4]);
    if (batch < 1 || batch > api->max_batch || steps < 1 || warmup < 0 || threads < 1) {
        fprintf(stderr, "step_bench: bad arguments\n");
        return 2;
    }
    if (api->dtype != CANNL_F32) {
        fprintf(stderr, "step_bench: float32 models only\n");
        return 2;
    }
    api->set_threads(threads);
    void *m = api->create(0);
    if (!m) return 1;
    const int ni = api->num_inputs;
    if (ni > 16) {
        fprintf(stderr, "step_bench: more than 16 inputs\n");
        return 2;
    }
    float *data[BATCHES][16];
    const void *inputs[BATCHES][16];
    uint64_t s = 88172645463325252ull;
    for (int b = 0; b < BATCHES; ++b)
        for (int i = 0; i < ni; ++i) {
            const cannl_tensor_info *in = &api->inputs[i];
            float *d = malloc(sizeof(float) * (size_t)(in->size * batch));
            if (!d) return 1;
            if (in->ids > 0) { /* int32 ids (same size as float) */
                int32_t *id = (int32_t *)(void *)d;
                for (long j = 0; j < in->size * batch; ++j) {
                    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                    id[j] = (int32_t)((s >> 11) % (uint64_t)in->ids);
                }
                data[b][i] = d;
                inputs[b][i] = d;
                continue;
            }
            for (long e = 0; e < batch; ++e) {
                float *x = d + e * in->size;
                for (long j = 0; j < in->size; ++j) {
                    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
                    const double u = (double)(s >> 11) / 9007199254740992.0;
                    if (strcmp(in->name, "label") == 0) x[j] = 0;
                    else if (strcmp(in->name, "target") == 0) x[j] = u < 0.5 ? 0.f : 1.f;
                    else if (strcmp(in->name, "image") == 0) x[j] = (float)(255 * u);
                    else x[j] = (float)(2 * u - 1);
                }
                if (strcmp(in->name, "label") == 0) x[(e * 7 + b) % in->size] = 1;
            }
            data[b][i] = d;
            inputs[b][i] = d;
        }
    for (long k = 0; k < warmup; ++k) api->train_step(m, inputs[k % BATCHES], batch);
    double *t = malloc(sizeof(double) * (size_t)steps);
    if (!t) return 1;
    double loss = 0;
    struct timespec c0, c1;
    if (cannl_bench_profile_start) cannl_bench_profile_start();
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (long k = 0; k < steps; ++k) {
        const double t0 = now_us();
        loss = api->train_step(m, inputs[k % BATCHES], batch);
        t[k] = now_us() - t0;
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    const double cpu_us = ((double)(c1.tv_sec - c0.tv_sec) * 1e6 + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-3) / (double)steps;
    if (cannl_bench_profile_report) cannl_bench_profile_report(steps, cpu_us);
    qsort(t, (size_t)steps, sizeof(double), cmp_double);
    cannl_isa isa;
    cannl_isa_select(&isa, NULL);
    printf("{\"model\": \"%s\", \"batch\": %ld, \"threads\": %d, \"steps\": %ld, \"median_us\": %.3f, "
           "\"p10_us\": %.3f, \"p90_us\": %.3f, \"cpu_us\": %.3f, \"loss\": %.6g, \"isa\": \"%s\"}\n",
           api->name, batch, threads, steps, t[steps / 2], t[steps / 10], t[steps * 9 / 10], cpu_us, loss,
           cannl_isa_name(isa));
    for (int b = 0; b < BATCHES; ++b)
        for (int i = 0; i < ni; ++i) free(data[b][i]);
    free(t);
    api->destroy(m);
    return 0;
}
