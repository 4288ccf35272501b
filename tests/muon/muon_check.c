/* muon_check.c — optimiser groups and Muon, run for check_muon.py: a generated float64 model
 * (compiled once per spec with -DMC_MODEL=<model>) trained STEPS steps on a fixed batch, and
 * the same run resumed from a checkpoint half way.
 *   muon_check OUTDIR STEPS
 * writes OUTDIR/inputs.bin (each input's n examples, doubles, in spec order), init.safetensors
 * (the state before the first step) and final.safetensors (after STEPS steps); then trains a
 * second state STEPS / 2 steps, saves it, loads that checkpoint into a third state created from
 * another seed, trains it the remaining steps and checks that every state tensor and the step
 * count equal the first run's bit for bit ("resume bit-exact", exit status 1 otherwise).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MC_STR_(x) #x
#define MC_STR(x) MC_STR_(x)
#define MC_CAT_(a, b) a##b
#define MC_CAT(a, b) MC_CAT_(a, b)
#include MC_STR(MC_MODEL.h)

#define API MC_CAT(MC_MODEL, _api)
#define N 4

static int save(void *m, const char *dir, const char *name) {
    char path[4096];
    cannl_error err;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (cannl_model_save(&API, m, path, NULL, 0, &err) != CANNL_OK) {
        fprintf(stderr, "save %s: %s\n", path, err.msg);
        return 1;
    }
    return 0;
}

static void train(void *m, const void *const *inputs, int steps) {
    for (int s = 0; s < steps; ++s) API.train_step(m, inputs, N);
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    const char *dir = argv[1];
    const int steps = atoi(argv[2]);
    double *inputs[8] = {0};
    if (API.num_inputs > 8 || steps < 2) return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/inputs.bin", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return 2;
    for (int i = 0; i < API.num_inputs; ++i) {  /* a fixed batch: values in (-1, 1) */
        const int64_t size = API.inputs[i].size * N;
        inputs[i] = malloc((size_t)size * sizeof(double));
        for (int64_t k = 0; k < size; ++k) inputs[i][k] = sin(0.7 * (double)k + 1.3 * (double)i + 0.2);
        fwrite(inputs[i], sizeof(double), (size_t)size, f);
    }
    fclose(f);
    const void *const *in = (const void *const *)inputs;

    void *a = API.create(7), *b = API.create(7), *c = API.create(99);
    if (!a || !b || !c) return 2;
    if (save(a, dir, "init.safetensors")) return 1;
    train(a, in, steps);
    if (save(a, dir, "final.safetensors")) return 1;
    train(b, in, steps / 2);
    if (save(b, dir, "mid.safetensors")) return 1;
    cannl_error err;
    snprintf(path, sizeof path, "%s/mid.safetensors", dir);
    if (cannl_model_load(&API, c, path, CANNL_LOAD_ALL, NULL, &err) != CANNL_OK) {
        fprintf(stderr, "load %s: %s\n", path, err.msg);
        return 1;
    }
    train(c, in, steps - steps / 2);

    cannl_tensor ta[256], tc[256];
    const size_t na = API.state_tensors(a, ta, 256), nc = API.state_tensors(c, tc, 256);
    int bad = na != nc || na > 256 || API.get_step(a) != API.get_step(c);
    for (size_t t = 0; !bad && t < na; ++t) {
        int64_t count = 1;
        for (int d = 0; d < ta[t].ndims; ++d) count *= ta[t].shape[d];
        if (strcmp(ta[t].name, tc[t].name) != 0 ||
            memcmp(ta[t].data, tc[t].data, (size_t)count * sizeof(double)) != 0) {
            fprintf(stderr, "resumed run differs in %s\n", ta[t].name);
            bad = 1;
        }
    }
    printf("%zu state tensors, step %lld: resume %s\n", na, (long long)API.get_step(a), bad ? "DIFFERS" : "bit-exact");
    API.destroy(a);
    API.destroy(b);
    API.destroy(c);
    for (int i = 0; i < API.num_inputs; ++i) free(inputs[i]);
    return bad;
}
