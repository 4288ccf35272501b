/* embedded.c - a state of `<model>_infer_create_embedded` (cannl gen --embed: the trained
 * params compiled in) reads them in place (issue 36 item 7): built against MODEL (its C prefix;
 * MODEL_UC the constants' prefix, HEADER its header; INT8 for a model of --quantize int8), a
 * library with WEIGHTS CKPT, run with CKPT as its argument.
 *   1. In place: every float param of an embedded state (_infer_param) is the compiled-in array
 *      itself (<model>_embedded_params(), a pointer into it), with the checkpoint's values.
 *   2. Same results: forward, eval and the decode steps of an embedded state give the bits of a
 *      state of _infer_create_batch loaded from CKPT (int8: the rows quantised by the generator
 *      and by the runtime alike).
 *   3. Writes work and leave the compiled-in arrays alone: _set_params on an embedded state
 *      (other values) gives it params of its own (no longer the arrays) with the results of a
 *      loaded state given the same values; _load on another gives the loaded state's results; a
 *      _load that fails leaves the state reading in place (all or nothing); an int8 weight's
 *      _infer_param gives its floats (the rows times their scales). The compiled-in values are
 *      unchanged at the end (and in .rodata: a write through them would fault).
 * Under the sanitizers (the memory set) the smaller arena is read and written only inside its
 * allocation. Exit 0 when all hold. */
#include HEADER

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define M(name) CAT(MODEL, _##name)
#define MU(name) CAT(MODEL_UC, _##name)

typedef M(real) real;
enum { N = 3, PROMPT = 5, STEPS = 3 };

static int failures = 0;
static void check(int ok, const char *what) {
    if (!ok) ++failures, fprintf(stderr, "embedded: FAIL: %s\n", what);
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t next_rand(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}

/* The results of a state on the inputs `in`: the first output, the loss, the logits of a
   prefill and of STEPS decode steps, one after another in `out` (count values). */
static real *results(struct M(infer) *s, const real *const *in, size_t *count) {
    const cannl_model_api *api = &M(infer_api);
    const size_t outs = (size_t)(N * api->outputs[0].size), vocab = MU(DECODE_VOCAB);
    *count = outs + 1 + vocab * (STEPS + 1);
    real *r = calloc(*count, sizeof *r);
    real *outputs[8] = {r};
    double loss = 0, metrics[8] = {0};
    check(M(infer_forward)(s, in, N, outputs) == CANNL_OK, "forward");
    check(M(infer_eval)(s, in, N, &loss, metrics) == CANNL_OK, "eval");
    r[outs] = (real)loss;
    const int32_t *ids = (const int32_t *)(const void *)in[0];
    real *logits = r + outs + 1;
    check(M(decode_prefill)(s, ids, PROMPT, logits) == CANNL_OK, "decode_prefill");
    for (int t = 0; t < STEPS; ++t)
        check(M(decode_step)(s, ids[PROMPT + t], logits + vocab * (size_t)(t + 1)) == CANNL_OK, "decode_step");
    return r;
}

static int same(const real *a, const real *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: embedded CKPT\n"), 2;
    const char *ckpt = argv[1];
    const cannl_model_api *api = &M(infer_api);
    const int np = api->num_params;
#ifdef INT8
    const int64_t int8_cols[] = MU(INT8_ROWS);
#endif
    /* The compiled-in values, kept to check that nothing writes them. */
    const real *const *emb = M(embedded_params)();
    check(emb != NULL, "embedded_params");
    if (!emb) return 1;
    real **kept = calloc((size_t)np + 1, sizeof *kept);
    for (int k = 0; k < np; ++k) {
        kept[k] = malloc((size_t)api->params[k].size * sizeof(real));
        memcpy(kept[k], emb[k], (size_t)api->params[k].size * sizeof(real));
    }
    /* Inputs: ids in range for the integer inputs. */
    const void *in[8] = {0};
    for (int i = 0; i < api->num_inputs; ++i) {
        int32_t *v = malloc((size_t)(N * api->inputs[i].size) * sizeof *v);
        for (int64_t j = 0; j < N * api->inputs[i].size; ++j)
            v[j] = (int32_t)(next_rand() % (uint64_t)(api->inputs[i].ids > 0 ? api->inputs[i].ids : 1));
        in[i] = v;
    }
    const real *const *inputs = (const real *const *)in;

    struct M(infer) *e = M(infer_create_embedded_batch)(N);
    struct M(infer) *s = M(infer_create_batch)(N);
    cannl_error err;
    check(e && s, "create");
    if (!e || !s) return 1;
    check(M(infer_load)(s, ckpt, &err) == CANNL_OK, "load the checkpoint into a state of create_batch");

    /* 1. In place, with the checkpoint's values. */
    int floats = 0;
    for (int k = 0; k < np; ++k) {
#ifdef INT8
        if (int8_cols[k] > 0) continue;
#endif
        ++floats;
        int64_t count = 0;
        const real *p = M(infer_param)(e, api->params[k].name, &count);
        if (p != emb[k]) fprintf(stderr, "embedded: %s: not the compiled-in array\n", api->params[k].name);
        check(p == emb[k] && count == api->params[k].size, "an embedded state's param is the compiled-in array");
        check(same(emb[k], M(infer_param)(s, api->params[k].name, NULL), (size_t)count),
              "the compiled-in values are the checkpoint's");
    }
    check(floats > 0, "some param read as floats");

    /* 2. The results of the loaded state. */
    size_t n_res = 0;
    real *want = results(s, inputs, &n_res);
    real *got = results(e, inputs, &n_res);
    check(same(want, got, n_res), "an embedded state's results are those of the loaded state");
    free(got);

    /* 3. set_params: other values (the checkpoint's halved), in storage of the state's own. */
    real **half = calloc((size_t)np + 1, sizeof *half);
    for (int k = 0; k < np; ++k) {
        const real *p = M(infer_param)(s, api->params[k].name, NULL);
        half[k] = malloc((size_t)api->params[k].size * sizeof(real));
        for (int64_t j = 0; j < api->params[k].size; ++j) half[k][j] = p[j] * 0.5f;
    }
    check(M(infer_set_params)(e, (const real *const *)half) == CANNL_OK, "set_params on an embedded state");
    check(M(infer_set_params)(s, (const real *const *)half) == CANNL_OK, "set_params on a loaded state");
    for (int k = 0; k < np; ++k) {
        const real *p = M(infer_param)(e, api->params[k].name, NULL);
        check(p != emb[k] && same(p, M(infer_param)(s, api->params[k].name, NULL), (size_t)api->params[k].size),
              "after set_params: params of its own, the values set");
    }
    real *want_half = results(s, inputs, &n_res);
    got = results(e, inputs, &n_res);
    check(same(want_half, got, n_res), "after set_params: the results of a state given the same params");
    check(!same(want_half, want, n_res), "halved params give other results");
    free(got);
    M(infer_destroy)(e);

    /* _load on an embedded state; a _load that fails. */
    e = M(infer_create_embedded_batch)(N);
    check(e && M(infer_load)(e, ckpt, &err) == CANNL_OK, "load into an embedded state");
    got = results(e, inputs, &n_res);
    check(same(want, got, n_res), "after load: the loaded state's results");
    free(got);
    M(infer_destroy)(e);
    e = M(infer_create_embedded_batch)(N);
    check(e && M(infer_load)(e, "no-such-file.safetensors", &err) != CANNL_OK, "a load that fails");
    for (int k = 0; k < np; ++k) {
#ifdef INT8
        if (int8_cols[k] > 0) continue;
#endif
        check(M(infer_param)(e, api->params[k].name, NULL) == emb[k], "after a failed load: still in place");
    }
    got = results(e, inputs, &n_res);
    check(same(want, got, n_res), "after a failed load: the same results");
    free(got);
#ifdef INT8
    /* An int8 weight's floats: its rows times their scales (what embedded_params makes). */
    for (int k = 0; k < np; ++k)
        if (int8_cols[k] > 0) {
            const real *p = M(infer_param)(e, api->params[k].name, NULL);
            check(p && same(p, emb[k], (size_t)api->params[k].size), "an int8 weight's floats: its rows dequantised");
        }
    got = results(e, inputs, &n_res);
    check(same(want, got, n_res), "after an int8 weight's floats were asked: the same results");
    free(got);
#endif
    M(infer_destroy)(e);

    for (int k = 0; k < np; ++k)
        check(same(kept[k], emb[k], (size_t)api->params[k].size), "the compiled-in values unchanged");
    for (int k = 0; k < np; ++k) free(kept[k]), free(half[k]);
    for (int i = 0; i < api->num_inputs; ++i) free((void *)in[i]);
    free(kept), free(half), free(want), free(want_half);
    M(infer_destroy)(s);
    if (failures) return fprintf(stderr, "embedded: %d failures\n", failures), 1;
    printf("embedded: %d params (%d read in place as floats): results equal to the loaded state's, writes "
           "into storage of the state's own\n", np, floats);
    return 0;
}
