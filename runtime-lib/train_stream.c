/* train_stream.c - token streams in the training program (contract v1 §6): the binding
 * `--stream tokens,next=PATH` (and --val-stream) of a pair of integer inputs [ctx |], the
 * stream's file, and the batches of ctx + 1 token windows: a training step's at random offsets
 * drawn from (seed, step) alone, a validation batch's at fixed offsets. */
#include "rt_internal.h"
#include "train_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int usage(char *msg, size_t cap, const char *fmt, ...) CANNL__PRINTF(3, 4);

static int usage(char *msg, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return CANNL__EXIT_USAGE;
}

static int find_input(const cannl_model_api *api, const char *name, size_t len) {
    for (int32_t i = 0; i < api->num_inputs; i++)
        if (strlen(api->inputs[i].name) == len && strncmp(api->inputs[i].name, name, len) == 0) return (int)i;
    return -1;
}

int cannl__stream_bind(const cannl_model_api *api, const char *flag, const char *spec, cannl__stream *s, char *msg,
                       size_t cap) {
    memset(s, 0, sizeof *s);
    const char *comma = strchr(spec, ','), *eq = strchr(spec, '=');
    if (!comma || !eq || comma > eq || comma == spec || comma + 1 == eq || !eq[1])
        return usage(msg, cap, "%s expects INPUT,TARGET=PATH (e.g. tokens,next=train.bin), got '%s'", flag, spec);
    const int in = find_input(api, spec, (size_t)(comma - spec));
    const int tgt = find_input(api, comma + 1, (size_t)(eq - comma - 1));
    const char *bad = in < 0 ? spec : tgt < 0 ? comma + 1 : NULL;
    if (bad)
        return usage(msg, cap, "%s %s: model '%s' has no input '%.*s'", flag, spec, api->name,
                     (int)((bad == spec ? comma : eq) - bad), bad);
    if (in == tgt) return usage(msg, cap, "%s %s: the input and the target must be two inputs", flag, spec);
    const cannl_tensor_info *a = &api->inputs[in], *b = &api->inputs[tgt];
    for (const cannl_tensor_info *x = a; x; x = x == a ? b : NULL)
        if (x->ids <= 0 || x->ndims != 1)
            return usage(msg, cap, "%s: input '%s' is not an integer input [ctx |] (a stream feeds token windows)", flag,
                         x->name);
    if (a->size != b->size)
        return usage(msg, cap, "%s: inputs '%s' [%" PRId64 "] and '%s' [%" PRId64 "] differ in length", flag, a->name,
                     a->size, b->name, b->size);
    for (int32_t i = 0; i < api->num_inputs; i++)
        if (i != in && i != tgt)
            return usage(msg, cap, "%s: model '%s' also has input '%s', which a token stream cannot feed", flag,
                         api->name, api->inputs[i].name);
    s->input = in;
    s->target = tgt;
    s->ctx = a->size;
    s->vocab = a->ids < b->ids ? a->ids : b->ids;
    s->path = eq + 1;
    return CANNL__EXIT_OK;
}

cannl_status cannl__stream_open(cannl__stream *s, cannl_error *err) {
    return cannl_token_stream_open(&s->tokens, s->path, s->vocab, s->ctx + 1, err);
}

void cannl__stream_close(cannl__stream *s) { cannl_token_stream_free(&s->tokens); }

void cannl__stream_train_batch(const cannl__stream *s, uint64_t seed, int64_t step, int64_t n, int64_t *offsets,
                               void *const *bufs) {
    cannl_token_train_offsets(&s->tokens, s->ctx, seed, step, n, offsets);
    int32_t *in = bufs[s->input], *tgt = bufs[s->target];
    for (int64_t i = 0; i < n; i++) cannl_token_window(&s->tokens, offsets[i], s->ctx, in + i * s->ctx, tgt + i * s->ctx);
}

void cannl__stream_train_slice(const cannl__stream *s, uint64_t seed, int64_t step, int64_t n, int64_t lo,
                               int64_t count, int64_t *offsets, void *const *bufs) {
    cannl_token_train_offsets(&s->tokens, s->ctx, seed, step, n, offsets);
    int32_t *in = bufs[s->input], *tgt = bufs[s->target];
    for (int64_t i = 0; i < count; i++)
        cannl_token_window(&s->tokens, offsets[lo + i], s->ctx, in + i * s->ctx, tgt + i * s->ctx);
}

void cannl__stream_val_batch(const cannl__stream *s, int64_t batches, int64_t n, int64_t k, void *const *bufs) {
    int32_t *in = bufs[s->input], *tgt = bufs[s->target];
    for (int64_t i = 0; i < n; i++)
        cannl_token_window(&s->tokens, cannl_token_val_offset(&s->tokens, s->ctx, batches, n, k, i), s->ctx,
                           in + i * s->ctx, tgt + i * s->ctx);
}
