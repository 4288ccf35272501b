/* test_checkpoint.c - safetensors writer/reader: round trip, conversion,
 * lookup errors, header validation on crafted files, and atomicity of the
 * writer (failures leave no temp file and never touch an existing file). */
#include "rt_test.h"

#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>

static const char *MODEL = "mlp_test";

/* A raw safetensors file from a header string and `data_len` data bytes. */
static void write_raw(const char *path, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    size_t total = 8 + hl + data_len;
    unsigned char *b = calloc(1, total);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    CHECK(rt_write_file(path, b, total) == 0);
    free(b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_checkpoint WORKDIR\n");
        return 2;
    }
    const char *dir = argv[1];
    CHECK(rt_fresh_dir(dir) == 0);
    cannl_error err;
    char p[1024], p2[1024];

    /* ---- round trip ---- */
    float w[3 * 4];
    double b[4];
    float s = 2.5f;
    for (int i = 0; i < 12; i++) w[i] = (float)i * 0.5f - 2.0f;
    for (int i = 0; i < 4; i++) b[i] = 1.0 / (i + 3);
    cannl_tensor ts[] = {
        {"fc1.weight", CANNL_F32, 2, {3, 4}, w},
        {"fc1.bias", CANNL_F64, 1, {4}, b},
        {"scale", CANNL_F32, 0, {0}, &s},
        {"empty", CANNL_F32, 2, {0, 5}, NULL},
        {"unicod\xc3\xa9 \"quoted\"\\", CANNL_F32, 1, {1}, &s},
    };
    const cannl_meta meta[] = {{CANNL_META_MODEL, MODEL}, {"step", "1200"}, {"epoch", "3"}, {"note", "a\tb\n\"c\""}};
    const char *ck_path = rt_path(p, sizeof p, dir, "model.safetensors");
    CHECK_OK(cannl_checkpoint_save(ck_path, ts, 5, meta, 4, &err));
    CHECK(rt_count_matching(dir, ".tmp.") == 0);
    {
        /* Header length is a multiple of 8 and the JSON starts right after it. */
        size_t len;
        char *raw = rt_read_file(ck_path, &len);
        CHECK(raw && len > 8 && raw[8] == '{');
        uint64_t hl = 0;
        for (int i = 7; raw && i >= 0; i--) hl = (hl << 8) | (unsigned char)raw[i];
        CHECK(hl % 8 == 0);
        CHECK(len == 8 + hl + 12 * 4 + 4 * 8 + 4 + 4);
        free(raw);
    }

    cannl_checkpoint *ck = NULL;
    CHECK_OK(cannl_checkpoint_open(ck_path, MODEL, &ck, &err));
    if (ck) {
        CHECK(strcmp(cannl_checkpoint_meta(ck, "step"), "1200") == 0);
        CHECK(strcmp(cannl_checkpoint_meta(ck, "epoch"), "3") == 0);
        CHECK(strcmp(cannl_checkpoint_meta(ck, "note"), "a\tb\n\"c\"") == 0);
        CHECK(cannl_checkpoint_meta(ck, "missing") == NULL);

        float w2[12] = {0};
        cannl_tensor rw = {"fc1.weight", CANNL_F32, 2, {3, 4}, w2};
        CHECK_OK(cannl_checkpoint_read(ck, &rw, &err));
        CHECK(memcmp(w, w2, sizeof w) == 0);
        /* F32 -> F64 and F64 -> F32 conversion. */
        double w3[12] = {0};
        cannl_tensor rw3 = {"fc1.weight", CANNL_F64, 2, {3, 4}, w3};
        CHECK_OK(cannl_checkpoint_read(ck, &rw3, &err));
        for (int i = 0; i < 12; i++) CHECK(w3[i] == (double)w[i]);
        float b2[4] = {0};
        cannl_tensor rb = {"fc1.bias", CANNL_F32, 1, {4}, b2};
        CHECK_OK(cannl_checkpoint_read(ck, &rb, &err));
        for (int i = 0; i < 4; i++) CHECK(b2[i] == (float)b[i]);
        double b3[4] = {0};
        cannl_tensor rb3 = {"fc1.bias", CANNL_F64, 1, {4}, b3};
        CHECK_OK(cannl_checkpoint_read(ck, &rb3, &err));
        CHECK(memcmp(b, b3, sizeof b) == 0);
        float s2 = 0;
        cannl_tensor rs = {"scale", CANNL_F32, 0, {0}, &s2};
        CHECK_OK(cannl_checkpoint_read(ck, &rs, &err));
        CHECK(s2 == 2.5f);
        cannl_tensor re = {"empty", CANNL_F32, 2, {0, 5}, NULL};
        CHECK_OK(cannl_checkpoint_read(ck, &re, &err));
        cannl_tensor ru = {"unicod\xc3\xa9 \"quoted\"\\", CANNL_F64, 1, {1}, b3};
        CHECK_OK(cannl_checkpoint_read(ck, &ru, &err));
        CHECK(b3[0] == 2.5);

        /* Lookup errors. */
        cannl_tensor missing = {"fc2.weight", CANNL_F32, 2, {3, 4}, w2};
        CHECK_ERR(cannl_checkpoint_read(ck, &missing, &err), CANNL_E_NOTFOUND, "model.safetensors:",
                  "no tensor 'fc2.weight'");
        cannl_tensor wrong = {"fc1.weight", CANNL_F32, 2, {4, 3}, w2};
        CHECK_ERR(cannl_checkpoint_read(ck, &wrong, &err), CANNL_E_MISMATCH, "model.safetensors:",
                  "tensor 'fc1.weight' has shape [3, 4], expected [4, 3]");
        cannl_tensor wrong_rank = {"fc1.bias", CANNL_F32, 2, {4, 1}, b2};
        CHECK_ERR(cannl_checkpoint_read(ck, &wrong_rank, &err), CANNL_E_MISMATCH, "has shape [4], expected [4, 1]", "");
        cannl_checkpoint_close(ck);
    }
    /* Any model accepted with NULL; a wrong model name is refused. */
    CHECK_OK(cannl_checkpoint_open(ck_path, NULL, &ck, &err));
    cannl_checkpoint_close(ck);
    CHECK_ERR(cannl_checkpoint_open(ck_path, "resnet", &ck, &err), CANNL_E_MISMATCH, "model.safetensors:",
              "checkpoint is for model 'mlp_test', expected 'resnet'");
    CHECK(ck == NULL);

    /* No metadata at all (and then no model to check). */
    CHECK_OK(cannl_checkpoint_save(rt_path(p2, sizeof p2, dir, "nometa.safetensors"), ts, 2, NULL, 0, &err));
    CHECK_OK(cannl_checkpoint_open(p2, NULL, &ck, &err));
    CHECK(ck && cannl_checkpoint_meta(ck, CANNL_META_MODEL) == NULL);
    cannl_checkpoint_close(ck);
    CHECK_ERR(cannl_checkpoint_open(p2, MODEL, &ck, &err), CANNL_E_MISMATCH, "nometa.safetensors:", "no \"model\"");
    /* An empty checkpoint is valid. */
    CHECK_OK(cannl_checkpoint_save(rt_path(p2, sizeof p2, dir, "empty.safetensors"), NULL, 0, meta, 1, &err));
    CHECK_OK(cannl_checkpoint_open(p2, MODEL, &ck, &err));
    cannl_checkpoint_close(ck);

    /* ---- writer argument validation (nothing is created) ---- */
    {
        cannl_tensor dup[2] = {{"a", CANNL_F32, 1, {1}, &s}, {"a", CANNL_F32, 1, {1}, &s}};
        const char *bad_path = rt_path(p2, sizeof p2, dir, "bad.safetensors");
        CHECK_ERR(cannl_checkpoint_save(bad_path, dup, 2, NULL, 0, &err), CANNL_E_ARG, "bad.safetensors:",
                  "duplicate tensor name 'a'");
        cannl_tensor nodata = {"x", CANNL_F32, 1, {3}, NULL};
        CHECK_ERR(cannl_checkpoint_save(bad_path, &nodata, 1, NULL, 0, &err), CANNL_E_ARG, "tensor 'x'", "data is NULL");
        cannl_tensor neg = {"x", CANNL_F32, 1, {-3}, &s};
        CHECK_ERR(cannl_checkpoint_save(bad_path, &neg, 1, NULL, 0, &err), CANNL_E_ARG, "tensor 'x'", "bad shape");
        cannl_tensor reserved = {"__metadata__", CANNL_F32, 1, {1}, &s};
        CHECK_ERR(cannl_checkpoint_save(bad_path, &reserved, 1, NULL, 0, &err), CANNL_E_ARG, "reserved", "");
        const cannl_meta dm[2] = {{"k", "1"}, {"k", "2"}};
        CHECK_ERR(cannl_checkpoint_save(bad_path, NULL, 0, dm, 2, &err), CANNL_E_ARG, "duplicate metadata key 'k'", "");
        CHECK(!rt_exists(bad_path));
        CHECK(rt_count_matching(dir, ".tmp.") == 0);
    }

    /* ---- atomicity ---- */
    {
        /* 1. Into a directory that does not exist: error, nothing created. */
        char sub[1024];
        rt_path(sub, sizeof sub, dir, "no_such_dir");
        const char *nd = rt_path(p2, sizeof p2, sub, "model.safetensors");
        CHECK_ERR(cannl_checkpoint_save(nd, ts, 2, meta, 1, &err), CANNL_E_IO, "no_such_dir/model.safetensors:",
                  "cannot create temporary file");
        CHECK(!rt_exists(sub));
        CHECK(rt_count_matching(dir, ".tmp.") == 0);

        /* 2. The rename fails (target is a non-empty directory): the
         *    temp file is removed, the directory is untouched. */
        char target[1024], inner[1024];
        rt_path(target, sizeof target, dir, "occupied.safetensors");
        mkdir(target, 0755);
        CHECK(rt_write_file(rt_path(inner, sizeof inner, target, "keep"), "x", 1) == 0);
        CHECK_ERR(cannl_checkpoint_save(target, ts, 2, meta, 1, &err), CANNL_E_IO, "occupied.safetensors:",
                  "it is a directory");
        CHECK(rt_count_matching(dir, ".tmp.") == 0);
        CHECK(rt_exists(inner));
        unlink(inner);
        rmdir(target);

        /* 2b. Only a regular file is replaced (issue 36): never a FIFO (a device as /dev/null the
         *     same), nor a symbolic link (neither it nor its target is written). */
        struct stat sb;
        rt_path(target, sizeof target, dir, "fifo.safetensors");
        CHECK(mkfifo(target, 0644) == 0);
        CHECK_ERR(cannl_checkpoint_save(target, ts, 2, meta, 1, &err), CANNL_E_IO, "fifo.safetensors:",
                  "it is a FIFO");
        CHECK(lstat(target, &sb) == 0 && S_ISFIFO(sb.st_mode));
        CHECK(rt_count_matching(dir, ".tmp.") == 0);
        unlink(target);
        rt_path(target, sizeof target, dir, "link.safetensors");
        rt_path(inner, sizeof inner, dir, "link_target");
        CHECK(rt_write_file(inner, "x", 1) == 0);
        CHECK(symlink("link_target", target) == 0);
        CHECK_ERR(cannl_checkpoint_save(target, ts, 2, meta, 1, &err), CANNL_E_IO, "link.safetensors:",
                  "it is a symbolic link");
        CHECK(lstat(target, &sb) == 0 && S_ISLNK(sb.st_mode));
        size_t kept_len = 0;
        char *kept = rt_read_file(inner, &kept_len);
        CHECK(kept && kept_len == 1 && kept[0] == 'x');
        free(kept);
        CHECK(rt_count_matching(dir, ".tmp.") == 0);
        unlink(target);
        unlink(inner);

        /* 3. A write failure half way (file size limit, as on a full disk):
         *    the existing checkpoint is untouched and no temp file stays. */
        size_t before_len;
        char *before = rt_read_file(ck_path, &before_len);
        enum { BIG = 1 << 20 };
        float *big = calloc(BIG, sizeof(float));
        cannl_tensor bt = {"big", CANNL_F32, 1, {BIG}, big};
        struct rlimit old, lim;
        signal(SIGXFSZ, SIG_IGN);
        CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
        lim = old;
        lim.rlim_cur = 64 * 1024;
        if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
            CHECK_ERR(cannl_checkpoint_save(ck_path, &bt, 1, meta, 1, &err), CANNL_E_IO, "model.safetensors:",
                      "cannot write checkpoint");
            setrlimit(RLIMIT_FSIZE, &old);
            CHECK(rt_count_matching(dir, ".tmp.") == 0);
            size_t after_len;
            char *after = rt_read_file(ck_path, &after_len);
            CHECK(after && before && after_len == before_len && memcmp(before, after, before_len) == 0);
            free(after);
        } else {
            printf("setrlimit unavailable: skipping the write-failure case\n");
        }
        /* 4. A successful save replaces the old file. */
        CHECK_OK(cannl_checkpoint_save(ck_path, &bt, 1, meta, 1, &err));
        CHECK_OK(cannl_checkpoint_open(ck_path, MODEL, &ck, &err));
        cannl_tensor rt = {"fc1.weight", CANNL_F32, 2, {3, 4}, w};
        CHECK_ERR(cannl_checkpoint_read(ck, &rt, &err), CANNL_E_NOTFOUND, "fc1.weight", "");
        cannl_checkpoint_close(ck);
        CHECK(rt_count_matching(dir, ".tmp.") == 0);
        free(big);
        free(before);
    }

    /* ---- reader validation on crafted files ---- */
    struct {
        const char *name, *header;
        size_t data;
        const char *expect;
    } bad[] = {
        {"bad_json.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]", 4, "not valid JSON"},
        {"bad_json2.st", "{\"a\":{\"dtype\":\"F32\" \"shape\":[1]}}", 0, "expected ',' or '}' at byte"},
        {"not_obj.st", "[1,2]   ", 0, "not a JSON object"},
        {"beyond.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "outside the 8 data bytes"},
        {"overlap.st",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, "overlap"},
        {"size.st", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
         "F64 x 4 elements does not match its 16 data bytes"},
        {"dtype.st", "{\"a\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16, "unknown dtype 'F128'"},
        {"neg.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative integers"},
        {"offs.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 4, "data_offsets"},
        {"reversed.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "end before they begin"},
        {"dup.st",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "duplicate tensor 'a'"},
        {"meta.st", "{\"__metadata__\":{\"step\":12}}", 0, "metadata value for 'step' is not a string"},
        {"nodtype.st", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "missing or non-string \"dtype\""},
        {"deep.st",
         "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
         0, "nesting too deep"},
        {"escape.st", "{\"a\\x\":1}", 0, "bad escape"},
        {"surrogate.st", "{\"\\ud800\":1}", 0, "unpaired surrogate"},
        /* What the reference safetensors implementation refuses too: a repeated metadata key or
           tensor field, bytes no tensor owns (a hole, a gap at the start, trailing bytes), a
           header that is not UTF-8. */
        {"dupmeta.st", "{\"__metadata__\":{\"step\":\"1\",\"step\":\"2\"}}", 0, "duplicate metadata key 'step'"},
        {"dupfield.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"dtype\":\"F64\"}}", 4,
         "tensor 'a': duplicate field \"dtype\""},
        {"hole.st",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, "4 bytes between tensors 'a' and 'b' belong to no tensor"},
        {"gap.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
         "the first tensor, 'a', begins at data offset 4, not 0"},
        {"trailing.st", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 7,
         "3 bytes after the last tensor belong to no tensor"},
        {"trailing0.st", "{\"__metadata__\":{\"model\":\"m\"}}", 2, "2 bytes after the header (it lists no tensor)"},
        {"inside.st",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
         8, "tensors 'a' and 'e' overlap"},
        {"latin1.st", "{\"__metadata__\":{\"model\":\"caf\xe9\"}}", 0, "invalid UTF-8 in string"},
        {"overlong.st", "{\"__metadata__\":{\"model\":\"\xc0\xaf\"}}", 0, "invalid UTF-8 in string"},
        {"cesu.st", "{\"__metadata__\":{\"model\":\"\xed\xa0\x80\"}}", 0, "invalid UTF-8 in string"},
        {"latin1key.st", "{\"\xff\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0,
         "invalid UTF-8 in string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rt_path(p2, sizeof p2, dir, bad[i].name);
        write_raw(p2, bad[i].header, bad[i].data);
        CHECK_ERR(cannl_checkpoint_open(p2, NULL, &ck, &err), CANNL_E_FORMAT, bad[i].name, bad[i].expect);
        CHECK(ck == NULL);
    }
    /* Well-formed UTF-8 (2, 3 and 4 bytes) and empty tensors where the previous one ends are fine. */
    rt_path(p2, sizeof p2, dir, "utf8.st");
    write_raw(p2,
              "{\"__metadata__\":{\"model\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"},"
              "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"z\":{\"dtype\":\"F64\",\"shape\":[0,3],\"data_offsets\":[4,4]}}    ",
              4);
    CHECK_OK(cannl_checkpoint_open(p2, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", &ck, &err));
    cannl_checkpoint_close(ck);
    /* I64 (PyTorch's num_batches_tracked) reads as numbers; a valid file with an unreadable
     * dtype opens, and reading that tensor fails. */
    rt_path(p2, sizeof p2, dir, "i64.st");
    write_raw(p2, "{\"n\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]},"
                  "\"h\":{\"dtype\":\"I16\",\"shape\":[],\"data_offsets\":[8,10]}}      ", 10);
    CHECK_OK(cannl_checkpoint_open(p2, NULL, &ck, &err));
    if (ck) {
        double v = 1;
        cannl_tensor t = {"n", CANNL_F64, 0, {0}, &v};
        CHECK_OK(cannl_checkpoint_read(ck, &t, &err));
        CHECK(v == 0);
        cannl_tensor th = {"h", CANNL_F64, 0, {0}, &v};
        CHECK_ERR(cannl_checkpoint_read(ck, &th, &err), CANNL_E_MISMATCH, "tensor 'h' has dtype I16", "");
        cannl_checkpoint_close(ck);
    }
    /* A 9-D tensor does not stop the file from opening; only it is unreadable. */
    rt_path(p2, sizeof p2, dir, "rank9.st");
    write_raw(p2,
              "{\"r\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]},"
              "\"s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
              12);
    CHECK_OK(cannl_checkpoint_open(p2, NULL, &ck, &err));
    if (ck) {
        float v[2];
        cannl_tensor t = {"r", CANNL_F32, 8, {1, 1, 1, 1, 1, 1, 1, 2}, v};
        CHECK_ERR(cannl_checkpoint_read(ck, &t, &err), CANNL_E_MISMATCH, "tensor 'r' has 9 dimensions", "");
        cannl_tensor t2 = {"s", CANNL_F32, 1, {1}, v};
        CHECK_OK(cannl_checkpoint_read(ck, &t2, &err));
        CHECK(v[0] == 0.0f);
        cannl_checkpoint_close(ck);
    }
    /* Header length field larger than the file / file shorter than 8 bytes. */
    {
        unsigned char hb[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
        CHECK(rt_write_file(rt_path(p2, sizeof p2, dir, "hlen.st"), hb, 10) == 0);
        CHECK_ERR(cannl_checkpoint_open(p2, NULL, &ck, &err), CANNL_E_FORMAT, "hlen.st:", "header length 65535 is invalid");
        CHECK(rt_write_file(rt_path(p2, sizeof p2, dir, "short.st"), hb, 5) == 0);
        CHECK_ERR(cannl_checkpoint_open(p2, NULL, &ck, &err), CANNL_E_FORMAT, "short.st:", "too short");
    }
    /* A real checkpoint cut short: offsets now point past the end. */
    {
        size_t len;
        char *raw = rt_read_file(rt_path(p, sizeof p, dir, "nometa.safetensors"), &len);
        CHECK(raw != NULL);
        if (raw) {
            CHECK(rt_write_file(rt_path(p2, sizeof p2, dir, "cut.safetensors"), raw, len - 3) == 0);
            CHECK_ERR(cannl_checkpoint_open(p2, NULL, &ck, &err), CANNL_E_FORMAT, "cut.safetensors:", "truncated file?");
            free(raw);
        }
    }
    CHECK_ERR(cannl_checkpoint_open(rt_path(p2, sizeof p2, dir, "absent.safetensors"), NULL, &ck, &err), CANNL_E_IO,
              "absent.safetensors: cannot open", "No such file");
    cannl_checkpoint_close(NULL);
    return rt_finish("test_checkpoint");
}
