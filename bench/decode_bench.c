/* decode_bench.c - decode's speed through a generated model's C API (bench/decode_bench.sh):
 * the forward-only state with random params (uniform in [-0.05, 0.05], written through
 * state_tensors, which makes an int8 state quantise them), a prompt of P random ids prefilled,
 * then N steps, each feeding the argmax of the last logits; best of R runs. With a batch B > 1
 * (a fourth argument), B sequences at once: their prompts prefilled together
 * (decode_prefill_batch), then N batched steps (decode_step_batch), each row its own sequence.
 * Prints the steps' total tokens per second (B per step), the same per CPU second (the
 * process's CPU time over the best run: a loaded machine's figure) and the logits' checksum
 * (the same for fp32 at any thread count).
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

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The argmax of each of b rows of logits. */
static void argmax_rows(const float *logits, int64_t vocab, int b, int32_t *next) {
    for (int r = 0; r < b; ++r) {
        const float *l = logits + (size_t)r * (size_t)vocab;
        next[r] = 0;
        for (int64_t v = 1; v < vocab; ++v)
            if (l[v] > l[next[r]]) next[r] = (int32_t)v;
    }
}

int main(int argc, char **argv) {
    const int prompt = argc > 1 ? atoi(argv[1]) : 64, steps = argc > 2 ? atoi(argv[2]) : 256;
    const int reps = argc > 3 ? atoi(argv[3]) : 3, batch = argc > 4 ? atoi(argv[4]) : 1;
    const cannl_model_api *api = &API;
    const cannl_decode_api *dec = &DECODE;
    if (batch < 1 || (batch > 1 && (!dec->step_batch || batch > dec->seqs))) {
        fprintf(stderr, "batch %d: the model's decode takes %lld sequences at once\n", batch, (long long)dec->seqs);
        return 2;
    }
    void *m = api->create_batch ? api->create_batch(0, batch) : api->create(0);
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
    float *logits = malloc(sizeof(float) * (size_t)(vocab * batch));
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(prompt * batch)), next[64], seq[64];
    const int32_t *prompts[64];
    int64_t count[64];
    if (prompt + steps > dec->ctx || !logits || !ids || batch > 64) {
        fprintf(stderr, "prompt + steps > ctx %lld\n", (long long)dec->ctx);
        return 2;
    }
    for (int r = 0; r < batch; ++r) seq[r] = r, prompts[r] = ids + r * prompt, count[r] = prompt;
    double best = 1e30, best_cpu = 0, sum = 0;
    for (int rep = 0; rep < reps; ++rep) {
        for (int i = 0; i < prompt * batch; ++i) ids[i] = (int32_t)((i * 7919 + 13) % vocab);
        cannl_status st = batch == 1 ? dec->prefill(m, ids, prompt, logits)
                                     : dec->prefill_batch(m, batch, seq, prompts, count, logits);
        if (st != CANNL_OK) return 1;
        const double t0 = now(), c0 = cpu();
        sum = 0;
        for (int i = 0; i < steps; ++i) {
            argmax_rows(logits, vocab, batch, next);
            st = batch == 1 ? dec->step(m, next[0], logits) : dec->step_batch(m, batch, seq, next, logits);
            if (st != CANNL_OK) return 1;
            for (int r = 0; r < batch; ++r) sum += logits[(size_t)r * (size_t)vocab + (size_t)next[r]];
        }
        const double dt = now() - t0, dc = cpu() - c0;
        if (dt < best) best = dt, best_cpu = dc;
    }
    printf("tokens/s: %.2f (batch %d, prompt %d, %d steps, best of %d; per CPU second %.2f; checksum %.9g)\n",
           batch * steps / best, batch, prompt, steps, reps, batch * steps / best_cpu, sum);
    api->destroy(m);
    free(logits);
    free(ids);
    return 0;
}
