/* infer_generate.c - the inference program's --generate (contract v1 §6): the prompt's
 * ids, then N tokens each sampled from the logits of the last real position of the current
 * window, written to stdout as raw bytes (byte-level models, n = 256) or ids one per line.
 *
 * With the model's decode steps (cannl_decode_api: a causal language model of the C target)
 * the window lives in the model's KV cache: the prompt is prefilled once, then each new
 * token costs one single-position step. Past ctx tokens the window becomes the last ctx/2
 * tokens (the last one when ctx is 1), prefilled again. Without them (or with
 * CANNL_GENERATE_FULL_FORWARD=1 in the environment: the reference the tests and
 * bench/generate_bench.sh compare against), every new token runs the model's forward on one
 * example, the window's ids left-aligned in the ctx positions and the rest filled with id 0
 * (causal attention keeps later positions out of earlier ones' logits): the same logits
 * within float rounding.
 * Sampling: T = 0 is argmax (the lowest id among equal maxima); else softmax(logits / T),
 * computed as softmax((logits - max) / T) so that no T overflows it, over all ids, or over
 * the K most likely with --top-k (ties broken by the lower id), drawn with cannl_rng seeded
 * by --seed. Logits that are not finite (weights so large that they overflow) stop
 * generation with an error: no token is drawn from them. */
#define _POSIX_C_SOURCE 200809L

#include "infer_internal.h"
#include "rt_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen {
    const char *prog;
    int bytes;                   /* n == 256: raw bytes in and out */
    int64_t ctx, n, ids;
    int32_t *toks;               /* every token so far (prompt + sampled) */
    int64_t len, cap;
    double *score;               /* n: the last position's logits / T */
    int32_t *order;              /* n: ids by descending score (top-k) */
} gen;

static int fail(const gen *g, int code, const char *fmt, ...) CANNL__PRINTF(3, 4);

static int fail(const gen *g, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cannl__vmessage(g->prog, "error", fmt, ap);
    va_end(ap);
    return code;
}

/* The prompt's ids: its bytes, or whitespace-separated decimal ids in [0, g->ids). */
static int read_prompt(gen *g, const char *p) {
    size_t plen = strlen(p);
    g->cap = (int64_t)plen + 1;
    g->toks = malloc((size_t)g->cap * sizeof *g->toks);
    if (!g->toks) return fail(g, CANNL__EXIT_FAIL, "out of memory");
    if (g->bytes) {
        for (size_t i = 0; i < plen; i++) g->toks[g->len++] = (unsigned char)p[i];
        return CANNL__EXIT_OK;
    }
    const char *s = p;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f') s++;
        if (!*s) break;
        const char *start = s;
        int64_t v = 0;
        int ok = *s >= '0' && *s <= '9';
        for (; *s >= '0' && *s <= '9'; s++)
            if (v <= g->ids) v = v * 10 + (*s - '0');
        if (!ok || (*s && *s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != '\v' && *s != '\f')) {
            int w = 0;
            while (start[w] && start[w] != ' ' && start[w] != '\t' && start[w] != '\n' && w < 40) w++;
            return fail(g, CANNL__EXIT_USAGE, "--prompt: '%.*s' is not a token id (the model takes ids, whitespace-"
                        "separated, in [0, %" PRId64 "))", w, start, g->ids);
        }
        if (v >= g->ids)
            return fail(g, CANNL__EXIT_USAGE, "--prompt: token %" PRId64 " ('%.*s') is out of range: ids are in [0, %"
                        PRId64 ")", g->len, (int)(s - start), start, g->ids);
        g->toks[g->len++] = (int32_t)v;
    }
    if (g->len == 0) return fail(g, CANNL__EXIT_USAGE, "--prompt: no token ids in '%s'", p);
    return CANNL__EXIT_OK;
}

static void put_token(const gen *g, int32_t t) {
    if (g->bytes)
        putchar(t);
    else
        printf("%" PRId32 "\n", t);
}

/* qsort has no context argument: the scores it compares, set just before each sort. */
static const double *g_sort_scores;

/* Whether id i comes before id j in the order of top-k: descending score, then ascending id
   (a total order: every top-k has one answer). */
static int before(const double *s, int32_t i, int32_t j) { return s[i] != s[j] ? s[i] > s[j] : i < j; }

static int cmp_order(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    return before(g_sort_scores, i, j) ? -1 : before(g_sort_scores, j, i);
}

/* order[0:k] = the first k ids of n in that order, in order: a heap of the k first so far whose
   root is the last of them, then the k sorted (n log k per token, not a sort of the whole
   vocabulary: 50304 ids for GPT-2). */
static void top_k(const double *s, int64_t n, int64_t k, int32_t *order) {
    for (int64_t i = 0; i < n; i++) {
        int64_t pos;
        if (i < k) { /* insert: up while the parent comes before it */
            pos = i;
            while (pos > 0 && before(s, order[(pos - 1) / 2], (int32_t)i)) {
                order[pos] = order[(pos - 1) / 2];
                pos = (pos - 1) / 2;
            }
        } else if (before(s, (int32_t)i, order[0])) { /* replace the last: down past children after it */
            pos = 0;
            for (;;) {
                int64_t c = 2 * pos + 1;
                if (c >= k) break;
                if (c + 1 < k && before(s, order[c], order[c + 1])) c++;
                if (!before(s, (int32_t)i, order[c])) break;
                order[pos] = order[c];
                pos = c;
            }
        } else {
            continue;
        }
        order[pos] = (int32_t)i;
    }
    g_sort_scores = s;
    qsort(order, (size_t)k, sizeof *order, cmp_order);
}

/* One id from the logits row (n values of dtype at row) into *id; -1 (nothing drawn) when a
   logit is not finite, its index into *id. */
static int sample(gen *g, const void *row, cannl_dtype dt, const cannl__infer_opts *o, cannl_rng *rng, int32_t *id) {
    int64_t n = g->n, best = 0;
    for (int64_t i = 0; i < n; i++) {
        g->score[i] = dt == CANNL_F64 ? ((const double *)row)[i] : (double)((const float *)row)[i];
        if (!isfinite(g->score[i])) {
            *id = (int32_t)i;
            return -1;
        }
        if (g->score[i] > g->score[best]) best = i;
    }
    if (o->temperature == 0) {
        *id = (int32_t)best;
        return 0;
    }
    /* (logit - max) / T: 0 for the largest, so a tiny T cannot make inf - inf. */
    const double top = g->score[best];
    for (int64_t i = 0; i < n; i++) g->score[i] = (g->score[i] - top) / o->temperature;
    int64_t k = n;
    if (o->top_k > 0 && o->top_k < n) {
        k = o->top_k;
        top_k(g->score, n, k, g->order);
    } else {
        for (int64_t i = 0; i < n; i++) g->order[i] = (int32_t)i;
    }
    double total = 0;
    for (int64_t j = 0; j < k; j++) total += exp(g->score[g->order[j]]);
    double u = cannl_rng_uniform(rng) * total, acc = 0;
    for (int64_t j = 0; j < k; j++) {
        acc += exp(g->score[g->order[j]]);
        if (u < acc) {
            *id = g->order[j];
            return 0;
        }
    }
    *id = g->order[k - 1]; /* u rounded up to the total */
    return 0;
}

int cannl__infer_generate(const cannl_infer_model *model, void *m, const cannl__infer_opts *o) {
    const cannl_model_api *api = model->api;
    const cannl_tensor_info *in = &api->inputs[o->gen_input];
    gen g;
    memset(&g, 0, sizeof g);
    g.prog = o->prog;
    g.ctx = in->dims[0];
    g.n = api->outputs[0].dims[1];
    g.ids = in->ids;
    g.bytes = g.n == 256;
    size_t es = cannl_dtype_size(api->dtype);
    int rc = read_prompt(&g, o->prompt);
    const void **ins = calloc((size_t)api->num_inputs + 1, sizeof *ins);
    void **outs = calloc((size_t)api->num_outputs + 1, sizeof *outs);
    int32_t *window = cannl_alloc((size_t)g.ctx * sizeof *window);
    g.score = malloc((size_t)g.n * sizeof *g.score);
    g.order = malloc((size_t)g.n * sizeof *g.order);
    if (!rc && (!ins || !outs || !window || !g.score || !g.order)) rc = fail(&g, CANNL__EXIT_FAIL, "out of memory");
    for (int32_t k = 0; !rc && k < api->num_outputs; k++) {
        outs[k] = cannl_alloc((size_t)api->outputs[k].size * es); /* forward fills every output */
        if (!outs[k]) rc = fail(&g, CANNL__EXIT_FAIL, "out of memory");
    }
    if (!rc && (int64_t)g.cap < g.len + o->generate) {
        g.cap = g.len + o->generate;
        int32_t *t = realloc(g.toks, (size_t)g.cap * sizeof *t);
        if (!t)
            rc = fail(&g, CANNL__EXIT_FAIL, "out of memory");
        else
            g.toks = t;
    }
    if (rc) goto done;
    ins[o->gen_input] = window;
    const char *full = getenv("CANNL_GENERATE_FULL_FORWARD");
    const cannl_decode_api *dec = full && *full && strcmp(full, "0") != 0 ? NULL : model->decode;
    if (dec && dec->ctx != g.ctx) dec = NULL; /* not this input's positions */

    for (int64_t i = 0; i < g.len; i++) put_token(&g, g.toks[i]);
    cannl_rng rng;
    cannl_rng_seed(&rng, o->seed);
    int64_t start = 0;  /* the window: toks[start, len) */
    int64_t cached = 0; /* with decode steps: toks[start, start + cached) are in the KV cache */
    for (int64_t step = 0; step < o->generate; step++) {
        if (g.len - start > g.ctx) {
            start = g.len - (g.ctx > 1 ? g.ctx / 2 : 1); /* the last ctx/2 tokens (one when ctx is 1) */
            cached = 0;
        }
        int64_t w = g.len - start;
        const char *row; /* the logits of the window's last position */
        if (dec) {
            cannl_status st = CANNL_OK;
            if (cached == 0)
                st = dec->prefill(m, g.toks + start, w, outs[0]);
            else
                for (int64_t p = cached; p < w && st == CANNL_OK; p++) st = dec->step(m, g.toks[start + p], outs[0]);
            if (st != CANNL_OK) {
                rc = fail(&g, CANNL__EXIT_FAIL, "the model's decode step failed (status %d)", (int)st);
                goto done;
            }
            cached = w;
            row = (const char *)outs[0];
        } else {
            memcpy(window, g.toks + start, (size_t)w * sizeof *window);
            memset(window + w, 0, (size_t)(g.ctx - w) * sizeof *window);
            api->forward(m, (const void *const *)ins, 1, outs);
            row = (const char *)outs[0] + (size_t)(w - 1) * (size_t)g.n * es;
        }
        int32_t t = 0;
        if (sample(&g, row, api->dtype, o, &rng, &t) != 0) {
            fflush(stdout);
            rc = fail(&g, CANNL__EXIT_FAIL, "the logits for token %" PRId64 " (at the window's position %" PRId64
                      ") are not finite: logit %" PRId32 " is %s; nothing is sampled from them",
                      g.len, w - 1, t, isnan(g.score[t]) ? "nan" : g.score[t] > 0 ? "inf" : "-inf");
            goto done;
        }
        g.toks[g.len++] = t;
        put_token(&g, t);
        if (fflush(stdout) != 0) break;
    }
    if (fflush(stdout) != 0 || ferror(stdout))
        rc = fail(&g, CANNL__EXIT_FAIL, "cannot write to stdout: %s", strerror(errno));
done:
    for (int32_t k = 0; outs && k < api->num_outputs; k++) cannl_free(outs[k]);
    free(outs);
    free((void *)ins);
    cannl_free(window);
    free(g.score);
    free(g.order);
    free(g.toks);
    return rc;
}
