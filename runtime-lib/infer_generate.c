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
    char *text;                  /* --prompts: what put_token writes (else stdout) */
    size_t text_len, text_cap;
    int text_full;               /* out of memory growing text */
} gen;

static int fail(const gen *g, int code, const char *fmt, ...) CANNL__PRINTF(3, 4);

static int fail(const gen *g, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cannl__vmessage(g->prog, "error", fmt, ap);
    va_end(ap);
    return code;
}

/* The prompt's ids: its bytes, or whitespace-separated decimal ids in [0, g->ids); `where`
   names it in messages (--prompt, FILE:LINE). Extra: room for that many tokens after it. */
static int read_prompt(gen *g, const char *p, const char *where, int64_t extra) {
    size_t plen = strlen(p);
    g->cap = (int64_t)plen + 1 + extra;
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
            return fail(g, CANNL__EXIT_USAGE, "%s: '%.*s' is not a token id (the model takes ids, whitespace-"
                        "separated, in [0, %" PRId64 "))", where, w, start, g->ids);
        }
        if (v >= g->ids)
            return fail(g, CANNL__EXIT_USAGE, "%s: token %" PRId64 " ('%.*s') is out of range: ids are in [0, %"
                        PRId64 ")", where, g->len, (int)(s - start), start, g->ids);
        g->toks[g->len++] = (int32_t)v;
    }
    if (g->len == 0) return fail(g, CANNL__EXIT_USAGE, "%s: no token ids in '%s'", where, p);
    return CANNL__EXIT_OK;
}

static void put_text(gen *g, const char *s, size_t len) {
    if (g->text_len + len > g->text_cap) {
        size_t cap = 2 * (g->text_len + len) + 64;
        char *t = realloc(g->text, cap);
        if (!t) {
            g->text_full = 1;
            return;
        }
        g->text = t, g->text_cap = cap;
    }
    memcpy(g->text + g->text_len, s, len);
    g->text_len += len;
}

/* A token as --generate prints it: to stdout, or (--prompts) to g->text. */
static void put_token(gen *g, int32_t t) {
    char one[16];
    const int len = g->bytes ? (one[0] = (char)t, 1) : snprintf(one, sizeof one, "%" PRId32 "\n", t);
    if (!g->text_cap && !g->text_full)
        fwrite(one, 1, (size_t)len, stdout);
    else
        put_text(g, one, (size_t)len);
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

/* The buffers generation shares between its sequences: the forward pass's inputs and outputs
   (the window; logits), the scores and order of sampling. */
typedef struct shared {
    const cannl_infer_model *model;
    void *m;
    const cannl__infer_opts *o;
    const cannl_decode_api *dec; /* NULL: the full forward pass per token */
    size_t es;
    const void **ins;
    void **outs;
    int32_t *window;
} shared;

/* The logits of the last position of g's window toks[*start, len), after the window rule
   (past ctx: its last ctx/2), through the KV cache (its first *cached ids there) or the full
   forward pass; NULL after a message. */
static const char *window_logits(gen *g, const shared *sh, int64_t *start, int64_t *cached, int *rc) {
    if (g->len - *start > g->ctx) {
        *start = g->len - (g->ctx > 1 ? g->ctx / 2 : 1); /* the last ctx/2 tokens (one when ctx is 1) */
        *cached = 0;
    }
    const int64_t w = g->len - *start;
    if (sh->dec) {
        cannl_status st = CANNL_OK;
        if (*cached == 0)
            st = sh->dec->prefill(sh->m, g->toks + *start, w, sh->outs[0]);
        else
            for (int64_t p = *cached; p < w && st == CANNL_OK; p++) st = sh->dec->step(sh->m, g->toks[*start + p], sh->outs[0]);
        if (st != CANNL_OK) {
            *rc = fail(g, CANNL__EXIT_FAIL, "the model's decode step failed (status %d)", (int)st);
            return NULL;
        }
        *cached = w;
        return (const char *)sh->outs[0];
    }
    memcpy(sh->window, g->toks + *start, (size_t)w * sizeof *sh->window);
    memset(sh->window + w, 0, (size_t)(g->ctx - w) * sizeof *sh->window);
    sh->model->api->forward(sh->m, (const void *const *)sh->ins, 1, sh->outs);
    return (const char *)sh->outs[0] + (size_t)(w - 1) * (size_t)g->n * sh->es;
}

/* Token g->len from the logits row into g->toks and out; non-zero after a message (logits
   not finite). */
static int take(gen *g, const char *row, const cannl__infer_opts *o, cannl_dtype dt, cannl_rng *rng, int64_t w) {
    int32_t t = 0;
    if (sample(g, row, dt, o, rng, &t) != 0) {
        fflush(stdout);
        return fail(g, CANNL__EXIT_FAIL, "the logits for token %" PRId64 " (at the window's position %" PRId64
                    ") are not finite: logit %" PRId32 " is %s; nothing is sampled from them",
                    g->len, w - 1, t, isnan(g->score[t]) ? "nan" : g->score[t] > 0 ? "inf" : "-inf");
    }
    g->toks[g->len++] = t;
    put_token(g, t);
    return 0;
}

/* One sequence: g's prompt, then o->generate tokens, one step each (--prompt). */
static int generate_one(gen *g, const shared *sh) {
    const cannl__infer_opts *o = sh->o;
    for (int64_t i = 0; i < g->len; i++) put_token(g, g->toks[i]);
    cannl_rng rng;
    cannl_rng_seed(&rng, o->seed);
    int64_t start = 0;  /* the window: toks[start, len) */
    int64_t cached = 0; /* with decode steps: toks[start, start + cached) are in the KV cache */
    int rc = 0;
    for (int64_t step = 0; step < o->generate; step++) {
        const char *row = window_logits(g, sh, &start, &cached, &rc);
        if (!row || (rc = take(g, row, o, sh->model->api->dtype, &rng, g->len - start)) != 0) return rc;
        if (!g->text_cap && fflush(stdout) != 0) break;
    }
    return 0;
}

/* --prompts: the file's lines (each a prompt as --prompt takes it), in *text, NUL-terminated in
   place, *lines of them at (*line)[k]. */
static int read_lines(const gen *g, const char *path, char **text, char ***line, int64_t *lines) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(g, CANNL__EXIT_USAGE, "--prompts %s: cannot open: %s", path, strerror(errno));
    size_t len = 0, cap = 4096;
    char *t = malloc(cap + 1);
    for (size_t got; t && (got = fread(t + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) {
            char *u = realloc(t, 2 * cap + 1);
            if (!u) free(t);
            t = u, cap *= 2;
        }
    }
    const int bad = ferror(f);
    fclose(f);
    if (!t) return fail(g, CANNL__EXIT_FAIL, "out of memory");
    *text = t;
    if (bad) return fail(g, CANNL__EXIT_USAGE, "--prompts %s: cannot read it", path);
    if (len == 0) return fail(g, CANNL__EXIT_USAGE, "--prompts %s: no prompts (the file is empty)", path);
    if (t[len - 1] != '\n') t[len++] = '\n'; /* (room: cap + 1) */
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) n += t[i] == '\n';
    if (n > CANNL__MAX_PROMPTS)
        return fail(g, CANNL__EXIT_USAGE, "--prompts %s: %" PRId64 " lines, more than the %d prompts it takes", path, n,
                    CANNL__MAX_PROMPTS);
    *line = malloc((size_t)n * sizeof **line);
    if (!*line) return fail(g, CANNL__EXIT_FAIL, "out of memory");
    for (size_t i = 0, from = 0; i < len; i++) {
        if (t[i] == '\0')
            return fail(g, CANNL__EXIT_USAGE, "%s:%" PRId64 ": a NUL byte (a prompt is text without NUL)", path, *lines + 1);
        if (t[i] != '\n') continue;
        t[i] = '\0';
        (*line)[(*lines)++] = t + from;
        if (i == from) return fail(g, CANNL__EXIT_USAGE, "%s:%" PRId64 ": empty prompt", path, *lines);
        from = i + 1;
    }
    return 0;
}

/* One sequence of a --prompts batch: its tokens and text (gen), its sampler, its window. */
typedef struct seq {
    gen g;
    cannl_rng rng;
    int64_t start, cached, made; /* the window toks[start, len), its ids in the cache, tokens sampled */
} seq;

/* Sequences q[0, nq) in the KV cache's slots 0 .. nq - 1 at once: each round, one batched step
   of one id of each sequence still feeding its window (a prompt, or a window again past ctx),
   then a token for each whose window is all in the cache; each sequence's ids, logits and
   draws are those of --prompt alone (the batched step's rows are bit for bit its own). */
static int generate_batch(seq *q, int64_t nq, const shared *sh, char *logits) {
    const cannl_decode_api *dec = sh->dec;
    int32_t *slot = malloc((size_t)nq * sizeof *slot), *ids = malloc((size_t)nq * sizeof *ids);
    int64_t *who = malloc((size_t)nq * sizeof *who);
    int rc = !slot || !ids || !who ? fail(&q[0].g, CANNL__EXIT_FAIL, "out of memory") : 0;
    for (int64_t i = 0; !rc && i < nq; i++)
        if (dec->reset(sh->m, (int32_t)i) != CANNL_OK) rc = fail(&q[i].g, CANNL__EXIT_FAIL, "the decode reset failed");
    for (;;) {
        int64_t n = 0;
        for (int64_t i = 0; !rc && i < nq; i++) {
            seq *s = &q[i];
            if (s->made >= sh->o->generate) continue;
            if (s->g.len - s->start > s->g.ctx) {
                s->start = s->g.len - (s->g.ctx > 1 ? s->g.ctx / 2 : 1);
                s->cached = 0;
            }
            if (s->cached == 0 && dec->reset(sh->m, (int32_t)i) != CANNL_OK)
                rc = fail(&s->g, CANNL__EXIT_FAIL, "the decode reset failed");
            slot[n] = (int32_t)i, ids[n] = s->g.toks[s->start + s->cached], who[n++] = i;
        }
        if (rc || n == 0) break;
        cannl_status st = dec->step_batch(sh->m, n, slot, ids, logits);
        if (st != CANNL_OK) {
            rc = fail(&q[0].g, CANNL__EXIT_FAIL, "the model's decode step failed (status %d)", (int)st);
            break;
        }
        for (int64_t r = 0; r < n && !rc; r++) {
            seq *s = &q[who[r]];
            const int64_t w = s->g.len - s->start;
            if (++s->cached < w) continue;
            rc = take(&s->g, logits + (size_t)r * (size_t)s->g.n * sh->es, sh->o, sh->model->api->dtype, &s->rng, w);
            s->made++;
        }
    }
    free(slot), free(ids), free(who);
    return rc;
}

int64_t cannl__generate_rows(const cannl_infer_model *model, const cannl__infer_opts *o) {
    const cannl_decode_api *dec = model->decode;
    const char *full = getenv("CANNL_GENERATE_FULL_FORWARD");
    if (!dec || !dec->step_batch || !dec->reset || (full && *full && strcmp(full, "0") != 0)) return 1;
    /* (one prompt: its prefill's positions that many per step, in slot 0) */
    int64_t rows = o->prompts && o->batch_set ? o->batch : CANNL__PROMPTS_AT_ONCE;
    if (rows > dec->seqs) rows = dec->seqs;
    return rows < model->api->max_batch ? rows : model->api->max_batch;
}

/* --prompts FILE: each line's text as --prompt LINE prints it, in batches of the rows the
   state takes (one at a time without batched decode steps), then printed line by line:
   '### prompt K: B bytes', the B bytes, a newline. */
static int generate_many(const gen *proto, const shared *sh) {
    const cannl__infer_opts *o = sh->o;
    char *text = NULL, **line = NULL;
    int64_t lines = 0;
    int rc = read_lines(proto, o->prompts, &text, &line, &lines);
    seq *q = rc ? NULL : calloc((size_t)lines, sizeof *q);
    if (!rc && !q) rc = fail(proto, CANNL__EXIT_FAIL, "out of memory");
    char where[4096 + 32];
    for (int64_t k = 0; !rc && k < lines; k++) {
        q[k].g = *proto;
        snprintf(where, sizeof where, "%s:%" PRId64, o->prompts, k + 1);
        rc = read_prompt(&q[k].g, line[k], where, o->generate);
        if (!rc) {
            q[k].g.text_cap = 64, q[k].g.text = malloc(64);
            if (!q[k].g.text) rc = fail(proto, CANNL__EXIT_FAIL, "out of memory");
        }
        for (int64_t i = 0; !rc && i < q[k].g.len; i++) put_token(&q[k].g, q[k].g.toks[i]);
        cannl_rng_seed(&q[k].rng, o->seed);
    }
    const int64_t rows = sh->dec ? cannl__generate_rows(sh->model, o) : 1;
    char *logits = rc || rows == 1 ? NULL : malloc((size_t)rows * (size_t)proto->n * sh->es);
    if (!rc && rows > 1 && !logits) rc = fail(proto, CANNL__EXIT_FAIL, "out of memory");
    for (int64_t k = 0; !rc && k < lines; k += rows) {
        if (rows > 1) {
            rc = generate_batch(q + k, lines - k < rows ? lines - k : rows, sh, logits);
            continue;
        }
        q[k].g.text_len = 0; /* (generate_one writes the prompt again) */
        rc = generate_one(&q[k].g, sh);
    }
    for (int64_t k = 0; !rc && k < lines; k++) {
        if (q[k].g.text_full) {
            rc = fail(proto, CANNL__EXIT_FAIL, "out of memory");
            break;
        }
        printf("### prompt %" PRId64 ": %zu bytes\n", k + 1, q[k].g.text_len);
        fwrite(q[k].g.text, 1, q[k].g.text_len, stdout);
        putchar('\n');
    }
    for (int64_t k = 0; q && k < lines; k++) free(q[k].g.toks), free(q[k].g.text);
    free(q), free(logits), free(line), free(text);
    return rc;
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
    shared sh = {model, m, o, NULL, cannl_dtype_size(api->dtype), NULL, NULL, NULL};
    int rc = o->prompts ? 0 : read_prompt(&g, o->prompt, "--prompt", o->generate);
    sh.ins = calloc((size_t)api->num_inputs + 1, sizeof *sh.ins);
    sh.outs = calloc((size_t)api->num_outputs + 1, sizeof *sh.outs);
    sh.window = cannl_alloc((size_t)g.ctx * sizeof *sh.window);
    g.score = malloc((size_t)g.n * sizeof *g.score);
    g.order = malloc((size_t)g.n * sizeof *g.order);
    if (!rc && (!sh.ins || !sh.outs || !sh.window || !g.score || !g.order))
        rc = fail(&g, CANNL__EXIT_FAIL, "out of memory");
    for (int32_t k = 0; !rc && k < api->num_outputs; k++) {
        sh.outs[k] = cannl_alloc((size_t)api->outputs[k].size * sh.es); /* forward fills every output */
        if (!sh.outs[k]) rc = fail(&g, CANNL__EXIT_FAIL, "out of memory");
    }
    if (rc) goto done;
    sh.ins[o->gen_input] = sh.window;
    const char *full = getenv("CANNL_GENERATE_FULL_FORWARD");
    sh.dec = full && *full && strcmp(full, "0") != 0 ? NULL : model->decode;
    if (sh.dec && sh.dec->ctx != g.ctx) sh.dec = NULL; /* not this input's positions */
    rc = o->prompts ? generate_many(&g, &sh) : generate_one(&g, &sh);
    if (!rc && (fflush(stdout) != 0 || ferror(stdout)))
        rc = fail(&g, CANNL__EXIT_FAIL, "cannot write to stdout: %s", strerror(errno));
done:
    for (int32_t k = 0; sh.outs && k < api->num_outputs; k++) cannl_free(sh.outs[k]);
    free(sh.outs);
    free((void *)sh.ins);
    cannl_free(sh.window);
    free(g.score);
    free(g.order);
    free(g.toks);
    return rc;
}
