/* train_parity.c - one model's training on two targets, compared: built once against the C
 * target's generated code and once against the CUDA target's (tests/cuda/emu_train.sh: the .cu
 * run on the CPU stand-in of tests/cuda/emu/), both in float64, through the runtime's generic
 * model table (PARITY_API: <model>_api).
 *
 *   train_parity OUT [REF]
 *
 * Creates the model from seed 7 for BATCH examples (create_batch: both targets size the state for
 * it, below the generated max_batch; create_batch out of range gives NULL and a call on BATCH + 1
 * examples is refused with NaN; both targets draw the same params: the C target's random
 * streams, on the host), trains STEPS steps of BATCH examples (ids and reals from a fixed
 * xorshift stream, the same on both; the last step through train_grads and train_update, the
 * halves of a data-parallel step), and writes OUT: a line per loss, then every state tensor
 * (params and optimiser state, state_tensors' names, which are the checkpoint's) a line of its
 * values. With REF (the other target's OUT) it compares them by name: each value within
 * TOL * max(1, |ref|), every tensor of REF present, and prints the largest difference.
 * Exit status: 0 agree, 1 differ or fail. */
#include PARITY_HEADER

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef STEPS
#define STEPS 3
#endif
#ifndef BATCH
#define BATCH 3
#endif
#define TOL 1e-10
#define MAX_TENSORS 4096

static uint64_t rng_state = 88172645463325252ull;
static double uniform(void) { /* xorshift64, [0, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

typedef struct {
    char name[256];
    long count;
    double *v;
} tensor;

static int read_all(const char *path, tensor *out, int cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    while (n < cap && fscanf(f, "%255s %ld", out[n].name, &out[n].count) == 2) {
        out[n].v = (double *)malloc((size_t)(out[n].count > 0 ? out[n].count : 1) * sizeof(double));
        for (long i = 0; i < out[n].count; ++i)
            if (fscanf(f, "%lf", &out[n].v[i]) != 1) {
                fclose(f);
                return -1;
            }
        ++n;
    }
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: train_parity OUT [REF]\n");
        return 1;
    }
    const cannl_model_api *api = &PARITY_API;
    if (api->dtype != CANNL_F64) {
        fprintf(stderr, "train_parity compares float64 builds\n");
        return 1;
    }
    if (!api->create_batch || api->max_batch <= BATCH) {
        fprintf(stderr, "train_parity needs create_batch and a max_batch above %d\n", BATCH);
        return 1;
    }
    if (api->create_batch(7, 0) || api->create_batch(7, api->max_batch + 1)) {
        fprintf(stderr, "FAIL: create_batch out of range gave a state\n");
        return 1;
    }
    void *m = api->create_batch(7, BATCH);
    if (!m) return 1;
    FILE *out = fopen(argv[1], "w");
    if (!out) return 1;
    /* the inputs: per example input_info's size, ids in [0, ids) (room for the refused BATCH + 1) */
    void *inputs[16] = {0};
    for (int k = 0; k < api->num_inputs; ++k) inputs[k] = calloc((size_t)(api->inputs[k].size * (BATCH + 1)), 8);
    if (!isnan(api->train_step(m, (const void *const *)inputs, BATCH + 1))) {
        fprintf(stderr, "FAIL: train_step on %d examples, above the state's max_batch %d, was not refused\n",
                BATCH + 1, BATCH);
        return 1;
    }
    for (int step = 0; step < STEPS; ++step) {
        for (int k = 0; k < api->num_inputs; ++k) {
            const cannl_tensor_info *in = &api->inputs[k];
            for (long i = 0; i < in->size * BATCH; ++i)
                if (in->ids > 0) ((int32_t *)inputs[k])[i] = (int32_t)(uniform() * (double)(in->ids < 1000 ? in->ids : 1000));
                else ((double *)inputs[k])[i] = uniform() - 0.5;
        }
        /* the last step through the halves data-parallel training runs (train_grads, then
           train_update), the others through train_step */
        double loss;
        if (step == STEPS - 1 && api->train_grads && api->train_update) {
            loss = api->train_grads(m, (const void *const *)inputs, BATCH);
            api->train_update(m);
        } else {
            loss = api->train_step(m, (const void *const *)inputs, BATCH);
        }
        fprintf(out, "loss.%d 1 %.17g\n", step, loss);
    }
    static cannl_tensor t[MAX_TENSORS];
    const size_t count = api->state_tensors(m, t, MAX_TENSORS);
    if (count > MAX_TENSORS) return 1;
    for (size_t i = 0; i < count; ++i) {
        long size = 1;
        for (int d = 0; d < t[i].ndims; ++d) size *= (long)t[i].shape[d];
        fprintf(out, "%s %ld", t[i].name, size);
        for (long j = 0; j < size; ++j) fprintf(out, " %.17g", ((const double *)t[i].data)[j]);
        fprintf(out, "\n");
    }
    fclose(out);
    api->destroy(m);
    if (argc < 3) return 0;

    static tensor a[MAX_TENSORS], r[MAX_TENSORS];
    const int na = read_all(argv[1], a, MAX_TENSORS), nr = read_all(argv[2], r, MAX_TENSORS);
    if (na < 0 || nr < 0 || na != nr) {
        fprintf(stderr, "FAIL: %d tensors here, %d in %s\n", na, nr, argv[2]);
        return 1;
    }
    double worst = 0;
    int failures = 0;
    for (int i = 0; i < nr; ++i) {
        int j = 0;
        while (j < na && strcmp(a[j].name, r[i].name) != 0) ++j;
        if (j == na || a[j].count != r[i].count) {
            fprintf(stderr, "FAIL: %s missing or of another size\n", r[i].name);
            ++failures;
            continue;
        }
        for (long k = 0; k < r[i].count; ++k) {
            const double d = fabs(a[j].v[k] - r[i].v[k]) / fmax(1.0, fabs(r[i].v[k]));
            if (d > worst) worst = d;
            if (!(d <= TOL) && failures++ < 10)
                fprintf(stderr, "FAIL: %s[%ld]: %.17g, reference %.17g\n", r[i].name, k, a[j].v[k], r[i].v[k]);
        }
    }
    printf("%d tensors (losses, params, optimiser state) after %d steps: largest difference %.3g (tolerance %g)\n", nr,
           STEPS, worst, TOL);
    return failures ? 1 : 0;
}
