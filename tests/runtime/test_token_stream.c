/* test_token_stream.c - cannl_token_stream: llm.c shards and raw bytes, their errors, windows,
 * training offsets (a function of seed and step) and validation offsets. */
#include "rt_test.h"

static char dir[512];

static const char *path_of(const char *name) {
    static char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void put32(FILE *f, int32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, f);
}

/* A shard of `n` tokens 0, 1, ..., with header fields as given; `extra` more bytes at the end. */
static const char *write_shard(const char *name, int32_t magic, int32_t version, int32_t declared, int32_t n,
                               int header_ints, int extra) {
    const char *p = path_of(name);
    FILE *f = fopen(p, "wb");
    put32(f, magic);
    if (header_ints > 1) put32(f, version);
    if (header_ints > 2) put32(f, declared);
    for (int i = 3; i < header_ints; ++i) put32(f, 0);
    for (int32_t i = 0; i < n; ++i) {
        unsigned char b[2] = {(unsigned char)(i * 7 % 50257), (unsigned char)((i * 7 % 50257) >> 8)};
        fwrite(b, 1, 2, f);
    }
    for (int i = 0; i < extra; ++i) fputc(0, f);
    fclose(f);
    return p;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    snprintf(dir, sizeof dir, "%s", argv[1]);
    if (rt_fresh_dir(dir) != 0) return 2;
    cannl_error err;
    cannl_token_stream s;

    /* A valid shard. */
    char good[1024];
    snprintf(good, sizeof good, "%s", write_shard("good.bin", 20240520, 1, 1000, 1000, 256, 0));
    CHECK_OK(cannl_token_stream_open(&s, good, 50304, 65, &err));
    CHECK(s.shard == 1 && s.count == 1000);
    CHECK(cannl_token_at(&s, 0) == 0 && cannl_token_at(&s, 999) == 999 * 7 % 50257);
    int32_t in[64], next[64];
    cannl_token_window(&s, 10, 64, in, next);
    CHECK(in[0] == 70 && next[0] == 77 && in[63] == 73 * 7 && next[63] == 74 * 7);

    /* Training offsets: in range, a function of (seed, step). */
    int64_t a[32], b[32], c[32];
    cannl_token_train_offsets(&s, 64, 1, 5, 32, a);
    cannl_token_train_offsets(&s, 64, 1, 5, 32, b);
    cannl_token_train_offsets(&s, 64, 1, 6, 32, c);
    int same = 1, differ = 0;
    for (int i = 0; i < 32; ++i) {
        CHECK(a[i] >= 0 && a[i] < 1000 - 64);
        same &= a[i] == b[i];
        differ |= a[i] != c[i];
    }
    CHECK(same && differ);
    /* A prefix of a larger draw is the smaller draw (ranks slice one global batch). */
    int64_t big[64];
    cannl_token_train_offsets(&s, 64, 1, 5, 64, big);
    for (int i = 0; i < 32; ++i) CHECK(big[i] == a[i]);

    /* Validation offsets: evenly spread, first at 0, last window ending at the last token. */
    CHECK(cannl_token_val_offset(&s, 64, 4, 8, 0, 0) == 0);
    CHECK(cannl_token_val_offset(&s, 64, 4, 8, 3, 7) == 1000 - 64 - 1);
    int64_t prev = -1;
    for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 8; ++i) {
            int64_t o = cannl_token_val_offset(&s, 64, 4, 8, k, i);
            CHECK(o > prev);
            prev = o;
        }
    cannl_token_stream_free(&s);

    /* Shard errors. */
    CHECK_ERR(cannl_token_stream_open(&s, write_shard("v2.bin", 20240520, 2, 1000, 1000, 256, 0), 50304, 65, &err),
              CANNL_E_FORMAT, "v2.bin", "version 2");
    CHECK_ERR(cannl_token_stream_open(&s, write_shard("short.bin", 20240520, 1, 0, 0, 100, 0), 50304, 65, &err),
              CANNL_E_FORMAT, "short.bin", "short header");
    CHECK_ERR(cannl_token_stream_open(&s, write_shard("count.bin", 20240520, 1, 1001, 1000, 256, 0), 50304, 65, &err),
              CANNL_E_FORMAT, "count.bin", "says 1001 tokens");
    CHECK_ERR(cannl_token_stream_open(&s, write_shard("odd.bin", 20240520, 1, 1000, 1000, 256, 1), 50304, 65, &err),
              CANNL_E_FORMAT, "odd.bin", "and a half");
    CHECK_ERR(cannl_token_stream_open(&s, good, 5000, 65, &err), CANNL_E_RANGE, "good.bin",
              "not below the model's vocabulary of 5000");
    CHECK_ERR(cannl_token_stream_open(&s, write_shard("tiny.bin", 20240520, 1, 10, 10, 256, 0), 50304, 65, &err),
              CANNL_E_FORMAT, "tiny.bin", "a window needs 65");
    CHECK_ERR(cannl_token_stream_open(&s, path_of("missing.bin"), 256, 2, &err), CANNL_E_IO, "missing.bin", "cannot open");
    CHECK(s.tokens == NULL && s.count == 0);

    /* Raw bytes. */
    char text[1024];
    snprintf(text, sizeof text, "%s", path_of("text.txt"));
    FILE *f = fopen(text, "wb");
    fputs("In the beginning God created the heaven and the earth.\n", f);
    fclose(f);
    CHECK_OK(cannl_token_stream_open(&s, text, 256, 9, &err));
    CHECK(s.shard == 0 && s.count == 55);
    cannl_token_window(&s, 3, 8, in, next);
    CHECK(in[0] == 't' && next[0] == 'h' && in[7] == 'i' && next[7] == 'n');
    cannl_token_stream_free(&s);
    CHECK_ERR(cannl_token_stream_open(&s, text, 100, 9, &err), CANNL_E_RANGE, "text.txt", "raw bytes");
    return rt_finish("test_token_stream");
}
