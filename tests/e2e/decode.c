/* decode.c - the KV-cache decode steps of a generated causal language model against its full
 * forward pass (issue 17, contract v1 §6), built against gpt_tiny in float32 and in float64,
 * against decode_gqa (tests/e2e/specs: grouped-query attention and sliding windows, whose
 * caches hold the key/value heads only and, windowed, the last W positions: contract v2 §2),
 * and against rope_tiny (rms_norm, rope: the step rotates at its run-time position).
 * The model is DECODE_MODEL (its C prefix; DECODE_MODEL_UC the constants' prefix, DECODE_HEADER
 * its header): inputs `tokens` and `next`, an output `logits`, one metric.
 *
 * Random params (uniform, wide enough that attention is far from uniform). Checks:
 *   1. one sequence of ctx ids, prefilled one id and then stepped: the logits at every
 *      position equal forward's at that position (one forward over the whole sequence:
 *      causal attention keeps later positions out);
 *   2. prefill of k ids: the logits of position k - 1, for several k;
 *   3. the window rule past ctx: a stream of 2.5 ctx ids walked as --generate walks it (the
 *      window grows to ctx, then becomes its last ctx/2 ids, prefilled again): at each
 *      length, the logits of the window's last position equal forward's on the window
 *      (left-aligned, the rest id 0);
 *   4. bad calls: a step past ctx, an id out of range, prefill of 0 or ctx + 1 ids
 *      (CANNL_E_ARG, and the cache length as documented); infer_forward and infer_eval given an
 *      id out of range (V or -1 among the tokens, V among the targets): CANNL_E_ARG;
 *   5. the forward-only state's params (its rows of params: a rolled repeat block's instances,
 *      `w_qkv.2`, slices of one stacked buffer): infer_param of each param's name gives the
 *      tensor state_tensors lists for it, with its size, no two overlapping, and a second state
 *      given those values by infer_set_params (in NUM_PARAMS order) gives the same logits;
 *   6. many sequences at once (many_sequences): a batched prefill and batched steps of sequences
 *      at different positions give each row the logits of its sequence alone, bit for bit.
 * Tolerance: |decode - forward| <= tol * max(1, |forward|), tol 1e-12 (f64) or 1e-5 (f32), or
 * DECODE_TOL where the build defines it: a model with int8 weights (cannl_sgemm_q8 rounds each
 * row of activations to int8 steps of 1/127 of its largest element, so float paths that differ in
 * their last bits before a product, as decode's and forward's may, can land an element one step
 * apart; check 6 stays bit for bit: a row's rounding does not depend on the other rows).
 *
 * With DECODE_CUDA (tests/gpu: the model generated with --target cuda) the same checks run on the
 * CUDA target's state (<model>_create_batch for one example, _param, _forward and the decode steps on its device KV
 * cache), but for the ids out of range of check 4 (the CUDA forward does not check ids), with tol
 * 1e-4 (f32; the GPU sums in other orders) or 1e-10 (f64). Check 6 on the GPU compares each row
 * with its sequence alone within tol (cuBLAS may pick another algorithm for n rows than for one:
 * docs/cuda.md); with DECODE_EMU (tests/cuda/emu_decode.sh, the CPU stand-in) bit for bit. */
#include DECODE_HEADER

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define M(name) CAT(DECODE_MODEL, _##name)      /* gpt_tiny_infer_create */
#define MU(name) CAT(DECODE_MODEL_UC, _##name)  /* GPT_TINY_DECODE_CTX */

#define CTX MU(DECODE_CTX)
#define V MU(DECODE_VOCAB)

typedef M(real) real;
/* Check 6's sequences at once: the C state's cap, one KV cache slot per example. */
enum { NS = MU(MAX_BATCH) < 4 ? MU(MAX_BATCH) : 4 };

#ifdef DECODE_CUDA
typedef struct DECODE_MODEL state;
#define API M(api)
#define TOL (sizeof(real) == 8 ? 1e-10 : 1e-4)
static state *create(void) { return M(create_batch)(1, NS); } /* (a sequence slot per example) */
static real *param(state *s, const char *name, int64_t *count) { return M(param)(s, name, count); }
static cannl_status forward_one(state *s, const real *const inputs[], real *const outputs[]) {
    M(forward)(s, inputs, 1, outputs);
    return CANNL_OK;
}
static void destroy(state *s) { M(destroy)(s); }
#else
typedef M(infer) state;
#define API M(infer_api)
#define TOL (sizeof(real) == 8 ? 1e-12 : 1e-5)
static state *create(void) { return M(infer_create_batch)(NS); } /* (a sequence slot per example) */
static real *param(state *s, const char *name, int64_t *count) { return (real *)M(infer_param)(s, name, count); }
static cannl_status forward_one(state *s, const real *const inputs[], real *const outputs[]) {
    return M(infer_forward)(s, inputs, 1, outputs);
}
static void destroy(state *s) { M(infer_destroy)(s); }
#endif

#ifdef DECODE_TOL
#undef TOL
#define TOL DECODE_TOL
#endif

static int failures = 0;
static double worst = 0;

static uint64_t rng_state = 88172645463325252ull;
static double uniform(void) { /* xorshift64, [0, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void compare(const real *dec, const real *fwd, const char *what, long at) {
    const double tol = TOL;
    for (int j = 0; j < V; ++j) {
        double d = fabs((double)dec[j] - (double)fwd[j]) / fmax(1.0, fabs((double)fwd[j]));
        if (d > worst) worst = d;
        if (!(d <= tol)) {
            if (failures++ < 10)
                fprintf(stderr, "FAIL %s at %ld: logit %d: decode %.17g, forward %.17g\n", what, at, j,
                        (double)dec[j], (double)fwd[j]);
            return;
        }
    }
}

/* forward's logits of one example: ids[0 .. len) left-aligned, the rest 0. */
static void forward(state *s, const int32_t *ids, long len, real *logits) {
    static int32_t window[CTX];
    memset(window, 0, sizeof window);
    memcpy(window, ids, (size_t)len * sizeof *ids);
    const real *inputs[MU(NUM_INPUTS)] = {0};
    inputs[MU(INPUT_TOKENS)] = (const real *)(const void *)window;
    real *outputs[MU(NUM_OUTPUTS)] = {logits};
    if (forward_one(s, inputs, outputs) != CANNL_OK) {
        fprintf(stderr, "FAIL forward\n");
        exit(1);
    }
}

/* Sequence i (ids + 5 i) alone in slot 0, stepped through ctx positions: its logits there. */
static void alone(state *s, const int32_t *ids, real ref[NS][CTX][V]) {
    for (int i = 0; i < NS; ++i) {
        if (M(decode_prefill)(s, ids + 5 * i, 1, ref[i][0]) != CANNL_OK) ++failures;
        for (long k = 1; k < CTX; ++k)
            if (M(decode_step)(s, ids[5 * i + k], ref[i][k]) != CANNL_OK) ++failures;
    }
}

static void same_row(const real *got, const real *want, const char *what, int i, long at) {
#if defined(DECODE_CUDA) && !defined(DECODE_EMU)
    compare(got, want, what, at); /* (within tol: the header's comment) */
    (void)i;
#else
    if (memcmp(got, want, (size_t)V * sizeof(real)) != 0 && failures++ < 10)
        fprintf(stderr, "FAIL %s: sequence %d at %ld: not the logits of the sequence alone\n", what, i, at);
#endif
}

/* Check 6: NS sequences, prompts of different lengths, in slots in reverse order, prefilled in
   one batch, then stepped in batches of the sequences that are not resting (each rests every
   third round: rows at different positions, batches of every size): each row's logits are
   bit for bit those of its sequence alone; lengths per slot; bad batches. */
static void many_sequences(state *s, const int32_t *ids) {
    static real ref[NS][CTX][V], rows[NS * V];
    alone(s, ids, ref);
    const int32_t *prompt[NS];
    int64_t count[NS], len[NS];
    int32_t slot[NS];
    for (int i = 0; i < NS; ++i)
        prompt[i] = ids + 5 * i, count[i] = 1 + (3 * i) % CTX, slot[i] = NS - 1 - i, len[i] = count[i];
    if (M(decode_prefill_batch)(s, NS, slot, prompt, count, rows) != CANNL_OK) ++failures;
    for (int i = 0; i < NS; ++i) same_row(rows + i * V, ref[i][count[i] - 1], "batched prefill", i, count[i] - 1);
    for (int round = 0;; ++round) {
        int32_t seq[NS], id[NS];
        int who[NS], n = 0, left = 0;
        for (int i = 0; i < NS; ++i) {
            left += len[i] < CTX;
            if (len[i] < CTX && (round + i) % 3 != 2) seq[n] = slot[i], id[n] = ids[5 * i + len[i]], who[n++] = i;
        }
        if (!left) break;
        if (!n) continue;
        if (M(decode_step_batch)(s, n, seq, id, rows) != CANNL_OK) ++failures;
        for (int r = 0; r < n; ++r) same_row(rows + r * V, ref[who[r]][len[who[r]]], "batched step", who[r], len[who[r]]);
        for (int r = 0; r < n; ++r) len[who[r]]++;
        for (int i = 0; i < NS; ++i)
            if (M(decode_length_seq)(s, slot[i]) != len[i]) ++failures, fprintf(stderr, "FAIL length of slot %d\n", i);
    }
    const int32_t two[2] = {0, 0}, out[1] = {NS}, id[2] = {1, 2};
    if (M(decode_step_batch)(s, 1, slot, id, rows) != CANNL_E_ARG)
        ++failures, fprintf(stderr, "FAIL a batched step of a full sequence\n");
    if (M(decode_reset)(s, 0) != CANNL_OK || M(decode_length_seq)(s, 0) != 0)
        ++failures, fprintf(stderr, "FAIL reset\n");
    if (M(decode_step_batch)(s, 2, two, id, rows) != CANNL_E_ARG || M(decode_step_batch)(s, 1, out, id, rows) !=
        CANNL_E_ARG || M(decode_reset)(s, NS) != CANNL_E_ARG || M(decode_length_seq)(s, 0) != 0)
        ++failures, fprintf(stderr, "FAIL a batch with one sequence twice, or a slot out of range\n");
}

int main(void) {
    state *s = create();
    if (!s) return 1;
    /* random params */
    for (int32_t k = 0; k < API.num_params; ++k) {
        int64_t count = 0;
        const char *name = API.params[k].name;
        real *p = param(s, name, &count);
        if (!p) {
            fprintf(stderr, "no param %s\n", name);
            return 1;
        }
        for (int64_t i = 0; i < count; ++i) p[i] = (real)(uniform() - 0.5);
    }
    enum { LEN = CTX * 5 / 2 };
    static int32_t ids[LEN];
    for (int i = 0; i < LEN; ++i) ids[i] = (int32_t)(uniform() * V);
    static real fwd[CTX * V];
    real dec[V];

    /* 1. every position of one window */
    forward(s, ids, CTX, fwd);
    if (M(decode_prefill)(s, ids, 1, dec) != CANNL_OK) ++failures;
    compare(dec, fwd, "step", 0);
    for (long t = 1; t < CTX; ++t) {
        if (M(decode_step)(s, ids[t], dec) != CANNL_OK) ++failures;
        compare(dec, fwd + t * V, "step", t);
    }
    if (M(decode_length)(s) != CTX) ++failures, fprintf(stderr, "FAIL length after ctx steps\n");

    /* 4. bad calls */
    if (M(decode_step)(s, 0, dec) != CANNL_E_ARG || M(decode_length)(s) != CTX)
        ++failures, fprintf(stderr, "FAIL a step past ctx\n");
    if (M(decode_prefill)(s, ids, CTX + 1, dec) != CANNL_E_ARG || M(decode_length)(s) != 0)
        ++failures, fprintf(stderr, "FAIL prefill of ctx + 1 ids\n");
    if (M(decode_prefill)(s, ids, 0, dec) != CANNL_E_ARG) ++failures, fprintf(stderr, "FAIL prefill of 0 ids\n");
    if (M(decode_prefill)(s, ids, 3, NULL) != CANNL_OK || M(decode_step)(s, V, dec) != CANNL_E_ARG ||
        M(decode_step)(s, -1, dec) != CANNL_E_ARG || M(decode_length)(s) != 3)
        ++failures, fprintf(stderr, "FAIL ids out of range\n");
#ifndef DECODE_CUDA
    {
        static int32_t good[CTX], bad[CTX];
        const real *in[MU(NUM_INPUTS)] = {0};
        real *out[MU(NUM_OUTPUTS)] = {fwd};
        double loss = 0, metrics[MU(NUM_METRICS)];
        for (int32_t bad_id = -1; bad_id <= V; bad_id += V + 1) {
            memcpy(bad, good, sizeof bad);
            bad[CTX - 1] = bad_id;
            in[MU(INPUT_TOKENS)] = (const real *)(const void *)bad, in[MU(INPUT_NEXT)] = NULL;
            if (M(infer_forward)(s, in, 1, out) != CANNL_E_ARG)
                ++failures, fprintf(stderr, "FAIL forward with token %d\n", (int)bad_id);
            in[MU(INPUT_TOKENS)] = (const real *)(const void *)good, in[MU(INPUT_NEXT)] = (const real *)(const void *)bad;
            if (M(infer_eval)(s, in, 1, &loss, metrics) != CANNL_E_ARG)
                ++failures, fprintf(stderr, "FAIL eval with target %d\n", (int)bad_id);
        }
        in[MU(INPUT_NEXT)] = (const real *)(const void *)good;
        if (M(infer_forward)(s, in, 1, out) != CANNL_OK || M(infer_eval)(s, in, 1, &loss, metrics) != CANNL_OK)
            ++failures, fprintf(stderr, "FAIL forward or eval with ids in range\n");
    }
#endif

    /* 2. prefill of k ids */
    for (long k = 1; k <= CTX; k += 9) {
        if (M(decode_prefill)(s, ids + 7, k, dec) != CANNL_OK) ++failures;
        forward(s, ids + 7, k, fwd);
        compare(dec, fwd + (k - 1) * V, "prefill", k);
    }

    /* 3. the window rule past ctx */
    long start = 0, cached = 0;
    for (long len = 1; len <= LEN; ++len) {
        if (len - start > CTX) {
            start = len - CTX / 2;
            cached = 0;
        }
        const long w = len - start;
        cannl_status st = cached == 0 ? M(decode_prefill)(s, ids + start, w, dec)
                                      : M(decode_step)(s, ids[start + w - 1], dec);
        if (st != CANNL_OK) ++failures, fprintf(stderr, "FAIL decode at length %ld\n", len);
        cached = w;
        forward(s, ids + start, w, fwd);
        compare(dec, fwd + (w - 1) * V, "window", len);
    }

#ifndef DECODE_CUDA
    /* 5. the params of the forward-only state */
    {
        static cannl_tensor t[MU(NUM_PARAMS)];
        static const real *values[MU(NUM_PARAMS)];
        static real again[CTX * V];
        if (API.state_tensors(s, t, MU(NUM_PARAMS)) != (size_t)MU(NUM_PARAMS))
            ++failures, fprintf(stderr, "FAIL state_tensors: not NUM_PARAMS tensors\n");
        for (int32_t k = 0; k < MU(NUM_PARAMS); ++k) {
            int64_t count = 0;
            const char *name = API.params[k].name;
            const real *p = param(s, name, &count);
            if ((const void *)p != t[k].data || strcmp(t[k].name, name) != 0 || count != API.params[k].size)
                ++failures, fprintf(stderr, "FAIL param %s: not state_tensors' tensor %d\n", name, (int)k);
            for (int32_t j = 0; j < k && p; ++j)
                if (p < values[j] + API.params[j].size && values[j] < p + count)
                    ++failures, fprintf(stderr, "FAIL params %s and %s overlap\n", API.params[j].name, name);
            values[k] = p;
        }
        state *s2 = create();
        if (!s2) return 1;
        M(infer_set_params)(s2, values);
        forward(s, ids, CTX, fwd);
        forward(s2, ids, CTX, again);
        if (memcmp(fwd, again, sizeof again) != 0)
            ++failures, fprintf(stderr, "FAIL a state given the params by infer_set_params: other logits\n");
        destroy(s2);
    }
#endif

    /* 6. many sequences at once */
    many_sequences(s, ids);

    destroy(s);
    printf("decode vs forward (%s, ctx %d): worst relative difference %.3g over %d positions; %s\n",
           sizeof(real) == 8 ? "f64" : "f32", CTX, worst, CTX + LEN, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
