/* token_stream.c - token streams for language models (contract v1 §6): llm.c token shards and
 * raw bytes, loaded whole, validated once; training windows drawn per step from (seed, step)
 * alone, validation windows at fixed offsets. */
#define _POSIX_C_SOURCE 200809L
#include "rt_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#define SHARD_MAGIC 20240520
#define SHARD_HEADER_INTS 256

static cannl_status read_all(const char *path, unsigned char **data, int64_t *size, cannl_error *err) {
    char why[128];
    FILE *f = fopen(path, "rb");
    if (!f) return cannl__fail(err, CANNL_E_IO, path, "cannot open: %s", cannl__strerror(errno, why, sizeof why));
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0, first = (size_t)1 << 20;
    /* A regular file's size and one byte more (the read that finds the end), so that it is read
       in one allocation; a pipe's grows from 1 MB. */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 0 && (uint64_t)sb.st_size < SIZE_MAX / 2)
        first = (size_t)sb.st_size + 1;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : first;
            unsigned char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                fclose(f);
                return cannl__fail(err, CANNL_E_NOMEM, path, "out of memory reading the token stream");
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    int saved = errno;
    fclose(f);
    if (bad) {
        free(buf);
        return cannl__fail(err, CANNL_E_IO, path, "read error: %s", cannl__strerror(saved, why, sizeof why));
    }
    *data = buf;
    *size = (int64_t)len;
    return CANNL_OK;
}

static int32_t load_le32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

cannl_status cannl_token_stream_open(cannl_token_stream *s, const char *path, int64_t vocab, int64_t min_tokens,
                                     cannl_error *err) {
    memset(s, 0, sizeof *s);
    unsigned char *data = NULL;
    int64_t size = 0;
    cannl_status st = read_all(path, &data, &size, err);
    if (st != CANNL_OK) return st;
    int64_t count = size, header = 0;
    if (size >= 4 && load_le32(data) == SHARD_MAGIC) {
        header = 4 * SHARD_HEADER_INTS;
        if (size < header) {
            free(data);
            return cannl__fail(err, CANNL_E_FORMAT, path,
                               "llm.c token shard with a short header: %lld bytes, the header alone is %lld",
                               (long long)size, (long long)header);
        }
        int32_t version = load_le32(data + 4), declared = load_le32(data + 8);
        if (version != 1) {
            free(data);
            return cannl__fail(err, CANNL_E_FORMAT, path, "llm.c token shard of version %d (only version 1 is read)",
                               (int)version);
        }
        if (declared < 0 || (size - header) % 2 != 0 || (size - header) / 2 != declared) {
            free(data);
            return cannl__fail(err, CANNL_E_FORMAT, path,
                               "llm.c token shard whose header says %d tokens, but its %lld bytes after the "
                               "header hold %lld%s",
                               (int)declared, (long long)(size - header), (long long)((size - header) / 2),
                               (size - header) % 2 ? " and a half" : "");
        }
        count = declared;
        s->shard = 1;
    }
    s->count = count;
    /* Keep the tokens only (the header is dropped: moved to the front). */
    if (header) memmove(data, data + header, (size_t)(size - header));
    s->tokens = data;
    for (int64_t i = 0; i < count; ++i) {
        int32_t t = cannl_token_at(s, i);
        if (t >= vocab) {
            cannl_token_stream_free(s);
            return cannl__fail(err, CANNL_E_RANGE, path, "token %lld is %d, not below the model's vocabulary of %lld%s",
                               (long long)i, (int)t, (long long)vocab,
                               header ? "" : " (a file that is no llm.c token shard is read as raw bytes)");
        }
    }
    if (count < min_tokens) {
        cannl_token_stream_free(s);
        return cannl__fail(err, CANNL_E_FORMAT, path,
                           "%lld tokens: a window needs %lld (the model's context + 1)", (long long)count,
                           (long long)min_tokens);
    }
    return CANNL_OK;
}

void cannl_token_stream_free(cannl_token_stream *s) {
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

int32_t cannl_token_at(const cannl_token_stream *s, int64_t i) {
    if (s->shard) {
        const unsigned char *p = (const unsigned char *)s->tokens + 2 * i;
        return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8);
    }
    return ((const unsigned char *)s->tokens)[i];
}

void cannl_token_window(const cannl_token_stream *s, int64_t offset, int64_t ctx, int32_t *in, int32_t *next) {
    for (int64_t t = 0; t < ctx; ++t) {
        in[t] = cannl_token_at(s, offset + t);
        next[t] = cannl_token_at(s, offset + t + 1);
    }
}

void cannl_token_train_offsets(const cannl_token_stream *s, int64_t ctx, uint64_t seed, int64_t step, int64_t n,
                               int64_t *offsets) {
    cannl_rng rng;
    /* One stream per (seed, step): splitmix64 in cannl_rng_seed mixes the combined value. */
    cannl_rng_seed(&rng, seed * 0x9E3779B97F4A7C15ULL + (uint64_t)step);
    for (int64_t i = 0; i < n; ++i) offsets[i] = (int64_t)cannl_rng_below(&rng, (uint64_t)(s->count - ctx));
}

int64_t cannl_token_val_offset(const cannl_token_stream *s, int64_t ctx, int64_t batches, int64_t batch, int64_t k,
                               int64_t i) {
    int64_t windows = batches * batch, last = s->count - ctx - 1, j = k * batch + i;
    if (windows <= 1 || last <= 0) return 0;
    /* floor(j * last / (windows - 1)), exactly and without overflow (j < windows). */
    int64_t w = windows - 1;
    return j * (last / w) + j * (last % w) / w;
}
