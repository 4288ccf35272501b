/* fake_bigram.c - a hand-written bigram language model implementing cannl_model_api with
 * integer inputs (cannl_tensor_info.ids), standing in for a generated language model in the
 * runtime's tests of integer data and token streams.
 *
 * fake_bigram: byte-level (vocab 256), float32. Inputs tokens [8] and next [8], int32 ids in
 * [0, 256); output logits [8, 256]; param table [256, 256] (row = the current token's logits of
 * the next), normal(0, 0.02) from the seed. loss = mean over examples and positions of the
 * cross-entropy of logits[t] against next[t]; metric accuracy (argmax == next, the same mean).
 * Plain SGD, lr 1.0 (used as a float, which get_last_lr reports, as generated code does), max
 * batch 32. Sequential loops: the same bits on every run. */
#include "fake_models.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { V = 256, T = 8 };

typedef struct bigram {
    float table[V * V];
    float grad[V * V];
    int64_t step;
    double lr;
    double last_lr; /* the lr the last step used, (float)lr; 0 before this state's first step */
} bigram;

static const cannl_tensor_info BG_INPUTS[] = {{"tokens", 1, {T}, T, V}, {"next", 1, {T}, T, V}};
static const cannl_tensor_info BG_OUTPUTS[] = {{"logits", 2, {T, V}, T * V, 0}};
static const cannl_tensor_info BG_PARAMS[] = {{"table", 2, {V, V}, V * V, 0}};
static const char *const BG_METRICS[] = {"accuracy"};

static void *bg_create(uint64_t seed) {
    bigram *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    cannl_rng rng;
    cannl_rng_seed(&rng, seed);
    for (int i = 0; i < V * V; i++) m->table[i] = (float)(0.02 * cannl_rng_normal(&rng));
    m->lr = fake_bigram_api.lr;
    return m;
}

static void bg_destroy(void *m) { free(m); }

/* Softmax of the row of token a into p; returns -log p[b] and whether argmax == b. */
static double bg_row(const bigram *m, int32_t a, int32_t b, float *p, int *hit) {
    const float *z = m->table + (size_t)a * V;
    float mx = z[0];
    int k = 0;
    for (int c = 1; c < V; c++)
        if (z[c] > mx) mx = z[c], k = c;
    double sum = 0;
    for (int c = 0; c < V; c++) sum += (double)(p[c] = expf(z[c] - mx));
    for (int c = 0; c < V; c++) p[c] = (float)((double)p[c] / sum);
    *hit = k == b;
    return log(sum) - (double)(z[b] - mx);
}

static double bg_train_step(void *mp, const void *const *in, int64_t n) {
    bigram *m = mp;
    const int32_t *tok = in[0], *nxt = in[1];
    float p[V];
    int hit;
    double loss = 0;
    const float scale = 1.0f / (float)(n * T);
    memset(m->grad, 0, sizeof m->grad);
    for (int64_t i = 0; i < n * T; i++) {
        loss += bg_row(m, tok[i], nxt[i], p, &hit);
        float *g = m->grad + (size_t)tok[i] * V;
        for (int c = 0; c < V; c++) g[c] += (p[c] - (c == nxt[i])) * scale;
    }
    const float lr = (float)m->lr;
    m->last_lr = (double)lr;
    for (int i = 0; i < V * V; i++) m->table[i] -= lr * m->grad[i];
    m->step++;
    return loss / (double)(n * T);
}

static void bg_eval(void *mp, const void *const *in, int64_t n, double *loss, double *metrics) {
    const bigram *m = mp;
    const int32_t *tok = in[0], *nxt = in[1];
    float p[V];
    double l = 0, hits = 0;
    for (int64_t i = 0; i < n * T; i++) {
        int hit;
        l += bg_row(m, tok[i], nxt[i], p, &hit);
        hits += hit;
    }
    *loss = l / (double)(n * T);
    metrics[0] = hits / (double)(n * T);
}

static void bg_forward(void *mp, const void *const *in, int64_t n, void *const *out) {
    const bigram *m = mp;
    const int32_t *tok = in[0];
    float *logits = out[0];
    for (int64_t i = 0; i < n * T; i++) memcpy(logits + i * V, m->table + (size_t)tok[i] * V, V * sizeof(float));
}

static size_t bg_state(void *mp, cannl_tensor *out, size_t cap) {
    bigram *m = mp;
    if (cap >= 1) out[0] = (cannl_tensor){"table", CANNL_F32, 2, {V, V}, m->table};
    return 1;
}

static int64_t bg_get_step(const void *m) { return ((const bigram *)m)->step; }
static void bg_set_step(void *m, int64_t s) { ((bigram *)m)->step = s; }
static double bg_get_lr(const void *m) { return ((const bigram *)m)->lr; }
static void bg_set_lr(void *m, double lr) { ((bigram *)m)->lr = lr; }
static double bg_get_last_lr(const void *m) { return ((const bigram *)m)->last_lr; }
static void bg_set_threads(int n) { (void)n; }

static const unsigned char BG_FORWARD_READS[] = {1, 0};

const cannl_model_api fake_bigram_api = {
    .name = "fake_bigram",
    .dtype = CANNL_F32,
    .max_batch = 32,
    .num_inputs = 2,
    .inputs = BG_INPUTS,
    .num_outputs = 1,
    .outputs = BG_OUTPUTS,
    .num_params = 1,
    .params = BG_PARAMS,
    .num_metrics = 1,
    .metric_names = BG_METRICS,
    .loss_name = "loss",
    .lr = 1.0,
    .create = bg_create,
    .destroy = bg_destroy,
    .train_step = bg_train_step,
    .eval = bg_eval,
    .forward = bg_forward,
    .state_tensors = bg_state,
    .get_step = bg_get_step,
    .set_step = bg_set_step,
    .get_lr = bg_get_lr,
    .set_lr = bg_set_lr,
    .set_threads = bg_set_threads,
    .forward_reads = BG_FORWARD_READS,
    .get_last_lr = bg_get_last_lr,
};
