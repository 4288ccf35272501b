/* fuzz_tokens.c - libFuzzer harness of the token-stream reader (token_stream.c): the input is
 * one file for --stream, an llm.c token shard (magic 20240520, a header of 256 int32, uint16
 * tokens) or anything else, read as raw bytes. An opened stream must hold as many tokens as
 * the file does, each below the vocabulary it was opened with, and give training and
 * validation windows inside the stream; it must be refused with a vocabulary just below its
 * largest token (CANNL_E_RANGE) and with more tokens asked for than it has. A refused file says
 * why in one line naming the file, and leaves the stream zeroed. */
#include "cannl_rt.h"
#include "fuzz_util.h"

#define SHARD_HEADER_BYTES 1024

static void check_refused(cannl_status st, const cannl_token_stream *s, const cannl_error *err, const char *path) {
    FUZZ_ASSERT(st != CANNL_OK);
    FUZZ_ASSERT(s->tokens == NULL && s->count == 0 && s->shard == 0);
    fuzz_check_message(err->msg, path);
}

/* Windows of ctx + 1 tokens: training offsets for a few steps, validation offsets of a few
   batches, every one inside the stream. */
static void check_windows(const cannl_token_stream *s, int64_t ctx) {
    int32_t in[16], next[16];
    int64_t offsets[4];
    for (int64_t step = 0; step < 3; step++) {
        cannl_token_train_offsets(s, ctx, 1234, step, 4, offsets);
        for (int i = 0; i < 4; i++) {
            FUZZ_ASSERT(offsets[i] >= 0 && offsets[i] + ctx < s->count);
            cannl_token_window(s, offsets[i], ctx, in, next);
            for (int64_t t = 0; t + 1 < ctx; t++) FUZZ_ASSERT(next[t] == in[t + 1]);
        }
    }
    for (int64_t batches = 1; batches <= 3; batches++)
        for (int64_t k = 0; k < batches; k++)
            for (int64_t i = 0; i < 2; i++) {
                const int64_t off = cannl_token_val_offset(s, ctx, batches, 2, k, i);
                FUZZ_ASSERT(off >= 0 && off + ctx < s->count);
                cannl_token_window(s, off, ctx, in, next);
            }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write(data, size, ".bin");
    cannl_token_stream s;
    cannl_error err;
    err.msg[0] = '\0';
    /* Every uint16 token is below 65536: only the shard's framing can be refused. */
    cannl_status st = cannl_token_stream_open(&s, path, 65536, 1, &err);
    if (st != CANNL_OK) {
        check_refused(st, &s, &err, path);
        FUZZ_ASSERT(st == CANNL_E_FORMAT); /* a bad header, or an empty file */
        return 0;
    }
    const int shard = size >= 4 && data[0] == 0x88 && data[1] == 0xD8 && data[2] == 0x34 &&
                      data[3] == 0x01; /* 20240520, little-endian */
    FUZZ_ASSERT(s.shard == shard);
    FUZZ_ASSERT(s.count == (shard ? (int64_t)(size - SHARD_HEADER_BYTES) / 2 : (int64_t)size));
    FUZZ_ASSERT(s.count >= 1 && s.tokens != NULL);
    int32_t largest = 0;
    for (int64_t i = 0; i < s.count; i++) {
        const int32_t t = cannl_token_at(&s, i);
        const size_t at = shard ? SHARD_HEADER_BYTES + 2 * (size_t)i : (size_t)i;
        FUZZ_ASSERT(t == (shard ? (int32_t)(data[at] | data[at + 1] << 8) : (int32_t)data[at]));
        if (t > largest) largest = t;
    }
    const int64_t count = s.count;
    for (int64_t ctx = 1; ctx <= 16 && ctx < count; ctx *= 4) check_windows(&s, ctx);
    cannl_token_stream_free(&s);
    FUZZ_ASSERT(s.tokens == NULL && s.count == 0);

    /* The vocabulary that holds the largest token exactly opens it; one below does not. */
    FUZZ_ASSERT(cannl_token_stream_open(&s, path, (int64_t)largest + 1, count, &err) == CANNL_OK);
    FUZZ_ASSERT(s.count == count);
    cannl_token_stream_free(&s);
    st = cannl_token_stream_open(&s, path, largest, 1, &err);
    check_refused(st, &s, &err, path);
    FUZZ_ASSERT(st == CANNL_E_RANGE);
    /* One token more than the stream holds: too short for a window. */
    st = cannl_token_stream_open(&s, path, 65536, count + 1, &err);
    check_refused(st, &s, &err, path);
    FUZZ_ASSERT(st == CANNL_E_FORMAT);
    return 0;
}
