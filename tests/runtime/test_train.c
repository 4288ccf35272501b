/* test_train.c - the generic training program (cannl_train_main), driven
 * through the fake models' executables (fake_train: softmax regression with
 * inputs x and y; fake_quad_train: a model without inputs).
 *
 *   test_train CASE WORKDIR FAKE_TRAIN FAKE_QUAD_TRAIN
 *
 * Each CASE is one ctest test: cli, binding, metrics, resume, steps, sigint,
 * other_model, init, corrupt, no_inputs, prefetch, signals, diverge, metadata,
 * data_finite, stale_tmp, crash_resume, periodic, keep_last, resume_end,
 * init_partial. The data files (.npy, .csv, IDX) are written by the test
 * itself. */
#include "rt_test.h"

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static const char *g_dir, *g_fake, *g_quad, *g_prefetch, *g_quad_infer;

/* ------------------------------------------------------------ helpers */

/* printf into one of a pool of static buffers (a test needs only a few at once). */
static const char *F(const char *fmt, ...) {
    static char pool[48][1024];
    static int next = 0;
    char *b = pool[next++ % 48];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof pool[0], fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof pool[0]) {
        fprintf(stderr, "F: too long\n");
        exit(2);
    }
    return b;
}

/* A file in the work directory (kept in its own static buffer slot). */
#define W(name) F("%s/%s", g_dir, name)

typedef struct result {
    int code;   /* exit status; 128 + signal when killed */
    char *out;  /* stdout */
    char *err;  /* stderr */
} result;

/* Start exe with args (stdout and stderr into the work directory's run.stdout/run.stderr);
   the pid, or -1. */
static pid_t spawn_v(const char *exe, const char *const *args) {
    const char *argv[64];
    int n = 0;
    argv[n++] = exe;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    char out_path[1024], err_path[1024];
    snprintf(out_path, sizeof out_path, "%s/run.stdout", g_dir);
    snprintf(err_path, sizeof err_path, "%s/run.stderr", g_dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "cannot run %s: %s\n", exe, strerror(rc));
        rt_failures++;
        return -1;
    }
    return pid;
}

/* Wait for a spawn_v process: its exit status (128 + signal when killed) and output. */
static result wait_v(pid_t pid) {
    result r = {-1, NULL, NULL};
    if (pid < 0) return r;
    char out_path[1024], err_path[1024];
    snprintf(out_path, sizeof out_path, "%s/run.stdout", g_dir);
    snprintf(err_path, sizeof err_path, "%s/run.stderr", g_dir);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = rt_read_file(out_path, NULL);
    r.err = rt_read_file(err_path, NULL);
    return r;
}

static result run_v(const char *exe, const char *const *args) { return wait_v(spawn_v(exe, args)); }

#define RUN(exe, ...) run_v(exe, (const char *const[]){__VA_ARGS__, NULL})
#define SPAWN(exe, ...) spawn_v(exe, (const char *const[]){__VA_ARGS__, NULL})

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) continue;
}

/* Check the exit status and substrings of stdout/stderr (NULL: not checked).
 * Failures (status 1 or 2) must print exactly one "<prog>: error: " line. */
static void expect_at(int line, result r, int code, const char *out_sub, const char *err_sub) {
    int ok = r.code == code && r.out && r.err;
    if (ok && out_sub) ok = strstr(r.out, out_sub) != NULL;
    if (ok && err_sub) ok = strstr(r.err, err_sub) != NULL;
    if (ok && (code == 1 || code == 2)) {
        const char *nl = strchr(r.err, '\n');
        ok = (strstr(r.err, "_train: error: ") || strstr(r.err, "_infer: error: ")) && nl && nl[1] == '\0';
    }
    if (!ok) {
        fprintf(stderr, "test_train.c:%d: expected exit %d, stdout with \"%s\", stderr with \"%s\"\n"
                        "  got exit %d\n  stdout: %s\n  stderr: %s\n",
                line, code, out_sub ? out_sub : "", err_sub ? err_sub : "", r.code, r.out ? r.out : "(none)",
                r.err ? r.err : "(none)");
        rt_failures++;
    } else if (getenv("RT_VERBOSE") && r.err && r.err[0]) {
        printf("  ok (%d): %s", r.code, r.err);
    }
    free(r.out);
    free(r.err);
}
#define EXPECT(r, code, out_sub, err_sub) expect_at(__LINE__, (r), (code), (out_sub), (err_sub))

/* Remove the ,"elapsed":<seconds> fields of a JSONL log's records in place (the wall-clock
   time is the one thing two runs of the same training do not share); the new length. */
static size_t strip_elapsed(char *t, size_t len) {
    static const char key[] = ",\"elapsed\":";
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        if (len - i >= sizeof key - 1 && memcmp(t + i, key, sizeof key - 1) == 0) {
            i += sizeof key - 1;
            while (i < len && t[i] != ',' && t[i] != '}') i++;
        } else {
            t[o++] = t[i++];
        }
    }
    return o;
}

/* 1 if the two files exist and are byte-identical (JSONL logs: but for their elapsed times). */
static int same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = rt_read_file(a, &la), *y = rt_read_file(b, &lb);
    const size_t n = strlen(a);
    if (x && y && n > 6 && strcmp(a + n - 6, ".jsonl") == 0) {
        la = strip_elapsed(x, la);
        lb = strip_elapsed(y, lb);
    }
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static int count_lines(const char *path) {
    char *t = rt_read_file(path, NULL);
    int n = 0;
    for (const char *c = t; c && *c; c++) n += *c == '\n';
    free(t);
    return t ? n : -1;
}

/* Metadata value of a checkpoint (copied into a static buffer; "" if absent). */
static const char *meta_of(const char *path, const char *key) {
    static char buf[128];
    buf[0] = '\0';
    cannl_checkpoint *ck = NULL;
    if (cannl_checkpoint_open(path, NULL, &ck, NULL) == CANNL_OK) {
        const char *v = cannl_checkpoint_meta(ck, key);
        snprintf(buf, sizeof buf, "%s", v ? v : "");
    }
    cannl_checkpoint_close(ck);
    return buf;
}

/* Tensor `name` with shape [n] or scalar (n == 0) as doubles; 0 on success. */
static int read_tensor(const char *path, const char *name, int32_t ndims, const int64_t *shape, double *out) {
    cannl_checkpoint *ck = NULL;
    if (cannl_checkpoint_open(path, NULL, &ck, NULL) != CANNL_OK) return -1;
    cannl_tensor t = {name, CANNL_F64, ndims, {0}, out};
    for (int32_t d = 0; d < ndims; d++) t.shape[d] = shape[d];
    cannl_status st = cannl_checkpoint_read(ck, &t, NULL);
    cannl_checkpoint_close(ck);
    return st == CANNL_OK ? 0 : -1;
}

/* ------------------------------------------------------------ data files */

enum { NTRAIN = 37, NTEST = 20 }; /* batch 8: 5 steps per epoch, the last one of 5 examples */

static void write_npy_f32(const char *path, const float *v, const char *shape, size_t count) {
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shape);
    size_t hl = 10 + (size_t)n + 1;
    size_t pad = (64 - hl % 64) % 64;
    size_t header = (size_t)n + pad + 1;
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc((int)(header & 0xff), f);
    fputc((int)(header >> 8), f);
    fwrite(dict, 1, (size_t)n, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(v, sizeof *v, count, f); /* little-endian hosts only (like the npy reader's tests) */
    CHECK(fclose(f) == 0);
}

static void write_idx_u8(const char *path, const unsigned char *v, int ndims, const uint32_t *dims, size_t count) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    const unsigned char magic[4] = {0, 0, 0x08, (unsigned char)ndims};
    fwrite(magic, 1, 4, f);
    for (int d = 0; d < ndims; d++) {
        const unsigned char be[4] = {(unsigned char)(dims[d] >> 24), (unsigned char)(dims[d] >> 16),
                                     (unsigned char)(dims[d] >> 8), (unsigned char)dims[d]};
        fwrite(be, 1, 4, f);
    }
    fwrite(v, 1, count, f);
    CHECK(fclose(f) == 0);
}

/* rows x cols integers as CSV, with an optional header line. */
static void write_csv(const char *path, const int *v, int rows, int cols, const char *header) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    if (header) fprintf(f, "%s\n", header);
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) fprintf(f, "%d%c", v[r * cols + c], c + 1 < cols ? ',' : '\n');
    CHECK(fclose(f) == 0);
}

/* n examples of 4 small integers and a label that depends on them. */
static void make_examples(uint64_t seed, int n, int *x, int *label) {
    cannl_rng rng;
    cannl_rng_seed(&rng, seed);
    for (int e = 0; e < n; e++) {
        int *v = x + 4 * e;
        for (int f = 0; f < 4; f++) v[f] = (int)cannl_rng_below(&rng, 4);
        const int score[3] = {v[0] - v[1] + v[2], v[1] + v[3] - v[0], 2 * v[2] - v[3]};
        label[e] = 0;
        for (int c = 1; c < 3; c++)
            if (score[c] > score[label[e]]) label[e] = c;
    }
}

/* The same training set in several formats, a test set and some bad files:
 *   x.npy (f32, [37, 2, 2])   x.idx (u8, [37, 2, 2])   xf.csv (4 columns)
 *   y.csv (class indices, header)   yh.npy (one-hot f32, [37, 3])   y.idx (u8 indices, [37])
 *   tx.csv, ty.npy (1-D f32 indices): 20 test examples
 *   y2.csv (2 columns)   ybad.csv (a label 3)   yshort.csv (36 rows) */
static void make_data(void) {
    int x[4 * NTRAIN], y[NTRAIN], tx[4 * NTEST], ty[NTEST];
    make_examples(11, NTRAIN, x, y);
    make_examples(12, NTEST, tx, ty);
    float xf[4 * NTRAIN], yh[3 * NTRAIN] = {0}, tyf[NTEST];
    unsigned char xu[4 * NTRAIN], yu[NTRAIN];
    for (int i = 0; i < 4 * NTRAIN; i++) {
        xf[i] = (float)x[i];
        xu[i] = (unsigned char)x[i];
    }
    for (int e = 0; e < NTRAIN; e++) {
        yh[3 * e + y[e]] = 1.0f;
        yu[e] = (unsigned char)y[e];
    }
    for (int e = 0; e < NTEST; e++) tyf[e] = (float)ty[e];
    write_npy_f32(W("x.npy"), xf, "(37, 2, 2)", 4 * NTRAIN);
    const uint32_t xdims[3] = {NTRAIN, 2, 2}, ydims[1] = {NTRAIN};
    write_idx_u8(W("x.idx"), xu, 3, xdims, 4 * NTRAIN);
    write_csv(W("xf.csv"), x, NTRAIN, 4, NULL);
    write_csv(W("y.csv"), y, NTRAIN, 1, "label");
    write_npy_f32(W("yh.npy"), yh, "(37, 3)", 3 * NTRAIN);
    write_idx_u8(W("y.idx"), yu, 1, ydims, NTRAIN);
    write_csv(W("tx.csv"), tx, NTEST, 4, "a,b,c,d");
    write_npy_f32(W("ty.npy"), tyf, "(20,)", NTEST);
    write_csv(W("y2.csv"), x, NTRAIN, 2, NULL);
    int ybad[NTRAIN];
    memcpy(ybad, y, sizeof ybad);
    ybad[30] = 3;
    write_csv(W("ybad.csv"), ybad, NTRAIN, 1, NULL);
    write_csv(W("yshort.csv"), y, NTRAIN - 1, 1, NULL);
}

/* The usual flags of a fake_train run on x.npy + y.csv. */
#define X_ARG F("x=%s/x.npy", g_dir)
#define Y_ARG F("y=%s/y.csv", g_dir)
#define TRAIN(...) RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--batch", "8", "--seed", "7", __VA_ARGS__)
#define TEST_ARGS "--test", F("x=%s/tx.csv", g_dir), "--test", F("y=%s/ty.npy", g_dir)

/* ------------------------------------------------------------ cases */

/* Command-line errors: exit 2, one line naming the flag. */
static void case_cli(void) {
    EXPECT(RUN(g_fake, "--help"), 0, "--data NAME=PATH", NULL);
    EXPECT(RUN(g_fake, "-h"), 0, "y            [3]  (3 values per example)", NULL);
    EXPECT(RUN(g_fake, "--bogus"), 2, NULL, "fake_train: error: unknown flag '--bogus'");
    EXPECT(RUN(g_fake, "--bogus=3"), 2, NULL, "unknown flag '--bogus'");
    EXPECT(RUN(g_fake, "stray"), 2, NULL, "unexpected argument 'stray'");
    EXPECT(RUN(g_fake, "--epochs"), 2, NULL, "--epochs needs a value");
    EXPECT(RUN(g_fake, "--epochs", "abc"), 2, NULL, "--epochs: 'abc' is not an integer");
    EXPECT(RUN(g_fake, "--epochs=-1"), 2, NULL, "--epochs: -1 must be at least 0");
    EXPECT(RUN(g_fake, "--batch=0"), 2, NULL, "--batch: 0 must be at least 1");
    EXPECT(RUN(g_fake, "--batch", "300"), 2, NULL,
           "--batch 300 is larger than the model's maximum batch 16 (regenerate with cannl gen --max-batch N)");
    EXPECT(RUN(g_fake, "--steps", "1x"), 2, NULL, "--steps: '1x' is not an integer");
    EXPECT(RUN(g_fake, "--seed", "-3"), 2, NULL, "--seed: '-3' is not a non-negative integer");
    EXPECT(RUN(g_fake, "--seed", "99999999999999999999999"), 2, NULL, "--seed: '99999999999999999999999' is too large");
    EXPECT(RUN(g_fake, "--lr", "fast"), 2, NULL, "--lr: 'fast' is not a number");
    EXPECT(RUN(g_fake, "--lr=nan"), 2, NULL, "--lr: 'nan' is not a number");
    EXPECT(RUN(g_fake, "--threads", "0"), 2, NULL, "--threads: 0 must be at least 1");
    EXPECT(RUN(g_fake, "--log-every", "-1"), 2, NULL, "--log-every: -1 must be at least 0");
    /* Every count flag has an upper bound (issue 36; docs/generated-code.md, "Flag bounds"). */
    EXPECT(RUN(g_fake, "--epochs", "1000000001"), 2, NULL, "--epochs: 1000000001 is too large (at most 1000000000)");
    EXPECT(RUN(g_fake, "--steps", "999999999999999"), 2, NULL, "--steps: 999999999999999 is too large (at most 1000000000)");
    EXPECT(RUN(g_fake, "--log-every", "9223372036854775807"), 2, NULL, "--log-every: 9223372036854775807 is too large");
    EXPECT(RUN(g_fake, "--eval-every", "1000000001"), 2, NULL, "--eval-every: 1000000001 is too large");
    EXPECT(RUN(g_fake, "--eval-batches", "1000001"), 2, NULL, "--eval-batches: 1000001 is too large (at most 1000000)");
    EXPECT(RUN(g_fake, "--eval-batches", "9999999999"), 2, NULL, "--eval-batches: 9999999999 is too large (at most 1000000)");
    EXPECT(RUN(g_fake, "--log-every", "18446744073709551616"), 2, NULL,
           "--log-every: 18446744073709551616 is too large (at most 1000000000)");
    EXPECT(RUN(g_fake, "--batch", "1000000001"), 2, NULL, "--batch: 1000000001 is too large");
    EXPECT(RUN(g_fake, "--threads", "4097"), 2, NULL, "--threads: 4097 is too large (at most 4096)");
    EXPECT(RUN(g_fake, "--epochs", "1000000000"), 2, NULL, "no data for input"); /* the bound itself is fine */
    EXPECT(RUN(g_fake, "--quiet=1"), 2, NULL, "--quiet takes no value");
    EXPECT(RUN(g_fake, "--checkpoint="), 2, NULL, "--checkpoint: empty path");
    EXPECT(RUN(g_fake, "--data", "x.npy"), 2, NULL, "--data expects NAME=PATH, got 'x.npy'");
    EXPECT(RUN(g_fake, "--data", "=x.npy"), 2, NULL, "--data expects NAME=PATH");
    EXPECT(RUN(g_fake, "--init", "a", "--resume", "b"), 2, NULL, "--init and --resume cannot be used together");
    /* A flag where a value belongs is a missing value (not a checkpoint named '--quiet');
     * only --data and --test repeat (once per input): any other flag twice is a usage error. */
    EXPECT(TRAIN("--steps", "1", "--checkpoint", "--quiet"), 2, NULL,
           "--checkpoint needs a value: --checkpoint PATH, found the flag '--quiet'");
    EXPECT(TRAIN("--metrics", "--log-every=1", "--steps", "1"), 2, NULL,
           "--metrics needs a value: --metrics PATH, found the flag '--log-every=1'");
    CHECK(!rt_exists("--quiet") && !rt_exists("--log-every=1"));
    EXPECT(TRAIN("--steps", "1", "--checkpoint", W("a.safetensors"), "--checkpoint", W("b.safetensors")), 2, NULL,
           F("--checkpoint given twice (%s and %s)", W("a.safetensors"), W("b.safetensors")));
    CHECK(!rt_exists(W("a.safetensors")) && !rt_exists(W("b.safetensors")));
    EXPECT(TRAIN("--epochs", "1", "--epochs=2"), 2, NULL, "--epochs given twice (1 and 2)");
    EXPECT(TRAIN("--steps", "1", "--lr", "0.1", "--lr", "0.2"), 2, NULL, "--lr given twice (0.1 and 0.2)");
    EXPECT(TRAIN("--steps", "1", "--quiet", "--quiet"), 2, NULL, "--quiet given twice");
    EXPECT(RUN(g_fake, "-h", "--help"), 0, "--data NAME=PATH", NULL);
    /* An output (--checkpoint, --metrics) over a file the run reads, or both on one file:
     * refused before anything is read or written. --checkpoint may be the --resume file. */
    EXPECT(TRAIN("--steps", "1", "--checkpoint", W("x.npy")), 2, NULL,
           F("--checkpoint %s would overwrite the file of --data x", W("x.npy")));
    EXPECT(TRAIN("--steps", "1", "--metrics", W("y.csv")), 2, NULL,
           F("--metrics %s would overwrite the file of --data y", W("y.csv")));
    EXPECT(TRAIN("--steps", "1", TEST_ARGS, "--metrics", W("tx.csv")), 2, NULL,
           F("--metrics %s would overwrite the file of --test x", W("tx.csv")));
    EXPECT(TRAIN("--steps", "1", "--init", W("ty.npy"), "--metrics", F("%s/./ty.npy", g_dir)), 2, NULL,
           "would overwrite the --init file");
    EXPECT(TRAIN("--steps", "1", "--checkpoint", W("same.out"), "--metrics", F("%s/./same.out", g_dir)), 2, NULL,
           "--checkpoint and --metrics name the same file");
    CHECK(!rt_exists(W("same.out")));
    /* Binding names. */
    EXPECT(RUN(g_fake, "--data", "z=foo.npy"), 2, NULL, "--data z=...: model 'fake_softmax' has no input 'z' (its inputs: x, y)");
    EXPECT(RUN(g_fake, "--data", X_ARG), 2, NULL, "no data for input 'y': pass --data y=PATH");
    EXPECT(run_v(g_fake, (const char *const[]){NULL}), 2, NULL, "no data for input 'x': pass --data x=PATH");
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--data=x=other.npy"), 2, NULL, "--data x given twice");
    EXPECT(TRAIN("--test", F("x=%s/tx.csv", g_dir)), 2, NULL, "no test data for input 'y': pass --test y=PATH");
    EXPECT(TRAIN("--test", "q=1"), 2, NULL, "--test q=...: model 'fake_softmax' has no input 'q'");
    /* Files that cannot be used: exit 1. */
    EXPECT(RUN(g_fake, "--data", "x=nope.npy", "--data", Y_ARG), 1, NULL, "nope.npy: ");
    EXPECT(TRAIN("--resume", W("missing.safetensors")), 1, NULL, "missing.safetensors: cannot open");
    EXPECT(TRAIN("--init", W("missing.safetensors")), 1, NULL, "missing.safetensors: cannot open");
    EXPECT(TRAIN("--checkpoint", W("no/such/dir/ck.safetensors")), 1, NULL, "no/such/dir/ck.safetensors: cannot write");
    EXPECT(TRAIN("--metrics", W("no/such/dir/m.jsonl")), 1, NULL, "no/such/dir/m.jsonl: cannot open metrics log");
    /* Nothing is written by a failed run. */
    EXPECT(RUN(g_fake, "--data", "x=nope.npy", "--data", Y_ARG, "--metrics", W("m.jsonl"), "--checkpoint",
               W("c.safetensors")),
           1, NULL, "nope.npy");
    CHECK(!rt_exists(W("m.jsonl")) && !rt_exists(W("c.safetensors")));
}

/* One file per input in any format; class indices are one-hot encoded. */
static void case_binding(void) {
    /* The same numbers through .npy + CSV indices, IDX + one-hot .npy, CSV + IDX indices:
       byte-identical losses. */
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--metrics", W("a.jsonl"), "--threads", "3"), 0,
           "fake: set_threads(3)", NULL);
    EXPECT(RUN(g_fake, "--data", F("x=%s/x.idx", g_dir), "--data", F("y=%s/yh.npy", g_dir), "--batch", "8", "--seed",
               "7", "--epochs", "2", "--log-every", "1", "--metrics", W("b.jsonl")),
           0, NULL, NULL);
    EXPECT(RUN(g_fake, "--data", F("y=%s/y.idx", g_dir), "--data", F("x=%s/xf.csv", g_dir), "--batch=8", "--seed=7",
               "--epochs=2", "--log-every=1", "--metrics", W("c.jsonl")),
           0, NULL, NULL);
    CHECK(count_lines(W("a.jsonl")) == 12); /* 10 steps, 2 epochs */
    CHECK(same_file(W("a.jsonl"), W("b.jsonl")));
    CHECK(same_file(W("a.jsonl"), W("c.jsonl")));
    /* One CSV file for both inputs, its columns bound: x = columns 0-3, y = column 4 (class
       indices), a header detected; then label first, the header declared (:header composes
       with the columns, either order). The same run, byte for byte. */
    {
        char *xs_text = rt_read_file(F("%s/xf.csv", g_dir), NULL), *ys_text = rt_read_file(F("%s/y.csv", g_dir), NULL);
        CHECK(xs_text && ys_text);
        FILE *all = fopen(W("all.csv"), "w"), *all2 = fopen(W("all2.csv"), "w");
        CHECK(all && all2);
        if (xs_text && ys_text && all && all2) {
            fputs("a,b,c,d,label\n", all);
            fputs("0,0,0,0,0\n", all2); /* declared a header: skipped although it is numbers */
            char *xl = xs_text, *yl = strchr(ys_text, '\n') + 1; /* y.csv: after its header */
            while (*xl && *yl) {
                char *xe = strchr(xl, '\n'), *ye = strchr(yl, '\n');
                fprintf(all, "%.*s,%.*s\n", (int)(xe - xl), xl, (int)(ye - yl), yl);
                fprintf(all2, "%.*s, %.*s\n", (int)(ye - yl), yl, (int)(xe - xl), xl);
                xl = xe + 1;
                yl = ye + 1;
            }
        }
        if (all) fclose(all);
        if (all2) fclose(all2);
        free(xs_text);
        free(ys_text);
        EXPECT(RUN(g_fake, "--data", F("x=%s:0-3", W("all.csv")), "--data", F("y=%s:4", W("all.csv")), "--batch", "8",
                   "--seed", "7", "--epochs", "2", "--log-every", "1", "--threads", "3", "--metrics", W("d.jsonl")),
               0, NULL, NULL);
        CHECK(same_file(W("a.jsonl"), W("d.jsonl")));
        EXPECT(RUN(g_fake, "--data", F("x=%s:1-2,3,4:header", W("all2.csv")), "--data", F("y=%s:header:0", W("all2.csv")),
                   "--batch", "8", "--seed", "7", "--epochs", "2", "--log-every", "1", "--metrics", W("e.jsonl")),
               0, NULL, NULL);
        CHECK(same_file(W("a.jsonl"), W("e.jsonl")));
        EXPECT(RUN(g_fake, "--data", F("x=%s:0-3", W("all.csv")), "--data", F("y=%s:5", W("all.csv"))), 1, NULL,
               "all.csv: line 1: column 5 was asked for, but the line has 5 fields (columns 0-4)");
        EXPECT(RUN(g_fake, "--data", F("x=%s:3-0", W("all.csv")), "--data", F("y=%s:4", W("all.csv"))), 1, NULL,
               "all.csv:3-0: bad column selection '3-0': the range 3-0 is reversed (ranges count up: 0-3)");
        EXPECT(RUN(g_fake, "--data", F("x=%s:0,5-2", W("all.csv")), "--data", F("y=%s:4", W("all.csv"))), 1, NULL,
               "bad column selection '0,5-2': the range 5-2 is reversed");
        EXPECT(RUN(g_fake, "--data", F("x=%s:0-", W("all.csv")), "--data", F("y=%s:4", W("all.csv"))), 1, NULL,
               "all.csv:0-: bad column selection '0-' (0-based columns");
        EXPECT(RUN(g_fake, "--data", F("x=%s/x.npy:0-3", g_dir), "--data", Y_ARG), 1, NULL,
               "x.npy: ':0-3' selects columns of a CSV file, but this is a .npy file");
        EXPECT(RUN(g_fake, "--data", F("x=%s:0-2", W("all.csv")), "--data", F("y=%s:4", W("all.csv"))), 1, NULL,
               "all.csv:0-2: 3 values per example, but input 'x' takes 4");
    }
    /* A test set: 1-D class indices (ty.npy) and a CSV with a header. */
    EXPECT(TRAIN("--epochs", "3", TEST_ARGS), 0, "test accuracy: ", NULL);
    /* Files that do not fit. */
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", F("y=%s/y2.csv", g_dir)), 1, NULL,
           "y2.csv: 2 values per example, but input 'y' takes 3");
    EXPECT(RUN(g_fake, "--data", F("x=%s/yh.npy", g_dir), "--data", Y_ARG), 1, NULL,
           "yh.npy: 3 values per example, but input 'x' takes 4");
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", F("y=%s/ybad.csv", g_dir)), 1, NULL,
           "ybad.csv: example 30: label 3 is out of range [0, 3)");
    /* One float per example for the [2, 2] input x: not class indices, so not one-hot encoded. */
    float xs[NTRAIN];
    for (int e = 0; e < NTRAIN; e++) xs[e] = 0.25f + (float)e;
    write_npy_f32(W("xs.npy"), xs, "(37,)", NTRAIN);
    EXPECT(RUN(g_fake, "--data", F("x=%s/xs.npy", g_dir), "--data", Y_ARG), 1, NULL,
           "xs.npy: 1 value per example, but input 'x' needs 4 (example 0 is 0.25, not a class index; a file of "
           "class indices is one-hot encoded only for a [C] target input)");
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", F("y=%s/yshort.csv", g_dir)), 1, NULL,
           "yshort.csv has 36 examples but ");
    EXPECT(TRAIN("--test", F("x=%s/tx.csv", g_dir), "--test", Y_ARG), 1, NULL, "y.csv has 37 examples but ");
}

/* The JSONL metrics log, the progress and epoch lines, the final summary. */
static void case_metrics(void) {
    EXPECT(TRAIN("--epochs", "2", "--log-every", "2", "--metrics", W("m.jsonl"), TEST_ARGS), 0,
           "epoch 1/2  step 2/5  loss ", NULL);
    /* 10 steps: losses at steps 2, 4, 6, 8, 10 and an epoch record after each epoch: its step,
       mean training loss, lr, the test loss and metrics, the elapsed seconds. */
    char *t = rt_read_file(W("m.jsonl"), NULL);
    CHECK(t != NULL);
    if (t) {
        const char *want[] = {"{\"epoch\":1,\"step\":2,\"loss\":", "{\"epoch\":1,\"step\":4,\"loss\":",
                              "{\"epoch\":1,\"step\":5,\"train_loss\":",    "{\"epoch\":2,\"step\":6,\"loss\":",
                              "{\"epoch\":2,\"step\":8,\"loss\":", "{\"epoch\":2,\"step\":10,\"loss\":",
                              "{\"epoch\":2,\"step\":10,\"train_loss\":"};
        const char *line = t;
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            CHECK(strncmp(line, want[i], strlen(want[i])) == 0);
            const char *nl = strchr(line, '\n');
            const char *keys[] = {",\"lr\":0.05,\"test_loss\":", ",\"accuracy\":", ",\"elapsed\":"};
            for (size_t k = 0; k < 3 && strstr(want[i], "train_loss"); k++)
                CHECK(strstr(line, keys[k]) && strstr(line, keys[k]) < nl);
            if (!nl) break;
            line = nl + 1;
        }
        CHECK(*line == '\0');
        printf("%s", t);
        free(t);
    }
    CHECK(count_lines(W("m.jsonl")) == 7);
    /* stdout: per-epoch lines and the summary (4 decimals). */
    result r = TRAIN("--epochs", "2", "--log-every", "0", "--metrics", W("m0.jsonl"), TEST_ARGS);
    CHECK(r.out && strstr(r.out, "epoch 1/2  train_loss ") && strstr(r.out, "  test_loss ") &&
          strstr(r.out, "  accuracy 0.") && strstr(r.out, " ex/s)\n"));
    CHECK(r.out && !strstr(r.out, "step 2/5"));
    CHECK(r.out && strstr(r.out, "\ntest loss: ") && strstr(r.out, "\ntest accuracy: 0.") &&
          strstr(r.out, "\ntrained to step 10 in "));
    if (r.out) printf("%s", r.out);
    EXPECT(r, 0, NULL, NULL);
    CHECK(count_lines(W("m0.jsonl")) == 2);
    /* --quiet: only the summary. */
    r = TRAIN("--epochs", "2", "--quiet", TEST_ARGS);
    CHECK(r.out && !strstr(r.out, "epoch ") && strstr(r.out, "test accuracy: "));
    EXPECT(r, 0, NULL, NULL);
    /* A run is reproducible; shuffling changes the trajectory, --no-shuffle and --seed too. */
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--metrics", W("s1.jsonl")), 0, NULL, NULL);
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--metrics", W("s2.jsonl")), 0, NULL, NULL);
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--metrics", W("s3.jsonl"), "--no-shuffle"), 0, NULL, NULL);
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--batch", "8", "--seed", "8", "--epochs", "2", "--log-every", "1",
               "--metrics", W("s4.jsonl")),
           0, NULL, NULL);
    CHECK(same_file(W("s1.jsonl"), W("s2.jsonl")));
    CHECK(!same_file(W("s1.jsonl"), W("s3.jsonl")));
    CHECK(!same_file(W("s1.jsonl"), W("s4.jsonl")));
    /* --lr changes it as well. */
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--metrics", W("s5.jsonl"), "--lr", "0.2"), 0, NULL, NULL);
    CHECK(!same_file(W("s1.jsonl"), W("s5.jsonl")));
}

/* Epoch 1, then a resumed epoch 2 == 2 epochs at once, bit for bit. */
static void case_resume(void) {
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--lr", "0.1", "--checkpoint", W("full.safetensors"),
                 "--metrics", W("full.jsonl"), TEST_ARGS),
           0, NULL, NULL);
    EXPECT(TRAIN("--epochs", "1", "--log-every", "1", "--lr", "0.1", "--checkpoint", W("half.safetensors"),
                 "--metrics", W("half.jsonl"), TEST_ARGS),
           0, NULL, NULL);
    CHECK(strcmp(meta_of(W("half.safetensors"), "model"), "fake_softmax") == 0);
    CHECK(strcmp(meta_of(W("half.safetensors"), "step"), "5") == 0);
    CHECK(strcmp(meta_of(W("half.safetensors"), "epoch"), "1") == 0);
    CHECK(strcmp(meta_of(W("half.safetensors"), "seed"), "7") == 0);
    CHECK(strcmp(meta_of(W("half.safetensors"), "batch"), "8") == 0);
    CHECK(strcmp(meta_of(W("half.safetensors"), "shuffle"), "1") == 0);
    CHECK(strcmp(meta_of(W("half.safetensors"), "examples"), "37") == 0);
    CHECK(strcmp(meta_of(W("half.safetensors"), "lr"), "0.10000000000000001") == 0);
    /* A different batch is refused; seed, batch, shuffle and lr come from the checkpoint. */
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("half.safetensors"), "--batch", "4"), 2, NULL,
           "--batch 4 differs from the batch 8 of checkpoint ");
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", F("y=%s/yh.npy", g_dir), "--resume", W("half.safetensors"),
               "--epochs", "2", "--log-every", "1", "--checkpoint", W("half.safetensors"), "--metrics",
               W("half.jsonl"), TEST_ARGS),
           0, "epoch 2/2  train_loss", NULL);
    CHECK(count_lines(W("full.jsonl")) == 12);
    CHECK(same_file(W("full.jsonl"), W("half.jsonl")));
    CHECK(same_file(W("full.safetensors"), W("half.safetensors")));
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);
    /* Training data with another example count is refused. */
    EXPECT(RUN(g_fake, "--data", F("x=%s/tx.csv", g_dir), "--data", F("y=%s/ty.npy", g_dir), "--resume",
               W("half.safetensors"), "--epochs", "3"),
           1, NULL, "half.safetensors: checkpoint was trained on 37 examples, but the training data has 20");
}

/* --lr-schedule cosine: the lr decays over the run's steps, changes the run, is kept in the
   checkpoint, and a run stopped by --steps resumes to the same end bit for bit. */
static void case_cosine(void) {
    EXPECT(TRAIN("--lr-schedule", "linear"), 2, NULL, "--lr-schedule: 'linear' is not constant or cosine");
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--metrics", W("const.jsonl")), 0, NULL, NULL);
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--lr-schedule", "cosine", "--checkpoint", W("cos.safetensors"),
                 "--metrics", W("cos.jsonl")),
           0, NULL, NULL);
    CHECK(!same_file(W("const.jsonl"), W("cos.jsonl")));
    CHECK(strcmp(meta_of(W("cos.safetensors"), "lr_schedule"), "cosine") == 0);
    EXPECT(TRAIN("--epochs", "2", "--steps", "3", "--log-every", "1", "--lr-schedule=cosine", "--checkpoint",
                 W("cos_half.safetensors"), "--metrics", W("cos_half.jsonl")),
           0, NULL, NULL);
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("cos_half.safetensors"), "--epochs", "2",
               "--log-every", "1", "--checkpoint", W("cos_half.safetensors"), "--metrics", W("cos_half.jsonl")),
           0, NULL, NULL);
    CHECK(same_file(W("cos.jsonl"), W("cos_half.jsonl")));
    CHECK(same_file(W("cos.safetensors"), W("cos_half.safetensors")));
}

/* --steps stops mid-epoch; resuming (twice, across an epoch end) equals one run. */
static void case_steps(void) {
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--checkpoint", W("a.safetensors"), "--metrics", W("a.jsonl")), 0,
           NULL, NULL);
    result r = TRAIN("--steps", "3", "--log-every", "1", "--checkpoint", W("b.safetensors"), "--metrics", W("b.jsonl"));
    CHECK(r.out && !strstr(r.out, "train_loss") && strstr(r.out, "trained to step 3 "));
    EXPECT(r, 0, NULL, NULL);
    CHECK(strcmp(meta_of(W("b.safetensors"), "step"), "3") == 0);
    CHECK(strcmp(meta_of(W("b.safetensors"), "epoch"), "0") == 0);
    const char *resume[] = {"--data", X_ARG, "--data", Y_ARG, "--resume", W("b.safetensors"), "--log-every", "1",
                            "--checkpoint", W("b.safetensors"), "--metrics", W("b.jsonl"), NULL, NULL, NULL};
    resume[12] = "--steps";
    resume[13] = "7"; /* no --epochs: --steps alone sets the end, past the end of epoch 1 */
    EXPECT(run_v(g_fake, resume), 0, "epoch 1/2  train_loss", NULL);
    CHECK(strcmp(meta_of(W("b.safetensors"), "step"), "7") == 0);
    CHECK(strcmp(meta_of(W("b.safetensors"), "epoch"), "1") == 0);
    EXPECT(run_v(g_fake, resume), 0, "nothing to train: the run is at step 7 and stops at step 7", NULL);
    resume[12] = "--epochs";
    resume[13] = "2";
    EXPECT(run_v(g_fake, resume), 0, "trained to step 10 ", NULL);
    CHECK(same_file(W("a.jsonl"), W("b.jsonl")));
    CHECK(same_file(W("a.safetensors"), W("b.safetensors")));
    /* --steps and --epochs together: whichever ends first. */
    EXPECT(TRAIN("--steps", "100", "--epochs", "1"), 0, "trained to step 5 ", NULL);
    EXPECT(TRAIN("--steps", "4", "--epochs", "3"), 0, "trained to step 4 ", NULL);
    EXPECT(TRAIN("--epochs", "0", "--checkpoint", W("z.safetensors")), 0, "trained to step 0 ", NULL);
    CHECK(strcmp(meta_of(W("z.safetensors"), "step"), "0") == 0);
}

/* SIGINT: the step finishes, the checkpoint is saved, exit 130; resuming continues exactly. */
static void case_sigint(void) {
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--checkpoint", W("a.safetensors"), "--metrics", W("a.jsonl")), 0,
           NULL, NULL);
    setenv("FAKE_SIGNAL_AT_STEP", "4", 1);
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--checkpoint", W("b.safetensors"), "--metrics", W("b.jsonl")),
           130, NULL, "interrupted by SIGINT after step 4; checkpoint saved to ");
    unsetenv("FAKE_SIGNAL_AT_STEP");
    CHECK(strcmp(meta_of(W("b.safetensors"), "step"), "4") == 0);
    CHECK(count_lines(W("b.jsonl")) == 4);
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("b.safetensors"), "--epochs", "2",
               "--log-every", "1", "--checkpoint", W("b.safetensors"), "--metrics", W("b.jsonl")),
           0, NULL, NULL);
    CHECK(same_file(W("a.jsonl"), W("b.jsonl")));
    CHECK(same_file(W("a.safetensors"), W("b.safetensors")));
}

/* A checkpoint of another model is refused for --resume and --init. */
static void case_other_model(void) {
    EXPECT(RUN(g_quad, "--steps", "2", "--checkpoint", W("q.safetensors")), 0, NULL, NULL);
    EXPECT(TRAIN("--resume", W("q.safetensors")), 1, NULL,
           "q.safetensors: checkpoint of model 'fake_quad', but this is 'fake_softmax'");
    EXPECT(TRAIN("--init", W("q.safetensors")), 1, NULL,
           "q.safetensors: checkpoint of model 'fake_quad', but this is 'fake_softmax'");
}

/* --init from a params-only safetensors file (as PyTorch would write it). */
static void case_init(void) {
    float w[12], b[3] = {1, 2, 3};
    double wd[12];
    for (int i = 0; i < 12; i++) wd[i] = w[i] = (float)i * 0.25f - 1.0f;
    const cannl_tensor params[] = {{"w", CANNL_F32, 2, {4, 3}, w}, {"b", CANNL_F32, 1, {3}, b}};
    cannl_error err;
    CHECK_OK(cannl_checkpoint_save(W("p.safetensors"), params, 2, NULL, 0, &err));
    EXPECT(TRAIN("--init", W("p.safetensors"), "--epochs", "0", "--checkpoint", W("out.safetensors")), 0, NULL, NULL);
    double got[12] = {0}, mom[12] = {1};
    const int64_t ws[2] = {4, 3}, bs[1] = {3};
    CHECK(read_tensor(W("out.safetensors"), "w", 2, ws, got) == 0);
    for (int i = 0; i < 12; i++) CHECK(got[i] == (double)w[i]);
    CHECK(read_tensor(W("out.safetensors"), "b", 1, bs, got) == 0 && got[0] == 1 && got[2] == 3);
    CHECK(read_tensor(W("out.safetensors"), "w.momentum_buffer", 2, ws, mom) == 0 && mom[0] == 0 && mom[11] == 0);
    CHECK(strcmp(meta_of(W("out.safetensors"), "step"), "0") == 0);
    /* The init is used: a run from it differs from one from the seed. */
    EXPECT(TRAIN("--init", W("p.safetensors"), "--log-every", "1", "--metrics", W("i.jsonl")), 0, NULL, NULL);
    EXPECT(TRAIN("--log-every", "1", "--metrics", W("s.jsonl")), 0, NULL, NULL);
    CHECK(!same_file(W("i.jsonl"), W("s.jsonl")));
    /* F64 params (and extra tensors, and another model's metadata absent) are fine. */
    const cannl_tensor p64[] = {{"b", CANNL_F64, 1, {3}, (double[]){1, 2, 3}},
                                {"w", CANNL_F64, 2, {4, 3}, wd},
                                {"extra.buffer", CANNL_F32, 1, {3}, b}};
    CHECK_OK(cannl_checkpoint_save(W("p64.safetensors"), p64, 3, NULL, 0, &err));
    EXPECT(TRAIN("--init", W("p64.safetensors"), "--log-every", "1", "--metrics", W("i64.jsonl")), 0, NULL, NULL);
    CHECK(same_file(W("i.jsonl"), W("i64.jsonl")));
    /* Files that do not fit. */
    CHECK_OK(cannl_checkpoint_save(W("nob.safetensors"), params, 1, NULL, 0, &err));
    EXPECT(TRAIN("--init", W("nob.safetensors")), 1, NULL, "nob.safetensors: missing tensor 'b'");
    const cannl_tensor wt[] = {{"w", CANNL_F32, 2, {3, 4}, w}, {"b", CANNL_F32, 1, {3}, b}};
    CHECK_OK(cannl_checkpoint_save(W("wt.safetensors"), wt, 2, NULL, 0, &err));
    EXPECT(TRAIN("--init", W("wt.safetensors")), 1, NULL, "wt.safetensors: tensor 'w' has shape [3, 4], expected [4, 3]");
    const cannl_meta other[] = {{"model", "mnist_cnn"}};
    CHECK_OK(cannl_checkpoint_save(W("o.safetensors"), params, 2, other, 1, &err));
    EXPECT(TRAIN("--init", W("o.safetensors")), 1, NULL, "checkpoint of model 'mnist_cnn', but this is 'fake_softmax'");
    /* A params-only file cannot be resumed from. */
    EXPECT(TRAIN("--resume", W("p.safetensors")), 1, NULL, "p.safetensors: not a checkpoint of model 'fake_softmax'");
    /* --init from a full checkpoint takes only its params (step 0). */
    EXPECT(TRAIN("--steps", "3", "--checkpoint", W("c.safetensors")), 0, NULL, NULL);
    EXPECT(TRAIN("--init", W("c.safetensors"), "--steps", "1", "--checkpoint", W("c2.safetensors")), 0, NULL, NULL);
    CHECK(strcmp(meta_of(W("c2.safetensors"), "step"), "1") == 0);
}

/* A corrupt checkpoint is refused and left as it is; nothing partial is written. */
static void case_corrupt(void) {
    EXPECT(TRAIN("--steps", "3", "--checkpoint", W("good.safetensors")), 0, NULL, NULL);
    size_t len;
    char *good = rt_read_file(W("good.safetensors"), &len);
    CHECK(good && len > 100);
    if (!good) return;
    /* Truncated data, a broken header, a changed step. */
    CHECK(rt_write_file(W("trunc.safetensors"), good, len - 7) == 0);
    char *broken = malloc(len);
    memcpy(broken, good, len);
    broken[9] = '[';
    CHECK(rt_write_file(W("broken.safetensors"), broken, len) == 0);
    char *step = strstr(broken + 8, "\"step\":\"3\"");
    CHECK(step != NULL);
    broken[9] = good[9];
    if (step) memcpy(step, "\"step\":\"x\"", 10);
    CHECK(rt_write_file(W("badstep.safetensors"), broken, len) == 0);
    free(broken);
    const char *names[] = {"trunc.safetensors", "broken.safetensors", "badstep.safetensors"};
    const char *msgs[] = {"trunc.safetensors: tensor", "broken.safetensors: header is not valid JSON",
                          "badstep.safetensors: metadata \"step\" is 'x'"};
    for (int i = 0; i < 3; i++) {
        char *before = rt_read_file(W(names[i]), &len);
        EXPECT(TRAIN("--resume", W(names[i]), "--checkpoint", W(names[i]), "--metrics", W("m.jsonl"), "--epochs", "2"),
               1, NULL, msgs[i]);
        size_t len2;
        char *after = rt_read_file(W(names[i]), &len2);
        CHECK(before && after && len == len2 && memcmp(before, after, len) == 0);
        free(before);
        free(after);
    }
    CHECK(!rt_exists(W("m.jsonl")));
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);
    /* A run failing on its data leaves an existing checkpoint alone. */
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", F("y=%s/ybad.csv", g_dir), "--checkpoint", W("good.safetensors")),
           1, NULL, "ybad.csv");
    char *again = rt_read_file(W("good.safetensors"), &len);
    CHECK(again && memcmp(again, good, len) == 0);
    free(again);
    free(good);
}

/* A model without inputs trains for --steps steps. */
static void case_no_inputs(void) {
    EXPECT(RUN(g_quad, "--epochs", "3"), 2, NULL, "fake_quad_train: error: model 'fake_quad' has no inputs: pass --steps N");
    EXPECT(RUN(g_quad, "--steps", "3", "--data", "x=a.npy"), 2, NULL, "--data x=...: model 'fake_quad' has no inputs");
    EXPECT(RUN(g_quad, "--steps", "3", "--test", "x=a.npy"), 2, NULL, "--test x=...: model 'fake_quad' has no inputs");
    EXPECT(RUN(g_quad, "--help"), 0, "It has no inputs: --steps N is required.", NULL);
    EXPECT(RUN(g_quad, "--steps", "60", "--log-every", "10", "--metrics", W("q.jsonl"), "--checkpoint",
               W("q.safetensors")),
           0, "epoch 1/1  step 60/60  loss ", NULL);
    CHECK(count_lines(W("q.jsonl")) == 6);
    char *t = rt_read_file(W("q.jsonl"), NULL);
    CHECK(t && strncmp(t, "{\"epoch\":1,\"step\":10,\"loss\":", 28) == 0);
    free(t);
    double w = 0, v[2] = {0};
    const int64_t vs[1] = {2};
    CHECK(read_tensor(W("q.safetensors"), "w", 0, NULL, &w) == 0 && fabs(w - 3) < 1e-3);
    CHECK(read_tensor(W("q.safetensors"), "v", 1, vs, v) == 0 && fabs(v[0] - 1) < 1e-3 && fabs(v[1] + 2) < 1e-3);
    CHECK(strcmp(meta_of(W("q.safetensors"), "step"), "60") == 0);
    /* 20 steps, then resumed to 60: the same file. */
    EXPECT(RUN(g_quad, "--steps", "20", "--log-every", "10", "--metrics", W("r.jsonl"), "--checkpoint",
               W("r.safetensors")),
           0, NULL, NULL);
    EXPECT(RUN(g_quad, "--resume", W("r.safetensors"), "--steps", "60", "--log-every", "10", "--metrics", W("r.jsonl"),
               "--checkpoint", W("r.safetensors")),
           0, "trained to step 60 ", NULL);
    CHECK(same_file(W("q.jsonl"), W("r.jsonl")));
    CHECK(same_file(W("q.safetensors"), W("r.safetensors")));
    if (!g_quad_infer) return;
    /* Its inference program: --input and --data have nothing to bind; --name-map (the flag
       after --weights) is not mistaken for them. */
    EXPECT(RUN(g_quad_infer, "--weights", W("q.safetensors"), "--input", "x=a.npy", "--metric"), 2, NULL,
           "model 'fake_quad' has no inputs");
    EXPECT(RUN(g_quad_infer, "--weights", W("q.safetensors"), "--data", "x=a.npy", "--metric"), 2, NULL,
           "model 'fake_quad' has no inputs");
    CHECK(rt_write_file(W("names.txt"), "w = quad.w\nv = quad.v\n", 22) == 0);
    EXPECT(RUN(g_quad_infer, "--weights", W("q.safetensors"), "--name-map", W("names.txt"), "--metric"), 1, NULL,
           "quad.w");
}

/* cannl_train_main_ext with a prefetching model (as CUDA models are): every step gets the batch
   prefetched before it, and the run is the same bit for bit as without prefetching. */
static void case_prefetch(void) {
    if (!g_prefetch) {
        fprintf(stderr, "case prefetch: no FAKE_PREFETCH_TRAIN argument\n");
        rt_failures++;
        return;
    }
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--checkpoint", W("plain.safetensors"), "--metrics",
                 W("plain.jsonl"), TEST_ARGS),
           0, NULL, NULL);
    EXPECT(RUN(g_prefetch, "--data", X_ARG, "--data", Y_ARG, "--batch", "8", "--seed", "7", "--epochs", "2",
               "--log-every", "1", "--checkpoint", W("pre.safetensors"), "--metrics", W("pre.jsonl"), TEST_ARGS),
           0, NULL, "prefetch: 8 prefetched, 10 steps, 8 matched, 0 bad"); /* 5 steps an epoch, the first not prefetched */
    CHECK(same_file(W("plain.safetensors"), W("pre.safetensors")));
    CHECK(same_file(W("plain.jsonl"), W("pre.jsonl")));
    /* A run that stops mid-epoch prefetches nothing it does not train on. */
    EXPECT(RUN(g_prefetch, "--data", X_ARG, "--data", Y_ARG, "--batch", "8", "--seed", "7", "--steps", "7"), 0, NULL,
           "prefetch: 5 prefetched, 7 steps, 5 matched, 0 bad");
}

/* ------------------------------------------------------------ robustness (issue 13) */

/* Copy checkpoint src of fake_softmax to dst with metadata `key` set to `value` (NULL: as it
   is) and, if tensor is not NULL, element `elem` of that tensor set to v. */
static void resave(const char *src, const char *dst, const char *key, const char *value, const char *tensor, int elem,
                   float v) {
    static const char *const keys[] = {"model", "step", "seed", "batch", "epoch", "shuffle", "lr", "lr_schedule",
                                       "examples"};
    enum { NKEYS = sizeof keys / sizeof keys[0] };
    float w[12], b[3], mw[12], mb[3];
    cannl_tensor t[] = {{"w", CANNL_F32, 2, {4, 3}, w},
                        {"b", CANNL_F32, 1, {3}, b},
                        {"w.momentum_buffer", CANNL_F32, 2, {4, 3}, mw},
                        {"b.momentum_buffer", CANNL_F32, 1, {3}, mb}};
    cannl_error err;
    cannl_checkpoint *ck = NULL;
    CHECK_OK(cannl_checkpoint_open(src, NULL, &ck, &err));
    if (!ck) return;
    char vals[NKEYS][64];
    cannl_meta meta[NKEYS];
    for (int i = 0; i < NKEYS; i++) {
        const char *m = strcmp(keys[i], key) == 0 && value ? value : cannl_checkpoint_meta(ck, keys[i]);
        snprintf(vals[i], sizeof vals[i], "%s", m ? m : "");
        meta[i] = (cannl_meta){keys[i], vals[i]};
    }
    for (int i = 0; i < 4; i++) CHECK_OK(cannl_checkpoint_read(ck, &t[i], &err));
    cannl_checkpoint_close(ck);
    for (int i = 0; i < 4 && tensor; i++)
        if (strcmp(t[i].name, tensor) == 0) ((float *)t[i].data)[elem] = v;
    CHECK_OK(cannl_checkpoint_save(dst, t, 4, meta, NKEYS, &err));
}

/* 1 if the file holds exactly bytes[0..len). */
static int holds(const char *path, const char *bytes, size_t len) {
    size_t n;
    char *t = rt_read_file(path, &n);
    int same = t && bytes && n == len && memcmp(t, bytes, len) == 0;
    free(t);
    return same;
}

/* SIGTERM and SIGHUP (timeout, docker stop, systemd, Slurm, Kubernetes; a closed terminal) stop
   a run as SIGINT does: the step finishes, the checkpoint is saved, exit 128 + the signal; the
   resumed run ends exactly where an uninterrupted one does. Also from another process. */
static void case_signals(void) {
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--checkpoint", W("a.safetensors"), "--metrics", W("a.jsonl")), 0,
           NULL, NULL);
    static const struct {
        const char *hook, *name, *step;
        int code;
    } sigs[] = {{"4:TERM", "SIGTERM", "4", 143}, {"7:HUP", "SIGHUP", "7", 129}};
    for (int i = 0; i < 2; i++) {
        setenv("FAKE_SIGNAL_AT_STEP", sigs[i].hook, 1);
        EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--checkpoint", W("b.safetensors"), "--metrics", W("b.jsonl")),
               sigs[i].code, NULL,
               F("interrupted by %s after step %s; checkpoint saved to %s", sigs[i].name, sigs[i].step,
                 W("b.safetensors")));
        unsetenv("FAKE_SIGNAL_AT_STEP");
        CHECK(strcmp(meta_of(W("b.safetensors"), "step"), sigs[i].step) == 0);
        CHECK(count_lines(W("b.jsonl")) == atoi(sigs[i].step) + (atoi(sigs[i].step) >= 5)); /* + epoch 1's */
        EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("b.safetensors"), "--epochs", "2",
                   "--log-every", "1", "--checkpoint", W("b.safetensors"), "--metrics", W("b.jsonl")),
               0, NULL, NULL);
        CHECK(same_file(W("a.jsonl"), W("b.jsonl")));
        CHECK(same_file(W("a.safetensors"), W("b.safetensors")));
    }
    /* kill -TERM from outside, at whatever step the run has reached (5 ms per step). */
    EXPECT(TRAIN("--epochs", "60", "--log-every", "1", "--checkpoint", W("c.safetensors"), "--metrics", W("c.jsonl")), 0,
           NULL, NULL);
    setenv("FAKE_STEP_DELAY_MS", "5", 1);
    pid_t pid = SPAWN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--batch", "8", "--seed", "7", "--epochs", "60",
                      "--log-every", "1", "--checkpoint", W("d.safetensors"), "--metrics", W("d.jsonl"));
    unsetenv("FAKE_STEP_DELAY_MS");
    /* once it has logged a few steps (the handlers are installed for the training loop) */
    for (int waited = 0; waited < 20000 && count_lines(W("d.jsonl")) < 3; waited += 10) sleep_ms(10);
    CHECK(pid > 0 && kill(pid, SIGTERM) == 0);
    result r = wait_v(pid);
    const int64_t at = atoll(meta_of(W("d.safetensors"), "step"));
    printf("SIGTERM from outside: stopped at step %lld of 300\n", (long long)at);
    CHECK(at > 0 && at < 300 && count_lines(W("d.jsonl")) == at + at / 5); /* steps and epochs (5 steps each) */
    EXPECT(r, 143, NULL, F("interrupted by SIGTERM after step %lld; checkpoint saved to ", (long long)at));
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("d.safetensors"), "--epochs", "60",
               "--log-every", "1", "--checkpoint", W("d.safetensors"), "--metrics", W("d.jsonl")),
           0, NULL, NULL);
    CHECK(same_file(W("c.jsonl"), W("d.jsonl")));
    CHECK(same_file(W("c.safetensors"), W("d.safetensors")));
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);
}

/* A diverging run stops with exit 1 and never saves over the last good checkpoint: the loss
   is checked every step, the whole state (params and optimiser state) every --log-every
   steps and before every save. Non-finite params are refused when loaded. */
static void case_diverge(void) {
    /* The case: --resume good --checkpoint good --lr 1e6 (fake_quad's loss overflows). */
    EXPECT(RUN(g_quad, "--steps", "10", "--checkpoint", W("q.safetensors")), 0, NULL, NULL);
    size_t qlen;
    char *q = rt_read_file(W("q.safetensors"), &qlen);
    EXPECT(RUN(g_quad, "--resume", W("q.safetensors"), "--checkpoint", W("q.safetensors"), "--steps", "1000", "--lr",
               "1e6"),
           1, NULL, "is inf (try a lower --lr); ");
    result r = RUN(g_quad, "--resume", W("q.safetensors"), "--checkpoint", W("q.safetensors"), "--steps", "1000",
                   "--lr", "1e6");
    CHECK(r.err && strstr(r.err, "fake_quad_train: error: training diverged at step ") &&
          strstr(r.err, F("%s keeps step 10\n", W("q.safetensors"))));
    EXPECT(r, 1, NULL, "the loss is inf");
    CHECK(holds(W("q.safetensors"), q, qlen));
    free(q);

    /* A good checkpoint after epoch 1 (step 5); then a nan appears in b's momentum buffer. */
    EXPECT(TRAIN("--epochs", "1", "--log-every", "1", "--checkpoint", W("good.safetensors"), "--metrics",
                 W("m.jsonl")),
           0, NULL, NULL);
    size_t glen;
    char *good = rt_read_file(W("good.safetensors"), &glen);
#define RESUME_GOOD(...)                                                                                              \
    RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("good.safetensors"), "--checkpoint",                \
        W("good.safetensors"), "--metrics", W("m.jsonl"), "--epochs", "3", __VA_ARGS__)
    const char *keeps = F("; %s keeps step 5", W("good.safetensors"));
    /* found by the state check of a --log-every step (before its record is written) */
    setenv("FAKE_NAN_AT_STEP", "7", 1);
    EXPECT(RESUME_GOOD("--log-every", "1"), 1, NULL,
           F("training diverged at step 7: state tensor 'b.momentum_buffer' holds nan at element 0 (try a lower "
             "--lr)%s\n", keeps));
    CHECK(holds(W("good.safetensors"), good, glen));
    CHECK(count_lines(W("m.jsonl")) == 7); /* steps 1-5, epoch 1, step 6 */
    /* without --log-every checks: b is nan after step 8, so the loss of step 9 is */
    EXPECT(RESUME_GOOD("--log-every", "0"), 1, NULL, F("training diverged at step 9: the loss is nan (try a lower --lr)%s", keeps));
    CHECK(holds(W("good.safetensors"), good, glen));
    /* found by the check before the save at the end of epoch 2 (step 10) */
    setenv("FAKE_NAN_AT_STEP", "10", 1);
    EXPECT(RESUME_GOOD("--log-every", "0"), 1, NULL,
           F("training diverged at step 10: state tensor 'b.momentum_buffer' holds nan at element 0 (try a lower "
             "--lr)%s", keeps));
    CHECK(holds(W("good.safetensors"), good, glen));
    /* ... and before the save at exit after SIGINT: exit 1, not 130 */
    setenv("FAKE_NAN_AT_STEP", "8", 1);
    setenv("FAKE_SIGNAL_AT_STEP", "8", 1);
    EXPECT(RESUME_GOOD("--log-every", "0"), 1, NULL, "training diverged at step 8: state tensor 'b.momentum_buffer'");
    unsetenv("FAKE_SIGNAL_AT_STEP");
    CHECK(holds(W("good.safetensors"), good, glen));
    /* A fresh run: a checkpoint saved earlier in the run is kept; none is written before. */
    setenv("FAKE_NAN_AT_STEP", "7", 1);
    EXPECT(TRAIN("--epochs", "3", "--log-every", "0", "--checkpoint", W("f.safetensors")), 1, NULL,
           F("training diverged at step 9: the loss is nan (try a lower --lr); %s keeps step 5", W("f.safetensors")));
    CHECK(strcmp(meta_of(W("f.safetensors"), "step"), "5") == 0);
    setenv("FAKE_NAN_AT_STEP", "3", 1);
    EXPECT(TRAIN("--epochs", "3", "--log-every", "1", "--checkpoint", W("g.safetensors")), 1, NULL,
           F("training diverged at step 3: state tensor 'b.momentum_buffer' holds nan at element 0 (try a lower "
             "--lr); %s was not written", W("g.safetensors")));
    CHECK(!rt_exists(W("g.safetensors")));
    unsetenv("FAKE_NAN_AT_STEP");
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);

    /* Non-finite params or optimiser state are refused by --init and --resume (as by
       `cannl gen --embed`), before anything is trained or written. */
    resave(W("good.safetensors"), W("nanw.safetensors"), "", NULL, "w", 3, NAN);
    EXPECT(TRAIN("--init", W("nanw.safetensors"), "--checkpoint", W("h.safetensors")), 1, NULL,
           "nanw.safetensors: param 'w' holds a non-finite value (nan) at element 3");
    resave(W("good.safetensors"), W("infm.safetensors"), "", NULL, "w.momentum_buffer", 0, -INFINITY);
    size_t ilen;
    char *inf = rt_read_file(W("infm.safetensors"), &ilen);
    EXPECT(TRAIN("--resume", W("infm.safetensors"), "--checkpoint", W("infm.safetensors"), "--epochs", "2"), 1, NULL,
           "infm.safetensors: state tensor 'w.momentum_buffer' holds a non-finite value (-inf) at element 0");
    CHECK(holds(W("infm.safetensors"), inf, ilen) && !rt_exists(W("h.safetensors")));
    free(inf);
    free(good);
#undef RESUME_GOOD
}

/* Checkpoint metadata is read as strictly as the flags it stands for. */
static void case_metadata(void) {
    EXPECT(TRAIN("--epochs", "1", "--checkpoint", W("good.safetensors")), 0, NULL, NULL);
    static const struct {
        const char *key, *value, *msg;
    } bad[] = {
        {"lr", "-1", "metadata \"lr\" is '-1', not a non-negative number (as --lr takes)"},
        {"lr", "0x1p-3", "metadata \"lr\" is '0x1p-3', not a non-negative number"},
        {"lr", "inf", "metadata \"lr\" is 'inf', not a non-negative number"},
        {"lr", " 0.1", "metadata \"lr\" is ' 0.1', not a non-negative number"},
        {"lr", "1e999", "metadata \"lr\" is '1e999', not a non-negative number"},
        {"lr_schedule", "linear", "metadata \"lr_schedule\" is 'linear', not spec, constant or cosine"},
        {"epoch", "3", "metadata \"epoch\" is 3, but its step 5 at 5 steps per epoch makes 1 completed epochs"},
        {"epoch", "-1", "metadata \"epoch\" is '-1', not a non-negative integer"},
        {"examples", "37x", "metadata \"examples\" is '37x', not a positive integer"},
        {"examples", "0", "metadata \"examples\" is '0', not a positive integer"},
        {"shuffle", "2", "metadata \"shuffle\" is not 0 or 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        resave(W("good.safetensors"), W("bad.safetensors"), bad[i].key, bad[i].value, NULL, 0, 0);
        size_t len;
        char *before = rt_read_file(W("bad.safetensors"), &len);
        EXPECT(TRAIN("--resume", W("bad.safetensors"), "--checkpoint", W("bad.safetensors"), "--epochs", "2"), 1, NULL,
               F("bad.safetensors: %s", bad[i].msg));
        CHECK(holds(W("bad.safetensors"), before, len));
        free(before);
    }
    /* Well-formed values are used: lr 0.2 from the checkpoint gives the run of --lr 0.2. */
    resave(W("good.safetensors"), W("lr.safetensors"), "lr", "2e-1", NULL, 0, 0);
    EXPECT(TRAIN("--resume", W("lr.safetensors"), "--epochs", "2", "--log-every", "1", "--metrics", W("a.jsonl")), 0,
           NULL, NULL);
    EXPECT(TRAIN("--resume", W("good.safetensors"), "--epochs", "2", "--log-every", "1", "--metrics", W("b.jsonl"),
                 "--lr", "0.2"),
           0, NULL, NULL);
    CHECK(same_file(W("a.jsonl"), W("b.jsonl")));
    /* The flag itself takes the same numbers. */
    EXPECT(TRAIN("--lr", "0x1p-3"), 2, NULL, "--lr: '0x1p-3' is not a number");
    EXPECT(TRAIN("--lr", "1e999"), 2, NULL, "--lr: '1e999' is too large");
    EXPECT(TRAIN("--lr", "-1"), 2, NULL, "--lr: -1 must not be negative");
}

static void write_idx_f32(const char *path, const float *v, uint32_t count, uint32_t per) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    const unsigned char hdr[12] = {0, 0, 0x0D, 2, (unsigned char)(count >> 24), (unsigned char)(count >> 16),
                                   (unsigned char)(count >> 8), (unsigned char)count, (unsigned char)(per >> 24),
                                   (unsigned char)(per >> 16), (unsigned char)(per >> 8), (unsigned char)per};
    fwrite(hdr, 1, 12, f);
    for (uint32_t i = 0; i < count * per; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        const unsigned char be[4] = {(unsigned char)(u >> 24), (unsigned char)(u >> 16), (unsigned char)(u >> 8),
                                     (unsigned char)u};
        fwrite(be, 1, 4, f);
    }
    CHECK(fclose(f) == 0);
}

/* Non-finite data is refused when it is read (file, example, value); CSV numbers are decimal
   and finite; a CSV's first row is a header only without numbers, or when declared. */
static void case_data_finite(void) {
    int x[4 * NTRAIN], y[NTRAIN];
    make_examples(11, NTRAIN, x, y);
    float xf[4 * NTRAIN];
    for (int i = 0; i < 4 * NTRAIN; i++) xf[i] = (float)x[i];
    xf[4 * 3 + 2] = NAN;
    write_npy_f32(W("xnan.npy"), xf, "(37, 2, 2)", 4 * NTRAIN);
    EXPECT(RUN(g_fake, "--data", F("x=%s", W("xnan.npy")), "--data", Y_ARG, "--checkpoint", W("c.safetensors")), 1,
           NULL, F("%s: example 3, value 2: nan (the data must be finite numbers)", W("xnan.npy")));
    xf[4 * 3 + 2] = 1.0f;
    xf[4 * 36 + 3] = INFINITY;
    write_idx_f32(W("xinf-idx"), xf, NTRAIN, 4);
    EXPECT(RUN(g_fake, "--data", F("x=%s", W("xinf-idx")), "--data", Y_ARG), 1, NULL,
           F("%s: example 36, value 3: inf (the data", W("xinf-idx")));
    /* the test set too */
    EXPECT(TRAIN("--test", F("x=%s", W("xnan.npy")), "--test", Y_ARG), 1, NULL, "xnan.npy: example 3, value 2: nan");
    CHECK(!rt_exists(W("c.safetensors")));
    /* CSV: nan, inf, overflow, hexadecimal floats */
    static const char *const bad[][2] = {{"nan", "is not a finite number"},
                                         {"inf", "is not a finite number"},
                                         {"1e999", "is too large for float32"},
                                         {"1e39", "is too large for float32"},
                                         {"0x1p3", "is not a number"}};
    for (int k = 0; k < 5; k++) {
        FILE *f = fopen(W("xbad.csv"), "w");
        for (int e = 0; e < NTRAIN; e++)
            fprintf(f, "%d,%s,%d,%d\n", x[4 * e], e == 4 ? bad[k][0] : F("%d", x[4 * e + 1]), x[4 * e + 2], x[4 * e + 3]);
        fclose(f);
        EXPECT(RUN(g_fake, "--data", F("x=%s", W("xbad.csv")), "--data", Y_ARG), 1, NULL,
               F("xbad.csv: line 5: field 2 ('%s') %s", bad[k][0], bad[k][1]));
    }
    /* A typo in the first row: an error, not a header that drops example 0. */
    FILE *f = fopen(W("xtypo.csv"), "w");
    for (int e = 0; e < NTRAIN; e++)
        fprintf(f, "%d,%d,%d%s,%d\n", x[4 * e], x[4 * e + 1], x[4 * e + 2], e == 0 ? "x" : "", x[4 * e + 3]);
    fclose(f);
    EXPECT(RUN(g_fake, "--data", F("x=%s", W("xtypo.csv")), "--data", Y_ARG), 1, NULL,
           "xtypo.csv: line 1: field 3 ");
    /* PATH:header declares a header row, numeric or not: the same run as without one. */
    f = fopen(W("xh.csv"), "w");
    fprintf(f, "1,2,3,4\n");
    for (int e = 0; e < NTRAIN; e++) fprintf(f, "%d,%d,%d,%d\n", x[4 * e], x[4 * e + 1], x[4 * e + 2], x[4 * e + 3]);
    fclose(f);
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--metrics", W("a.jsonl")), 0, NULL, NULL);
    EXPECT(RUN(g_fake, "--data", F("x=%s:header", W("xh.csv")), "--data", Y_ARG, "--batch", "8", "--seed", "7",
               "--epochs", "2", "--log-every", "1", "--metrics", W("b.jsonl")),
           0, NULL, NULL);
    CHECK(same_file(W("a.jsonl"), W("b.jsonl")));
    EXPECT(RUN(g_fake, "--data", F("x=%s", W("xh.csv")), "--data", Y_ARG), 1, NULL,
           F("y.csv has 37 examples but %s has 38", W("xh.csv"))); /* undeclared, the numeric first row is data */
    EXPECT(RUN(g_fake, "--data", F("x=%s:header", W("x.npy")), "--data", Y_ARG), 1, NULL,
           "x.npy: ':header' declares the header row of a CSV file, but this is a .npy file");
}

/* The temporary files of a killed save (PATH.tmp.<pid>) are removed by the next run that
   writes PATH, if their process no longer runs; a checkpoint path that is a directory is
   refused before training. */
static void case_stale_tmp(void) {
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    CHECK(dead > 0 && waitpid(dead, NULL, 0) == dead);
    const char *ck = W("ck.safetensors");
    const char *stale[] = {F("%s.tmp.%d", ck, (int)dead), F("%s.tmp.%d.2", ck, (int)dead)};
    const char *kept[] = {F("%s.tmp.1", ck) /* pid 1 runs */, F("%s.tmp.%d", W("other.safetensors"), (int)dead),
                          F("%s.tmp.%dx", ck, (int)dead), F("%s.tmp.%d", ck, (int)getpid()) /* this test's */};
    for (int i = 0; i < 2; i++) CHECK(rt_write_file(stale[i], "partial", 7) == 0);
    for (int i = 0; i < 4; i++) CHECK(rt_write_file(kept[i], "x", 1) == 0);
    EXPECT(TRAIN("--epochs", "0", "--checkpoint", ck), 0, NULL,
           F("fake_train: warning: removed 2 temporary files of %s left by an interrupted save", ck));
    for (int i = 0; i < 2; i++) CHECK(!rt_exists(stale[i]));
    for (int i = 0; i < 4; i++) CHECK(rt_exists(kept[i]));
    for (int i = 0; i < 4; i++) unlink(kept[i]);

    /* Really killed while saving: a run saving after every 5-step epoch spends most of its time
       in the saves (fsync); SIGKILL it until it leaves a temporary, then run again. */
    int left = 0, tries = 0;
    for (; tries < 100 && !left; tries++) {
        pid_t pid = SPAWN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--batch", "8", "--epochs", "1000000", "--quiet",
                          "--checkpoint", W("k.safetensors"));
        sleep_ms(40 + tries % 7 * 3);
        if (pid > 0) kill(pid, SIGKILL);
        result r = wait_v(pid);
        free(r.out);
        free(r.err);
        left = rt_count_matching(g_dir, "k.safetensors.tmp.");
    }
    printf("SIGKILL during a save: a temporary was left after %d tries\n", tries);
    CHECK(left == 1);
    EXPECT(TRAIN("--epochs", "1", "--checkpoint", W("k.safetensors")), 0, NULL,
           "removed 1 temporary file of ");
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);

    /* A directory as --checkpoint: refused at once, not after the first epoch. */
    CHECK(mkdir(W("ckdir"), 0755) == 0 || errno == EEXIST);
    result r = TRAIN("--epochs", "1", "--checkpoint", W("ckdir"));
    CHECK(r.out && !strstr(r.out, "epoch 1/1"));
    EXPECT(r, 2, NULL, F("--checkpoint %s: it is a directory (cannl replaces only regular files you own)", W("ckdir")));
}

/* After a crash past the last checkpoint and --resume from it, the metrics JSONL holds every
   step once: the records written after the checkpoint's step are cut off first. */
static void case_crash_resume(void) {
    EXPECT(TRAIN("--epochs", "2", "--log-every", "1", "--checkpoint", W("a.safetensors"), "--metrics", W("a.jsonl"),
                 TEST_ARGS),
           0, NULL, NULL);
    setenv("FAKE_SIGNAL_AT_STEP", "8:KILL", 1); /* a crash at step 8: checkpoint at 5, records up to 7 */
    result r = TRAIN("--epochs", "2", "--log-every", "1", "--checkpoint", W("b.safetensors"), "--metrics", W("b.jsonl"),
                     TEST_ARGS);
    unsetenv("FAKE_SIGNAL_AT_STEP");
    CHECK(r.code == 128 + SIGKILL);
    free(r.out);
    free(r.err);
    CHECK(strcmp(meta_of(W("b.safetensors"), "step"), "5") == 0);
    CHECK(count_lines(W("b.jsonl")) == 8); /* steps 1-5, epoch 1's test record, steps 6-7 */
#define RESUME(name)                                                                                                  \
    RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W(name ".safetensors"), "--epochs", "2", "--log-every",  \
        "1", "--checkpoint", W(name ".safetensors"), "--metrics", W(name ".jsonl"), TEST_ARGS)
    EXPECT(RESUME("b"), 0, F("fake_train: removed 2 records after step 5 (the checkpoint's) from %s", W("b.jsonl")),
           NULL);
    CHECK(same_file(W("a.jsonl"), W("b.jsonl")));
    CHECK(same_file(W("a.safetensors"), W("b.safetensors")));
    /* A record cut short by the crash goes too. */
    EXPECT(TRAIN("--epochs", "1", "--log-every", "1", "--checkpoint", W("c.safetensors"), "--metrics", W("c.jsonl"),
                 TEST_ARGS),
           0, NULL, NULL);
    FILE *f = fopen(W("c.jsonl"), "a");
    fputs("{\"epoch\":2,\"step\":6,\"lo", f);
    fclose(f);
    EXPECT(RESUME("c"), 0, "removed 1 record after step 5", NULL);
    CHECK(same_file(W("a.jsonl"), W("c.jsonl")));
    /* A line that is no record of a training program: an error, and the log is left alone. */
    EXPECT(TRAIN("--epochs", "1", "--log-every", "1", "--checkpoint", W("d.safetensors"), "--metrics", W("d.jsonl")),
           0, NULL, NULL);
    f = fopen(W("d.jsonl"), "a");
    fputs("hello\n", f);
    fclose(f);
    size_t len;
    char *before = rt_read_file(W("d.jsonl"), &len);
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("d.safetensors"), "--epochs", "2",
               "--metrics", W("d.jsonl")),
           1, NULL, "d.jsonl: line 7 is not a record of a training program");
    CHECK(holds(W("d.jsonl"), before, len));
    free(before);
#undef RESUME
}

/* Periodic checkpoints (issue 36 item 3): --checkpoint-every N saves after every N steps (besides
   every epoch's end), so a run killed outright (SIGKILL: no handler runs, nothing is saved at the
   end) loses at most N steps, and --resume continues it to the uninterrupted run's checkpoint and
   log, bit for bit. By default every 1000 steps or 10 minutes (--checkpoint-minutes), whichever
   comes first. */
static void case_periodic(void) {
    EXPECT(TRAIN("--checkpoint-every", "3"), 2, NULL, "--checkpoint-every needs --checkpoint PATH");
    EXPECT(TRAIN("--keep-last", "2"), 2, NULL, "--keep-last needs --checkpoint PATH");
    EXPECT(TRAIN("--checkpoint-minutes", "5"), 2, NULL, "--checkpoint-minutes needs --checkpoint PATH");
    EXPECT(TRAIN("--checkpoint", W("x.st"), "--checkpoint-every", "-1"), 2, NULL, "--checkpoint-every");
    EXPECT(TRAIN("--checkpoint", W("x.st"), "--checkpoint-minutes", "-1"), 2, NULL,
           "--checkpoint-minutes: -1 must not be negative");
    EXPECT(TRAIN("--checkpoint", W("x.st"), "--checkpoint-minutes", "ten"), 2, NULL,
           "--checkpoint-minutes: 'ten' is not a number");
    EXPECT(TRAIN("--checkpoint", W("x.st"), "--keep-last", "2000000000"), 2, NULL, "--keep-last");
    EXPECT(TRAIN("--help"), 0, "--checkpoint-every N", NULL);
    /* 4 epochs of 5 steps; killed at steps 4 and 14: saved at 3 (before the first epoch's end) and
       at 12 (the epochs' ends save at 5 and 10). */
    EXPECT(TRAIN("--epochs", "4", "--log-every", "1", "--checkpoint", W("a.st"), "--metrics", W("a.jsonl"), TEST_ARGS),
           0, NULL, NULL);
    static const char *const kills[][2] = {{"4:KILL", "3"}, {"14:KILL", "12"}};
    for (int i = 0; i < 2; i++) {
        remove(W("b.st"));
        setenv("FAKE_SIGNAL_AT_STEP", kills[i][0], 1);
        result r = TRAIN("--epochs", "4", "--log-every", "1", "--checkpoint", W("b.st"), "--checkpoint-every", "3",
                         "--metrics", W("b.jsonl"), TEST_ARGS);
        unsetenv("FAKE_SIGNAL_AT_STEP");
        CHECK(r.code == 128 + SIGKILL);
        free(r.out);
        free(r.err);
        printf("killed at step %.*s: the checkpoint holds step %s\n", (int)strcspn(kills[i][0], ":"), kills[i][0],
               meta_of(W("b.st"), "step"));
        CHECK(strcmp(meta_of(W("b.st"), "step"), kills[i][1]) == 0);
        EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("b.st"), "--epochs", "4", "--log-every", "1",
                   "--checkpoint", W("b.st"), "--checkpoint-every", "3", "--metrics", W("b.jsonl"), TEST_ARGS),
               0, "trained to step 20 ", NULL);
        CHECK(same_file(W("a.jsonl"), W("b.jsonl")));
        CHECK(same_file(W("a.st"), W("b.st")));
    }
    /* The default: every 1000 steps (fake_quad, killed at step 1234). */
    setenv("FAKE_SIGNAL_AT_STEP", "1234:KILL", 1);
    result r = RUN(g_quad, "--steps", "1500", "--checkpoint", W("q.st"));
    CHECK(r.code == 128 + SIGKILL);
    free(r.out);
    free(r.err);
    CHECK(strcmp(meta_of(W("q.st"), "step"), "1000") == 0);
    /* ... or every 10 minutes: here 0.002 minutes (0.12 s) of 20 ms steps, at least every 6 steps;
       killed at step 40, it holds step 34 to 39. --checkpoint-every 0: by time alone. */
    setenv("FAKE_STEP_DELAY_MS", "20", 1);
    setenv("FAKE_SIGNAL_AT_STEP", "40:KILL", 1);
    r = RUN(g_quad, "--steps", "100", "--checkpoint", W("t.st"), "--checkpoint-every", "0", "--checkpoint-minutes",
            "0.002");
    CHECK(r.code == 128 + SIGKILL);
    free(r.out);
    free(r.err);
    const long at = atol(meta_of(W("t.st"), "step"));
    printf("killed at step 40 with a save every 0.12 s (20 ms steps): the checkpoint holds step %ld\n", at);
    CHECK(at >= 34 && at <= 39);
    /* Both off: no periodic save, nothing on disk. */
    r = RUN(g_quad, "--steps", "100", "--checkpoint", W("n.st"), "--checkpoint-every", "0", "--checkpoint-minutes", "0");
    CHECK(r.code == 128 + SIGKILL);
    free(r.out);
    free(r.err);
    CHECK(!rt_exists(W("n.st")));
    unsetenv("FAKE_SIGNAL_AT_STEP");
    unsetenv("FAKE_STEP_DELAY_MS");
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);
}

/* --keep-last K: every save is kept as PATH.stepN beside PATH (a hard link), the K newest; the
   older step files the run wrote are deleted, across a --resume of PATH or of a step file too,
   and nothing else: not a step file of another run, not one replaced by a symbolic link. */
static void case_keep_last(void) {
    remove(W("k.st.step8")); /* the symbolic link of an earlier run (rt_fresh_dir removes regular files only) */
    CHECK(rt_write_file(W("k.st.step3"), "not ours", 8) == 0); /* a file the run did not write */
    EXPECT(RUN(g_quad, "--steps", "10", "--checkpoint", W("k.st"), "--checkpoint-every", "2", "--keep-last", "2"), 0,
           NULL, NULL);
    CHECK(!rt_exists(W("k.st.step2")) && !rt_exists(W("k.st.step4")) && !rt_exists(W("k.st.step6")));
    CHECK(strcmp(meta_of(W("k.st.step8"), "step"), "8") == 0);
    CHECK(same_file(W("k.st.step10"), W("k.st")));
    CHECK(strcmp(meta_of(W("k.st"), "step_files"), "8,10") == 0);
    struct stat a, b;
    CHECK(stat(W("k.st"), &a) == 0 && stat(W("k.st.step10"), &b) == 0 && a.st_ino == b.st_ino); /* no second write */
    /* The step file holds what a run to step 8 saves. */
    EXPECT(RUN(g_quad, "--steps", "8", "--checkpoint", W("e8.st")), 0, NULL, NULL);
    double w8 = 0, w = 1;
    CHECK(read_tensor(W("e8.st"), "w", 0, NULL, &w8) == 0 && read_tensor(W("k.st.step8"), "w", 0, NULL, &w) == 0 &&
          w8 == w);
    /* Resumed: the next saves delete 8 and 10, the run's own; a step file replaced by a symbolic
       link is left (with a warning). */
    CHECK(rename(W("k.st.step8"), W("k.st.step8.moved")) == 0 && symlink(W("k.st.step8.moved"), W("k.st.step8")) == 0);
    EXPECT(RUN(g_quad, "--resume", W("k.st"), "--steps", "14", "--checkpoint", W("k.st"), "--checkpoint-every", "2",
               "--keep-last", "2"),
           0, NULL, "--keep-last: ");
    struct stat l;
    CHECK(lstat(W("k.st.step8"), &l) == 0 && S_ISLNK(l.st_mode));
    CHECK(!rt_exists(W("k.st.step10")) && rt_exists(W("k.st.step12")) && rt_exists(W("k.st.step14")));
    CHECK(rt_exists(W("k.st.step3")));
    CHECK(strcmp(meta_of(W("k.st"), "step_files"), "12,14") == 0);
    /* Resumed from an older step file: its list carries on (14 is saved over again). */
    EXPECT(RUN(g_quad, "--resume", W("k.st.step12"), "--steps", "16", "--checkpoint", W("k.st"), "--checkpoint-every", "2",
               "--keep-last", "3"),
           0, NULL, NULL);
    CHECK(strcmp(meta_of(W("k.st"), "step_files"), "12,14,16") == 0 && rt_exists(W("k.st.step12")));
    /* A fresh run (no --resume) deletes only what it wrote. */
    EXPECT(RUN(g_quad, "--steps", "4", "--checkpoint", W("k.st"), "--checkpoint-every", "2", "--keep-last", "1"), 0,
           NULL, NULL);
    CHECK(!rt_exists(W("k.st.step2")) && rt_exists(W("k.st.step4")));
    CHECK(rt_exists(W("k.st.step12")) && rt_exists(W("k.st.step14")) && rt_exists(W("k.st.step16")));
    /* A bad list in the metadata is an error naming the key. */
    cannl_checkpoint *ck = NULL;
    cannl_error err;
    CHECK_OK(cannl_checkpoint_open(W("k.st"), NULL, &ck, &err));
    double wv = 0, vv[2] = {0}, mw = 0, mv[2] = {0};
    const cannl_tensor t[4] = {{"w", CANNL_F64, 0, {0}, &wv}, {"v", CANNL_F64, 1, {2}, vv},
                               {"w.momentum_buffer", CANNL_F64, 0, {0}, &mw}, {"v.momentum_buffer", CANNL_F64, 1, {2}, mv}};
    for (int i = 0; i < 4 && ck; i++) CHECK_OK(cannl_checkpoint_read(ck, &t[i], &err));
    cannl_checkpoint_close(ck);
    const cannl_meta bad[] = {{"model", "fake_quad"}, {"step", "4"}, {"step_files", "2,x"}};
    CHECK_OK(cannl_checkpoint_save(W("bad.st"), t, 4, bad, 3, &err));
    EXPECT(RUN(g_quad, "--resume", W("bad.st"), "--steps", "6", "--checkpoint", W("bad.st"), "--keep-last", "2"), 1,
           NULL, "bad.st: metadata \"step_files\" is '2,x'");
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);
    remove(W("k.st.step8"));
}

/* A run resumed at its end (issue 36 item 5) writes no record a second time: not the last
   epoch's test record, nor the final test evaluation of a run that stopped mid-epoch. A log
   that lacks it gets it once (its epoch: the one the last step is in). */
static void case_resume_end(void) {
    static const char *const ends[][2] = {{"--epochs", "2"}, {"--steps", "7"}};
    for (int i = 0; i < 2; i++) {
        EXPECT(TRAIN(ends[i][0], ends[i][1], "--log-every", "2", "--checkpoint", W("e.st"), "--metrics", W("e.jsonl"),
                     TEST_ARGS),
               0, NULL, NULL);
        size_t len;
        char *before = rt_read_file(W("e.jsonl"), &len);
        for (int again = 0; again < 2; again++)
            EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("e.st"), ends[i][0], ends[i][1],
                       "--log-every", "2", "--checkpoint", W("e.st"), "--metrics", W("e.jsonl"), TEST_ARGS),
                   0, "nothing to train", NULL);
        CHECK(holds(W("e.jsonl"), before, len));
        if (!holds(W("e.jsonl"), before, len)) {
            char *after = rt_read_file(W("e.jsonl"), NULL);
            fprintf(stderr, "before:\n%safter:\n%s", before, after ? after : "(none)");
            free(after);
        }
        free(before);
    }
    remove(W("n.jsonl"));
    EXPECT(TRAIN("--epochs", "2", "--checkpoint", W("f.st"), TEST_ARGS), 0, NULL, NULL);
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--resume", W("f.st"), "--epochs", "2", "--metrics",
               W("n.jsonl"), TEST_ARGS),
           0, "nothing to train", NULL);
    char *t = rt_read_file(W("n.jsonl"), NULL);
    CHECK(t && strncmp(t, "{\"epoch\":2,\"step\":10,\"lr\":0.05,\"test_loss\":", 42) == 0 && count_lines(W("n.jsonl")) == 1);
    if (t) printf("%s", t);
    free(t);
}

/* A signal during an evaluation (issue 36 item 4): a run of one process stops after the batch in
   hand, not after the whole test set (20 batches of 1 here; 37 steps of 1 example trained), logs
   no test result for the step, saves it and exits 128 + the signal; the resumed run evaluates
   and logs it. */
static void case_eval_signal(void) {
    setenv("FAKE_TERM_AT_EVAL", "3", 1);
    result r = RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--batch", "1", "--seed", "7", "--epochs", "1",
                   "--checkpoint", W("v.st"), "--metrics", W("v.jsonl"), TEST_ARGS);
    unsetenv("FAKE_TERM_AT_EVAL");
    CHECK(r.out && strstr(r.out, "fake: eval 3\n") && !strstr(r.out, "fake: eval 4\n"));
    CHECK(r.out && !strstr(r.out, "test_loss") && !strstr(r.out, "test loss"));
    EXPECT(r, 143, NULL, F("interrupted by SIGTERM after step 37; checkpoint saved to %s", W("v.st")));
    char *t = rt_read_file(W("v.jsonl"), NULL);
    CHECK(t && strstr(t, "\"epoch\":1,") && !strstr(t, "test_loss"));
    free(t);
    EXPECT(RUN(g_fake, "--data", X_ARG, "--data", Y_ARG, "--batch", "1", "--resume", W("v.st"), "--epochs", "1",
               "--checkpoint", W("v.st"), "--metrics", W("v.jsonl"), TEST_ARGS),
           0, "test loss: ", NULL);
    t = rt_read_file(W("v.jsonl"), NULL);
    CHECK(t && strstr(t, "\"test_loss\":"));
    free(t);
}

/* --init FILE --init-partial (issue 36 item 8): the params FILE holds from it, the others from
   the spec's init (what create(seed) made), each listed; also through --name-map. Plain --init
   stays strict. */
static void case_init_partial(void) {
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = (float)i * 0.25f - 1.0f;
    const cannl_tensor only_w[] = {{"w", CANNL_F32, 2, {4, 3}, w}};
    cannl_error err;
    CHECK_OK(cannl_checkpoint_save(W("w.st"), only_w, 1, NULL, 0, &err));
    EXPECT(TRAIN("--init-partial"), 2, NULL, "--init-partial needs --init FILE");
    EXPECT(TRAIN("--init", W("w.st")), 1, NULL, "w.st: missing tensor 'b'");
    EXPECT(TRAIN("--epochs", "0", "--checkpoint", W("seed.st")), 0, NULL, NULL);
    result r = TRAIN("--init", W("w.st"), "--init-partial", "--epochs", "0", "--checkpoint", W("p.st"));
    CHECK(r.out && strstr(r.out, F("--init-partial: 1 of 2 params from %s, 1 from the spec's init (seed 7):\n", W("w.st"))) &&
          strstr(r.out, F("\n  w  from %s\n", W("w.st"))) &&
          strstr(r.out, F("\n  b  from the spec's init (%s has no 'b')\n", W("w.st"))));
    if (r.out) printf("%s", r.out);
    EXPECT(r, 0, NULL, NULL);
    double got[12] = {0}, want[3] = {0};
    const int64_t ws[2] = {4, 3}, bs[1] = {3};
    CHECK(read_tensor(W("p.st"), "w", 2, ws, got) == 0);
    for (int i = 0; i < 12; i++) CHECK(got[i] == (double)w[i]);
    CHECK(read_tensor(W("p.st"), "b", 1, bs, got) == 0 && read_tensor(W("seed.st"), "b", 1, bs, want) == 0);
    CHECK(memcmp(got, want, sizeof want) == 0);
    /* Through a name map: the file's keys are PyTorch's. */
    const cannl_tensor fc[] = {{"fc.weight", CANNL_F32, 2, {4, 3}, w}, {"other", CANNL_F32, 1, {3}, w}};
    CHECK_OK(cannl_checkpoint_save(W("fc.st"), fc, 2, NULL, 0, &err));
    CHECK(rt_write_file(W("map.txt"), "w = fc.weight\nb = fc.bias\n", 26) == 0);
    r = TRAIN("--init", W("fc.st"), "--init-partial", "--name-map", W("map.txt"), "--epochs", "0", "--checkpoint",
              W("pm.st"));
    CHECK(r.out && strstr(r.out, F("\n  w  from %s ('fc.weight')\n", W("fc.st"))) &&
          strstr(r.out, F("\n  b  from the spec's init (%s has no 'fc.bias')\n", W("fc.st"))));
    if (r.out) printf("%s", r.out);
    EXPECT(r, 0, NULL, NULL);
    CHECK(read_tensor(W("pm.st"), "fc.weight", 2, ws, got) == 0 && got[5] == (double)w[5]);
    CHECK(read_tensor(W("pm.st"), "fc.bias", 1, bs, got) == 0 && memcmp(got, want, sizeof want) == 0);
    /* --quiet: not listed. A file with none of the params, or one of another shape: errors. */
    r = TRAIN("--init", W("w.st"), "--init-partial", "--epochs", "0", "--quiet");
    CHECK(r.out && !strstr(r.out, "--init-partial"));
    EXPECT(r, 0, NULL, NULL);
    EXPECT(TRAIN("--init", W("fc.st"), "--init-partial"), 1, NULL,
           "fc.st: holds none of the params of model 'fake_softmax'; the file holds: fc.weight, other");
    const cannl_tensor wt[] = {{"w", CANNL_F32, 2, {3, 4}, w}};
    CHECK_OK(cannl_checkpoint_save(W("wt.st"), wt, 1, NULL, 0, &err));
    EXPECT(TRAIN("--init", W("wt.st"), "--init-partial"), 1, NULL, "wt.st: tensor 'w' has shape [3, 4], expected [4, 3]");
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: test_train CASE WORKDIR FAKE_TRAIN FAKE_QUAD_TRAIN [FAKE_PREFETCH_TRAIN [FAKE_QUAD_INFER]]\n");
        return 2;
    }
    g_dir = argv[2];
    g_fake = argv[3];
    g_quad = argv[4];
    g_prefetch = argc > 5 ? argv[5] : NULL;
    g_quad_infer = argc > 6 ? argv[6] : NULL;
    CHECK(rt_fresh_dir(g_dir) == 0);
    unsetenv("FAKE_SIGNAL_AT_STEP");
    unsetenv("FAKE_NAN_AT_STEP");
    unsetenv("FAKE_STEP_DELAY_MS");
    /* Under LeakSanitizer a leaking child would exit 1, like a run that fails
       on purpose; give leaks their own status so every expectation sees them. */
    setenv("LSAN_OPTIONS", "exitcode=99", 0);
    make_data();
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {{"cli", case_cli},       {"binding", case_binding},         {"metrics", case_metrics},
                 {"resume", case_resume}, {"cosine", case_cosine}, {"steps", case_steps},             {"sigint", case_sigint},
                 {"other_model", case_other_model}, {"init", case_init},    {"corrupt", case_corrupt},
                 {"no_inputs", case_no_inputs}, {"prefetch", case_prefetch}, {"signals", case_signals},
                 {"diverge", case_diverge}, {"metadata", case_metadata}, {"data_finite", case_data_finite},
                 {"stale_tmp", case_stale_tmp}, {"crash_resume", case_crash_resume}, {"periodic", case_periodic},
                 {"keep_last", case_keep_last}, {"resume_end", case_resume_end}, {"init_partial", case_init_partial},
                 {"eval_signal", case_eval_signal}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            cases[i].fn();
            return rt_finish(cases[i].name);
        }
    }
    fprintf(stderr, "test_train: unknown case '%s'\n", argv[1]);
    return 2;
}
