/* fake_prefetch_train.c - fake_softmax's training program through cannl_train_main_ext, with
 * a prefetch hook as the CUDA target's models have: it records what it is given (the inputs of
 * the step after the coming one), and each train_step checks that it gets exactly the batch
 * prefetched for it (same pointers, same data, same n). At exit it prints "prefetch: P
 * prefetched, S steps, M matched, B bad" on stderr; the status is 1 when a step got other
 * inputs than were prefetched for it, or a prefetched batch was never trained on. test_train's case
 * "prefetch" compares its checkpoints with fake_train's: prefetching must not change a run.
 * FAKE_PREFETCH_MODEL=bigram: fake_bigram's instead (runtime.streams: token-stream runs). */
#include "fake_models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cannl_model_api g_api;
static const cannl_model_api *g_base; /* the model wrapped */
/* What a prefetch was given: the inputs of step `for_step` (0-based), the one after the step
   that follows the call. */
typedef struct record {
    const void *ptr[8];
    int64_t n, for_step;
    uint64_t hash;
} record;
static record g_rec[2];
static int g_nrec;
static int64_t g_prefetched, g_steps, g_matched, g_bad;

static uint64_t hash(const void *const *inputs, int64_t n) {
    uint64_t h = 1469598103934665603u;
    for (int32_t i = 0; i < g_api.num_inputs; i++) {
        const unsigned char *p = inputs[i];
        size_t bytes = (size_t)n * (size_t)g_api.inputs[i].size * 4; /* float or int32 ids */
        for (size_t k = 0; k < bytes; k++) h = (h ^ p[k]) * 1099511628211u;
    }
    return h;
}

static void prefetch(void *m, const void *const *inputs, int64_t n) {
    (void)m;
    if (g_nrec == 2) { /* more than one batch ahead */
        g_bad++;
        return;
    }
    record *r = &g_rec[g_nrec++];
    for (int32_t i = 0; i < g_api.num_inputs; i++) r->ptr[i] = inputs[i];
    r->n = n;
    r->for_step = g_steps + 1;
    r->hash = hash(inputs, n);
    g_prefetched++;
}

static double train_step(void *m, const void *const *inputs, int64_t n) {
    const int64_t step = g_steps++;
    int keep = 0;
    for (int k = 0; k < g_nrec; k++) {
        const record *r = &g_rec[k];
        if (r->for_step > step) {
            g_rec[keep++] = *r;
            continue;
        }
        int same = r->for_step == step && n == r->n && hash(inputs, n) == r->hash;
        for (int32_t i = 0; i < g_api.num_inputs; i++) same = same && inputs[i] == r->ptr[i];
        if (same) g_matched++;
        else g_bad++;
    }
    g_nrec = keep;
    return g_base->train_step(m, inputs, n);
}

static const char *error(const void *m) {
    (void)m;
    return NULL;
}

int main(int argc, char **argv) {
    const char *which = getenv("FAKE_PREFETCH_MODEL");
    g_base = which && strcmp(which, "bigram") == 0 ? &fake_bigram_api : &fake_softmax_api;
    g_api = *g_base;
    g_api.train_step = train_step;
    const cannl_model_ext ext = {prefetch, error, NULL, NULL}; /* grads on the host */
    int rc = cannl_train_main_ext(&g_api, &ext, argc, argv);
    g_bad += g_nrec; /* prefetched, never trained on */
    fprintf(stderr, "prefetch: %lld prefetched, %lld steps, %lld matched, %lld bad\n", (long long)g_prefetched,
            (long long)g_steps, (long long)g_matched, (long long)g_bad);
    return rc ? rc : g_bad ? 1 : 0;
}
