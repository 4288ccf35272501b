/* fake_models.c - see fake_models.h. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "fake_models.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The test hooks (see fake_models.h), read when a model is created. */
typedef struct hooks {
    int64_t signal_at;  /* FAKE_SIGNAL_AT_STEP=N[:INT|TERM|HUP|KILL] */
    int signal;
    int64_t nan_at;     /* FAKE_NAN_AT_STEP=N */
    long delay_ms;      /* FAKE_STEP_DELAY_MS=N */
    int64_t term_at_eval; /* FAKE_TERM_AT_EVAL=K: SIGTERM in the K-th eval call (1-based), each call printed */
    int64_t evals;
} hooks;

static hooks read_hooks(void) {
    hooks h = {-1, SIGINT, -1, 0, -1, 0};
    const char *s = getenv("FAKE_SIGNAL_AT_STEP");
    if (s) {
        char *end;
        h.signal_at = (int64_t)strtoll(s, &end, 10);
        if (strcmp(end, ":TERM") == 0) h.signal = SIGTERM;
        if (strcmp(end, ":HUP") == 0) h.signal = SIGHUP;
        if (strcmp(end, ":KILL") == 0) h.signal = SIGKILL;
    }
    if ((s = getenv("FAKE_NAN_AT_STEP"))) h.nan_at = (int64_t)strtoll(s, NULL, 10);
    if ((s = getenv("FAKE_STEP_DELAY_MS"))) h.delay_ms = strtol(s, NULL, 10);
    if ((s = getenv("FAKE_TERM_AT_EVAL"))) h.term_at_eval = (int64_t)strtoll(s, NULL, 10);
    return h;
}

/* After the update of step `step`: the delay, the nan, the signal. */
static void after_step(const hooks *h, int64_t step, void *nan_target, int is_f32) {
    if (h->delay_ms > 0) {
        struct timespec ts = {h->delay_ms / 1000, (h->delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) continue;
    }
    if (step == h->nan_at) {
        if (is_f32) *(float *)nan_target = NAN;
        else *(double *)nan_target = NAN;
    }
    if (step == h->signal_at) raise(h->signal);
}

static void fake_set_threads(int n) {
    printf("fake: set_threads(%d)\n", n);
}

/* ================================================================ fake_softmax */

enum { F = 4, C = 3 };

typedef struct softmax {
    float w[F * C], b[C];
    float mw[F * C], mb[C]; /* momentum buffers */
    int64_t step;
    double lr;
    hooks hooks;
} softmax;

static const cannl_tensor_info SM_INPUTS[] = {{"x", 2, {2, 2}, F, 0}, {"y", 1, {C}, C, 0}};
static const cannl_tensor_info SM_OUTPUTS[] = {{"probs", 1, {C}, C, 0}};
static const cannl_tensor_info SM_PARAMS[] = {{"w", 2, {F, C}, F * C, 0}, {"b", 1, {C}, C, 0}};
static const char *const SM_METRICS[] = {"accuracy"};

static void *sm_create(uint64_t seed) {
    softmax *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    cannl_rng rng;
    cannl_rng_seed(&rng, seed);
    for (int i = 0; i < F * C; i++) m->w[i] = (float)(0.1 * cannl_rng_normal(&rng));
    m->lr = fake_softmax_api.lr;
    m->hooks = read_hooks();
    return m;
}

static void sm_destroy(void *m) { free(m); }

/* Probabilities of example x; returns -log p[label of y] when y is given. */
static double sm_probs(const softmax *m, const float *x, const float *y, float *p) {
    float mx = -INFINITY;
    for (int c = 0; c < C; c++) {
        float z = m->b[c];
        for (int f = 0; f < F; f++) z += x[f] * m->w[f * C + c];
        p[c] = z;
        if (z > mx) mx = z;
    }
    float sum = 0;
    for (int c = 0; c < C; c++) sum += (p[c] = expf(p[c] - mx));
    double loss = 0;
    for (int c = 0; c < C; c++) {
        p[c] /= sum;
        if (y) loss -= (double)y[c] * log((double)p[c] + 1e-12);
    }
    return loss;
}

static int argmax(const float *v) {
    int k = 0;
    for (int c = 1; c < C; c++)
        if (v[c] > v[k]) k = c;
    return k;
}

static double sm_train_step(void *mp, const void *const *in, int64_t n) {
    softmax *m = mp;
    const float *x = in[0], *y = in[1];
    float gw[F * C] = {0}, gb[C] = {0}, p[C];
    double loss = 0;
    for (int64_t e = 0; e < n; e++) {
        loss += sm_probs(m, x + e * F, y + e * C, p);
        for (int c = 0; c < C; c++) {
            float d = (p[c] - y[e * C + c]) / (float)n;
            gb[c] += d;
            for (int f = 0; f < F; f++) gw[f * C + c] += x[e * F + f] * d;
        }
    }
    const float lr = (float)m->lr;
    for (int i = 0; i < F * C; i++) {
        m->mw[i] = 0.9f * m->mw[i] + gw[i];
        m->w[i] -= lr * m->mw[i];
    }
    for (int c = 0; c < C; c++) {
        m->mb[c] = 0.9f * m->mb[c] + gb[c];
        m->b[c] -= lr * m->mb[c];
    }
    m->step++;
    after_step(&m->hooks, m->step, &m->mb[0], 1);
    return loss / (double)n;
}

static void sm_eval(void *mp, const void *const *in, int64_t n, double *loss, double *metrics) {
    softmax *m = mp;
    if (m->hooks.term_at_eval > 0) {
        printf("fake: eval %lld\n", (long long)++m->hooks.evals);
        if (m->hooks.evals == m->hooks.term_at_eval) raise(SIGTERM);
    }
    const float *x = in[0], *y = in[1];
    float p[C];
    double l = 0, hits = 0;
    for (int64_t e = 0; e < n; e++) {
        l += sm_probs(m, x + e * F, y + e * C, p);
        hits += argmax(p) == argmax(y + e * C);
    }
    *loss = l / (double)n;
    metrics[0] = hits / (double)n;
}

static void sm_forward(void *mp, const void *const *in, int64_t n, void *const *out) {
    const float *x = in[0];
    float *probs = out[0];
    for (int64_t e = 0; e < n; e++) sm_probs(mp, x + e * F, NULL, probs + e * C);
}

static size_t sm_state(void *mp, cannl_tensor *out, size_t cap) {
    softmax *m = mp;
    const cannl_tensor all[] = {
        {"w", CANNL_F32, 2, {F, C}, m->w},
        {"b", CANNL_F32, 1, {C}, m->b},
        {"w.momentum_buffer", CANNL_F32, 2, {F, C}, m->mw},
        {"b.momentum_buffer", CANNL_F32, 1, {C}, m->mb},
    };
    const size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n && i < cap; i++) out[i] = all[i];
    return n;
}

static int64_t sm_get_step(const void *m) { return ((const softmax *)m)->step; }
static void sm_set_step(void *m, int64_t s) { ((softmax *)m)->step = s; }
static double sm_get_lr(const void *m) { return ((const softmax *)m)->lr; }
static void sm_set_lr(void *m, double lr) { ((softmax *)m)->lr = lr; }

const cannl_model_api fake_softmax_api = {
    .name = "fake_softmax",
    .dtype = CANNL_F32,
    .max_batch = 16,
    .num_inputs = 2,
    .inputs = SM_INPUTS,
    .num_outputs = 1,
    .outputs = SM_OUTPUTS,
    .num_params = 2,
    .params = SM_PARAMS,
    .num_metrics = 1,
    .metric_names = SM_METRICS,
    .loss_name = "loss",
    .lr = 0.05,
    .create = sm_create,
    .destroy = sm_destroy,
    .train_step = sm_train_step,
    .eval = sm_eval,
    .forward = sm_forward,
    .state_tensors = sm_state,
    .get_step = sm_get_step,
    .set_step = sm_set_step,
    .get_lr = sm_get_lr,
    .set_lr = sm_set_lr,
    .set_threads = fake_set_threads,
};

/* ================================================================ fake_quad */

typedef struct quad {
    double w, v[2];
    double mw, mv[2];
    int64_t step;
    double lr;
    hooks hooks;
} quad;

static const cannl_tensor_info Q_PARAMS[] = {{"w", 0, {0}, 1, 0}, {"v", 1, {2}, 2, 0}};

static void *q_create(uint64_t seed) {
    quad *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    cannl_rng rng;
    cannl_rng_seed(&rng, seed);
    m->w = cannl_rng_normal(&rng);
    m->v[0] = cannl_rng_normal(&rng);
    m->v[1] = cannl_rng_normal(&rng);
    m->lr = fake_quad_api.lr;
    m->hooks = read_hooks();
    return m;
}

static void q_destroy(void *m) { free(m); }

static double q_train_step(void *mp, const void *const *in, int64_t n) {
    (void)in;
    (void)n;
    quad *m = mp;
    const double target[2] = {1.0, -2.0};
    double loss = (m->w - 3) * (m->w - 3);
    m->mw = 0.5 * m->mw + 2 * (m->w - 3);
    m->w -= m->lr * m->mw;
    for (int i = 0; i < 2; i++) {
        loss += (m->v[i] - target[i]) * (m->v[i] - target[i]);
        m->mv[i] = 0.5 * m->mv[i] + 2 * (m->v[i] - target[i]);
        m->v[i] -= m->lr * m->mv[i];
    }
    m->step++;
    after_step(&m->hooks, m->step, &m->mv[0], 0);
    return loss;
}

static size_t q_state(void *mp, cannl_tensor *out, size_t cap) {
    quad *m = mp;
    const cannl_tensor all[] = {
        {"w", CANNL_F64, 0, {0}, &m->w},
        {"v", CANNL_F64, 1, {2}, m->v},
        {"w.momentum_buffer", CANNL_F64, 0, {0}, &m->mw},
        {"v.momentum_buffer", CANNL_F64, 1, {2}, m->mv},
    };
    const size_t n = sizeof all / sizeof all[0];
    for (size_t i = 0; i < n && i < cap; i++) out[i] = all[i];
    return n;
}

/* The loss at the current params, and a forward pass without outputs (for fake_quad_infer). */
static void q_eval(void *mp, const void *const *in, int64_t n, double *loss, double *metrics) {
    (void)in;
    (void)n;
    (void)metrics;
    const quad *m = mp;
    *loss = (m->w - 3) * (m->w - 3) + (m->v[0] - 1) * (m->v[0] - 1) + (m->v[1] + 2) * (m->v[1] + 2);
}
static void q_forward(void *m, const void *const *in, int64_t n, void *const *out) {
    (void)m;
    (void)in;
    (void)n;
    (void)out;
}

static int64_t q_get_step(const void *m) { return ((const quad *)m)->step; }
static void q_set_step(void *m, int64_t s) { ((quad *)m)->step = s; }
static double q_get_lr(const void *m) { return ((const quad *)m)->lr; }
static void q_set_lr(void *m, double lr) { ((quad *)m)->lr = lr; }

const cannl_model_api fake_quad_api = {
    .name = "fake_quad",
    .dtype = CANNL_F64,
    .max_batch = 1,
    .num_inputs = 0,
    .num_outputs = 0,
    .num_params = 2,
    .params = Q_PARAMS,
    .num_metrics = 0,
    .loss_name = "loss",
    .lr = 0.1,
    .create = q_create,
    .destroy = q_destroy,
    .train_step = q_train_step,
    .eval = q_eval,
    .forward = q_forward,
    .state_tensors = q_state,
    .get_step = q_get_step,
    .set_step = q_set_step,
    .get_lr = q_get_lr,
    .set_lr = q_set_lr,
    .set_threads = fake_set_threads,
};
