/* decode_bench.c - decode's speed through a generated model's C API (bench/decode_bench.sh):
 * the forward-only state with random params (uniform in [-0.05, 0.05], written through
 * state_tensors, which makes an int8 state quantise them), a prompt of P random ids prefilled,
 * then N steps, each feeding the argmax of the last logits; best of R runs. Prints the steps'
 * tokens per second and the logits' checksum (the same for fp32 at any thread count).
 *
 * Compiled against one model: -DAPI=<model>_infer_api -DDECODE=<model>_decode_api and its
 * header <model>.h included through -DHEADER='"<model>.h"'. */
#define _POSIX_C_SOURCE 200809L
#include HEADER

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const int prompt = argc > 1 ? atoi(argv[1]) : 64, steps = argc > 2 ? atoi(argv[2]) : 256;
    const int reps = argc > 3 ? atoi(argv[3]) : 3;
    const cannl_model_api *api = &API;
    const cannl_decode_api *dec = &DECODE;
    void *m = api->create(0);
    if (!m) return 1;
    const size_t n = api->state_tensors(m, NULL, 0);
    cannl_tensor *t = calloc(n + 1, sizeof *t);
    api->state_tensors(m, t, n);
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < api->num_params; ++i) {
        float *p = (float *)t[i].data;
        for (int64_t k = 0; k < api->params[i].size; ++k) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            p[k] = (float)((double)(s >> 11) / 9007199254740992.0 * 0.1 - 0.05);
        }
    }
    free(t);
    const int64_t vocab = api->outputs[0].size / dec->ctx;
    float *logits = malloc(sizeof(float) * (size_t)vocab);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)prompt);
    if (prompt + steps > dec->ctx || !logits || !ids) {
        fprintf(stderr, "prompt + steps > ctx %lld\n", (long long)dec->ctx);
        return 2;
    }
    double best = 1e30, sum = 0;
    for (int r = 0; r < reps; ++r) {
        for (int i = 0; i < prompt; ++i) ids[i] = (int32_t)((i * 7919 + 13) % vocab);
        if (dec->prefill(m, ids, prompt, logits) != CANNL_OK) return 1;
        const double t0 = now();
        sum = 0;
        for (int i = 0; i < steps; ++i) {
            int32_t next = 0;
            for (int64_t v = 1; v < vocab; ++v)
                if (logits[v] > logits[next]) next = (int32_t)v;
            if (dec->step(m, next, logits) != CANNL_OK) return 1;
            sum += logits[next];
        }
        const double dt = now() - t0;
        if (dt < best) best = dt;
    }
    printf("tokens/s: %.2f (prompt %d, %d steps, best of %d; checksum %.9g)\n", steps / best, prompt, steps, reps, sum);
    api->destroy(m);
    free(logits);
    free(ids);
    return 0;
}
