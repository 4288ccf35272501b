/* test_infer.c - the generic inference program (cannl_infer_main) and
 * cannl_npy_save, driven through fake_softmax's inference programs
 * (fake_infer.h).
 *
 *   test_infer CASE WORKDIR FAKE_INFER FAKE_INFER_EMBEDDED FAKE_INFER_TWO
 *
 * Each CASE is one ctest test: cli, outputs, metric, embedded, names, weights, npy.
 * The data files and checkpoints are written by the test itself; expected outputs
 * are computed here from the params. */
#include "fake_infer.h"
#include "rt_test.h"

#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

static const char *g_dir, *g_infer, *g_embedded, *g_two;

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
#define W(name) F("%s/%s", g_dir, name)

typedef struct result {
    int code;  /* exit status; 128 + signal when killed */
    char *out; /* stdout */
    char *err; /* stderr */
} result;

static result run_v(const char *exe, const char *const *args) {
    result r = {-1, NULL, NULL};
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
        return r;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = rt_read_file(out_path, NULL);
    r.err = rt_read_file(err_path, NULL);
    return r;
}
#define RUN(exe, ...) run_v((exe), (const char *const[]){__VA_ARGS__, NULL})

/* Exit status `code`, stdout containing out_sub, stderr containing err_sub; a failure
   (1 or 2) prints exactly one "<prog>: error: " line. */
static void expect_at(int line, result r, int code, const char *out_sub, const char *err_sub) {
    int ok = r.code == code && r.out && r.err;
    if (ok && out_sub) ok = strstr(r.out, out_sub) != NULL;
    if (ok && err_sub) ok = strstr(r.err, err_sub) != NULL;
    if (ok && (code == 1 || code == 2)) {
        const char *nl = strchr(r.err, '\n');
        ok = strstr(r.err, ": error: ") != NULL && nl && nl[1] == '\0';
    }
    if (!ok) {
        fprintf(stderr, "test_infer.c:%d: expected exit %d, stdout with \"%s\", stderr with \"%s\"\n"
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

/* ------------------------------------------------------------ data and reference */

enum { N = 29 }; /* examples: batch 8 gives 3 full batches and one of 5 */

static float g_x[N * 4], g_y[N * 3];

static void write_f32(const char *path, const float *v, int32_t ndims, const int64_t *shape) {
    cannl_error err;
    CHECK_OK(cannl_npy_save(path, CANNL_F32, ndims, shape, v, &err));
}

/* x.npy [N, 2, 2], y.npy one-hot [N, 3], yi.npy class indices [N], short.npy one-hot [N - 1, 3],
   wide.npy [N, 5]; ck.safetensors: the embedded params as a checkpoint of fake_softmax. */
static void make_data(void) {
    cannl_error err;
    cannl_rng rng;
    cannl_rng_seed(&rng, 5);
    float yi[N];
    for (int i = 0; i < N * 4; i++) g_x[i] = (float)cannl_rng_uniform(&rng) * 4 - 2;
    for (int e = 0; e < N; e++) {
        int c = (int)cannl_rng_below(&rng, 3);
        yi[e] = (float)c;
        for (int k = 0; k < 3; k++) g_y[e * 3 + k] = k == c ? 1.0f : 0.0f;
    }
    write_f32(W("x.npy"), g_x, 3, (const int64_t[]){N, 2, 2});
    write_f32(W("y.npy"), g_y, 2, (const int64_t[]){N, 3});
    write_f32(W("yi.npy"), yi, 1, (const int64_t[]){N});
    write_f32(W("short.npy"), g_y, 2, (const int64_t[]){N - 1, 3});
    float wide[N * 5] = {0};
    write_f32(W("wide.npy"), wide, 2, (const int64_t[]){N, 5});
    const cannl_tensor t[] = {{"w", CANNL_F32, 2, {4, 3}, (void *)FAKE_EMBEDDED_W},
                              {"b", CANNL_F32, 1, {3}, (void *)FAKE_EMBEDDED_B}};
    const cannl_meta meta[] = {{CANNL_META_MODEL, "fake_softmax"}};
    CHECK_OK(cannl_checkpoint_save(W("ck.safetensors"), t, 2, meta, 1, &err));
}

/* fake_softmax's probabilities of example e with the embedded params (its formula). */
static void probs_of(int e, float *p) {
    float mx = -INFINITY;
    for (int c = 0; c < 3; c++) {
        float z = FAKE_EMBEDDED_B[c];
        for (int f = 0; f < 4; f++) z += g_x[e * 4 + f] * FAKE_EMBEDDED_W[f * 3 + c];
        p[c] = z;
        if (z > mx) mx = z;
    }
    float sum = 0;
    for (int c = 0; c < 3; c++) sum += (p[c] = expf(p[c] - mx));
    for (int c = 0; c < 3; c++) p[c] /= sum;
}

/* Load an .npy written by the program: [N, 3] float32; NULL (and a failure) otherwise. */
static float *load_out(const char *path) {
    cannl_dataset ds;
    cannl_error err;
    if (cannl_dataset_load(&ds, path, CANNL_FMT_NPY, CANNL_F32, &err) != CANNL_OK) {
        fprintf(stderr, "cannot load %s: %s\n", path, err.msg);
        rt_failures++;
        return NULL;
    }
    CHECK(ds.count == N && ds.ndims == 1 && ds.dims[0] == 3);
    float *v = malloc(sizeof(float) * N * 3);
    if (v) memcpy(v, ds.data, sizeof(float) * N * 3);
    cannl_dataset_free(&ds);
    return v;
}

/* A --output .csv file: N lines of 3 comma-separated values, no header, each value parsing
   back to exactly the float32 of the .npy written by the same run. */
static void check_csv_output(const char *csv, const char *npy) {
    float *want = load_out(npy);
    char *text = rt_read_file(csv, NULL);
    CHECK(text != NULL && strncmp(text, "\x93NUMPY", 6) != 0);
    int lines = 0;
    const char *p = text;
    while (want && p && *p) {
        for (int c = 0; c < 3; c++) {
            char *end;
            float v = strtof(p, &end);
            if (end == p || memcmp(&v, &want[lines * 3 + c], sizeof v) != 0) {
                fprintf(stderr, "%s line %d value %d: '%.20s', expected %.9g\n", csv, lines + 1, c, p,
                        (double)want[lines * 3 + c]);
                rt_failures++;
                free(want);
                free(text);
                return;
            }
            p = end;
            CHECK(*p == (c < 2 ? ',' : '\n'));
            if (*p) p++;
        }
        if (++lines > N) break;
    }
    CHECK(lines == N);
    free(want);
    free(text);
}

static int same_bits(const char *a, const char *b) {
    size_t la, lb;
    char *x = rt_read_file(a, &la), *y = rt_read_file(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

#define X_IN "--input", F("x=%s", W("x.npy"))
#define Y_IN "--input", F("y=%s", W("y.npy"))
#define CK "--weights", W("ck.safetensors")

/* ------------------------------------------------------------ cases */

/* Command-line errors: exit 2, one line naming the flag or name; nothing written. */
static void case_cli(void) {
    EXPECT(RUN(g_infer, "--help"), 0, "--input NAME=PATH", NULL);
    EXPECT(RUN(g_infer, "-h"), 0, "y            [3]  (3 values per example)  only for --metric", NULL);
    EXPECT(RUN(g_infer, "-h"), 0, "none are compiled in", NULL);
    EXPECT(RUN(g_embedded, "-h"), 0, "params are compiled in", NULL);
    EXPECT(RUN(g_infer, "--bogus"), 2, NULL, "fake_infer: error: unknown flag '--bogus'");
    EXPECT(RUN(g_infer, "stray"), 2, NULL, "unexpected argument 'stray'");
    EXPECT(RUN(g_infer, CK, X_IN), 2, NULL, "nothing to do: pass --output PATH and/or --metric");
    EXPECT(RUN(g_infer, X_IN, "--output", W("o.npy")), 2, NULL, "no weights: pass --weights PATH.safetensors");
    EXPECT(RUN(g_infer, CK, "--output", W("o.npy")), 2, NULL, "no data for input 'x': pass --input x=PATH");
    EXPECT(RUN(g_infer, CK, X_IN, "--metric"), 2, NULL,
           "no data for input 'y' (--metric needs every input): pass --input y=PATH");
    EXPECT(RUN(g_infer, CK, X_IN, Y_IN, "--output", W("o.npy")), 2, NULL,
           "--input y=...: the outputs do not depend on input 'y'; it is only read with --metric");
    EXPECT(RUN(g_infer, CK, "--input", "z=a.npy", "--output", W("o.npy")), 2, NULL,
           "--input z=...: model 'fake_softmax' has no input 'z' (its inputs: x, y)");
    EXPECT(RUN(g_infer, CK, X_IN, X_IN, "--output", W("o.npy")), 2, NULL, "--input x given twice");
    EXPECT(RUN(g_infer, CK, "--input", "x.npy", "--output", W("o.npy")), 2, NULL, "--input expects NAME=PATH, got 'x.npy'");
    EXPECT(RUN(g_infer, CK, X_IN, "--batch", "17", "--output", W("o.npy")), 2, NULL,
           "--batch 17 is larger than the model's maximum batch 16");
    EXPECT(RUN(g_infer, CK, X_IN, "--batch=0", "--output", W("o.npy")), 2, NULL, "--batch: 0 must be at least 1");
    EXPECT(RUN(g_infer, CK, X_IN, "--threads", "two", "--output", W("o.npy")), 2, NULL, "--threads: 'two' is not an integer");
    EXPECT(RUN(g_infer, CK, X_IN, "--metric=1"), 2, NULL, "--metric takes no value");
    /* Count flags have upper bounds (issue 36; docs/generated-code.md, "Flag bounds"). */
    EXPECT(RUN(g_infer, CK, X_IN, "--top-k", "1000000001", "--output", W("o.npy")), 2, NULL,
           "--top-k: 1000000001 is too large (at most 1000000000)");
    EXPECT(RUN(g_infer, CK, X_IN, "--threads", "99999999999", "--output", W("o.npy")), 2, NULL,
           "--threads: 99999999999 is too large (at most 4096)");
    EXPECT(RUN(g_infer, CK, "--generate", "100000001", "--prompt", "a"), 2, NULL,
           "--generate: 100000001 is too large (at most 100000000)");
    EXPECT(RUN(g_infer, CK, "--generate", "999999999999", "--prompt", "a"), 2, NULL,
           "--generate: 999999999999 is too large (at most 100000000)");
    EXPECT(RUN(g_infer, CK, X_IN, "--output"), 2, NULL, "--output needs a value");
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("a.npy"), "--output", W("b.npy")), 2, NULL, "--output PATH given twice");
    EXPECT(RUN(g_infer, CK, X_IN, "--output", "nope=o.npy"), 2, NULL, "the model has no output 'nope'");
    EXPECT(RUN(g_infer, "--weights=", X_IN, "--output", W("o.npy")), 2, NULL, "--weights: empty path");
    /* Only --input and --output repeat (once per name); any other flag twice is a usage error. */
    EXPECT(RUN(g_infer, CK, "--weights", W("other.safetensors"), X_IN, "--output", W("o.npy")), 2, NULL,
           F("--weights given twice (%s and %s)", W("ck.safetensors"), W("other.safetensors")));
    EXPECT(RUN(g_infer, CK, X_IN, "--batch", "4", "--batch=8", "--output", W("o.npy")), 2, NULL,
           "--batch given twice (4 and 8)");
    EXPECT(RUN(g_infer, CK, X_IN, "--threads", "1", "--threads", "1", "--output", W("o.npy")), 2, NULL,
           "--threads given twice (1 and 1)");
    EXPECT(RUN(g_infer, CK, X_IN, Y_IN, "--metric", "--metric"), 2, NULL, "--metric given twice");
    EXPECT(RUN(g_infer, "-h", "--help"), 0, "--weights PATH", NULL);
    /* A flag where a value belongs is a missing value, not a file named '--metric'. */
    EXPECT(RUN(g_infer, CK, X_IN, Y_IN, "--output", "--metric"), 2, NULL,
           "--output needs a value: --output PATH, found the flag '--metric'");
    EXPECT(RUN(g_infer, "--weights", "--input=x=a.npy", "--output", W("o.npy")), 2, NULL,
           "--weights needs a value: --weights PATH, found the flag '--input=x=a.npy'");
    CHECK(!rt_exists("--metric") && !rt_exists("--input=x=a.npy"));
    /* An output over a file the program reads: refused before anything is read or written. */
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("x.npy")), 2, NULL,
           F("--output %s would overwrite the file of --input x", W("x.npy")));
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("ck.safetensors")), 2, NULL,
           F("--output %s would overwrite the --weights file", W("ck.safetensors")));
    EXPECT(RUN(g_infer, CK, X_IN, Y_IN, "--metric", "--output", F("%s/../%s/y.npy", g_dir, strrchr(g_dir, '/') + 1)), 2,
           NULL, "would overwrite the file of --input y");
    CHECK(!rt_exists(W("o.npy")) && !rt_exists(W("a.npy")) && !rt_exists(W("b.npy")));
}

/* --output holds every example's forward outputs, whatever the batch and thread count. */
static void case_outputs(void) {
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("o.npy")), 0, NULL, NULL);
    float *o = load_out(W("o.npy"));
    for (int e = 0; o && e < N; e++) {
        float p[3];
        probs_of(e, p);
        for (int c = 0; c < 3; c++)
            if (fabsf(o[e * 3 + c] - p[c]) > 1e-6f) {
                fprintf(stderr, "example %d class %d: %.9g, expected %.9g\n", e, c, (double)o[e * 3 + c], (double)p[c]);
                rt_failures++;
            }
    }
    free(o);
    EXPECT(RUN(g_infer, CK, X_IN, "--batch", "8", "--threads", "2", "--output", W("o8.npy")), 0,
           "fake: set_threads(2)", NULL);
    EXPECT(RUN(g_infer, CK, X_IN, "--batch=1", "--output", W("o1.npy")), 0, NULL, NULL);
    CHECK(same_bits(W("o.npy"), W("o8.npy")));
    CHECK(same_bits(W("o.npy"), W("o1.npy")));
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);
    /* Other file formats for the same input, class indices one-hot encoded for --metric. */
    float xi[N * 4];
    for (int i = 0; i < N * 4; i++) xi[i] = g_x[i];
    FILE *f = fopen(W("x.csv"), "w");
    CHECK(f != NULL);
    for (int e = 0; f && e < N; e++)
        fprintf(f, "%.9g,%.9g,%.9g,%.9g\n", (double)xi[4 * e], (double)xi[4 * e + 1], (double)xi[4 * e + 2],
                (double)xi[4 * e + 3]);
    if (f) CHECK(fclose(f) == 0);
    EXPECT(RUN(g_infer, CK, "--input", F("x=%s", W("x.csv")), "--output", W("ocsv.npy")), 0, NULL, NULL);
    CHECK(same_bits(W("o.npy"), W("ocsv.npy")));
    /* --output PATH.csv: CSV text, one line per example, values that read back exactly. */
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("o.csv")), 0, NULL, NULL);
    check_csv_output(W("o.csv"), W("o.npy"));
}

/* --metric: the loss and accuracy over all examples, printed like the trainer's test lines
   (batch means weighted by the batch size). */
static void case_metric(void) {
    double loss = 0, hits = 0;
    for (int e = 0; e < N; e++) {
        float p[3];
        probs_of(e, p);
        int k = 0, t = 0;
        for (int c = 1; c < 3; c++) {
            if (p[c] > p[k]) k = c;
            if (g_y[e * 3 + c] > g_y[e * 3 + t]) t = c;
        }
        hits += k == t;
        loss -= log((double)p[t] + 1e-12);
    }
    const char *want = F("test loss: %.4f\ntest accuracy: %.4f\n", loss / N, hits / N);
    EXPECT(RUN(g_infer, CK, X_IN, Y_IN, "--metric"), 0, want, NULL);
    EXPECT(RUN(g_infer, CK, X_IN, "--input", F("y=%s", W("yi.npy")), "--metric", "--batch", "8"), 0, want, NULL);
    /* Both at once: outputs and metrics. */
    EXPECT(RUN(g_infer, CK, X_IN, Y_IN, "--metric", "--output", W("om.npy")), 0, want, NULL);
    CHECK(rt_exists(W("om.npy")));
    EXPECT(RUN(g_infer, CK, X_IN, "--input", F("y=%s", W("short.npy")), "--metric"), 1, NULL,
           "every input needs the same count");
}

/* Compiled-in params: no --weights needed, the same bits as --weights with those values;
   --weights overrides them. */
static void case_embedded(void) {
    cannl_error err;
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("w.npy")), 0, NULL, NULL);
    EXPECT(RUN(g_embedded, X_IN, "--output", W("e.npy")), 0, NULL, NULL);
    CHECK(same_bits(W("w.npy"), W("e.npy")));
    /* Other params through --weights: a fake_softmax checkpoint with b shifted. */
    float b[3] = {FAKE_EMBEDDED_B[0] + 1, FAKE_EMBEDDED_B[1], FAKE_EMBEDDED_B[2]};
    const cannl_tensor t[] = {{"w", CANNL_F32, 2, {4, 3}, (void *)FAKE_EMBEDDED_W}, {"b", CANNL_F32, 1, {3}, b}};
    CHECK_OK(cannl_checkpoint_save(W("other.safetensors"), t, 2, NULL, 0, &err));
    EXPECT(RUN(g_embedded, "--weights", W("other.safetensors"), X_IN, "--output", W("e2.npy")), 0, NULL, NULL);
    EXPECT(RUN(g_infer, "--weights", W("other.safetensors"), X_IN, "--output", W("w2.npy")), 0, NULL, NULL);
    CHECK(same_bits(W("w2.npy"), W("e2.npy")));
    CHECK(!same_bits(W("e.npy"), W("e2.npy")));
}

/* Several outputs: --output PATH writes PATH.NAME.npy (a .npy suffix replaced), NAME=PATH
   picks single outputs. */
static void case_names(void) {
    EXPECT(RUN(g_two, CK, X_IN, "--output", W("r.npy")), 0, NULL, NULL);
    CHECK(rt_exists(W("r.probs.npy")) && rt_exists(W("r.twice.npy")) && !rt_exists(W("r.npy")));
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("ref.npy")), 0, NULL, NULL);
    CHECK(same_bits(W("r.probs.npy"), W("ref.npy")));
    float *p = load_out(W("r.probs.npy")), *t = load_out(W("r.twice.npy"));
    for (int i = 0; p && t && i < N * 3; i++) CHECK(t[i] == 2 * p[i]);
    free(p);
    free(t);
    EXPECT(RUN(g_two, CK, X_IN, "--output", W("noext")), 0, NULL, NULL);
    CHECK(rt_exists(W("noext.probs.npy")) && rt_exists(W("noext.twice.npy")));
    EXPECT(RUN(g_two, CK, X_IN, "--output", F("twice=%s", W("only.npy"))), 0, NULL, NULL);
    CHECK(rt_exists(W("only.npy")) && !rt_exists(W("only.probs.npy")));
    EXPECT(RUN(g_two, CK, X_IN, "--output", W("s.npy"), "--output", F("probs=%s", W("p.npy"))), 0, NULL, NULL);
    CHECK(rt_exists(W("p.npy")) && rt_exists(W("s.twice.npy")) && !rt_exists(W("s.probs.npy")));
    EXPECT(RUN(g_two, CK, X_IN, "--output", F("probs=%s", W("p.npy")), "--output", F("probs=%s", W("q.npy"))), 2,
           NULL, "--output probs given twice");
    EXPECT(RUN(g_two, CK, X_IN, "--output", F("probs=%s", W("same.npy")), "--output", F("twice=%s", W("same.npy"))),
           2, NULL, "outputs 'probs' and 'twice' would both be written to");
    /* CSV through the scheme: PATH.csv gives PATH.NAME.csv. */
    EXPECT(RUN(g_two, CK, X_IN, "--output", W("r.csv")), 0, NULL, NULL);
    CHECK(!rt_exists(W("r.csv")));
    check_csv_output(W("r.probs.csv"), W("r.probs.npy"));
    check_csv_output(W("r.twice.csv"), W("r.twice.npy"));
    /* All or none: an output that cannot be written leaves every target as it was and no
       temporary behind, whichever output fails. */
    CHECK(rt_write_file(W("keep.npy"), "old", 3) == 0);
    EXPECT(RUN(g_two, CK, X_IN, "--output", F("probs=%s", W("ok.npy")), "--output", F("twice=%s", W("nodir/t.npy"))), 1,
           NULL, "nodir/t.npy: cannot create");
    EXPECT(RUN(g_two, CK, X_IN, "--output", F("probs=%s", W("nodir/p.npy")), "--output", F("twice=%s", W("ok.npy"))), 1,
           NULL, "nodir/p.npy: cannot create");
    CHECK(mkdir(W("adir"), 0755) == 0 || errno == EEXIST); /* rt_fresh_dir keeps folders */
    EXPECT(RUN(g_two, CK, X_IN, "--output", F("probs=%s", W("keep.npy")), "--output", F("twice=%s", W("adir"))), 2,
           NULL, "adir: it is a directory (cannl replaces only regular files you own)");
    CHECK(!rt_exists(W("ok.npy")));
    char *kept = rt_read_file(W("keep.npy"), NULL);
    CHECK(kept && strcmp(kept, "old") == 0);
    free(kept);
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);
    /* a path with '=' whose prefix is not an output is a path */
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("a=b.npy")), 0, NULL, NULL);
    CHECK(rt_exists(W("a=b.npy")));
    /* The temporaries a killed run left beside an output (its pid no longer runs) are removed;
       a live process's (pid 1) and other files' are not. */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    CHECK(dead > 0 && waitpid(dead, NULL, 0) == dead);
    const char *stale[] = {F("%s.tmp.%d", W("st.npy"), (int)dead), F("%s.tmp.%d.3", W("st.npy"), (int)dead)};
    const char *kept_tmp[] = {W("st.npy.tmp.1"), F("%s.tmp.%d", W("other.npy"), (int)dead)};
    for (int i = 0; i < 2; i++) CHECK(rt_write_file(stale[i], "x", 1) == 0 && rt_write_file(kept_tmp[i], "x", 1) == 0);
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("st.npy")), 0, NULL, NULL);
    for (int i = 0; i < 2; i++) CHECK(!rt_exists(stale[i]) && rt_exists(kept_tmp[i]));
    for (int i = 0; i < 2; i++) unlink(kept_tmp[i]);
}

/* Weights and data that do not fit: exit 1, the file and the problem; no output file. */
static void case_weights(void) {
    cannl_error err;
    const float w[12] = {0}, b[3] = {0}, b4[4] = {0};
    const cannl_meta other[] = {{CANNL_META_MODEL, "fake_quad"}};
    const cannl_tensor good[] = {{"w", CANNL_F32, 2, {4, 3}, (void *)w}, {"b", CANNL_F32, 1, {3}, (void *)b}};
    const cannl_tensor shape[] = {{"w", CANNL_F32, 2, {4, 3}, (void *)w}, {"b", CANNL_F32, 1, {4}, (void *)b4}};
    CHECK_OK(cannl_checkpoint_save(W("other.safetensors"), good, 2, other, 1, &err));
    CHECK_OK(cannl_checkpoint_save(W("missing.safetensors"), good, 1, NULL, 0, &err));
    CHECK_OK(cannl_checkpoint_save(W("shape.safetensors"), shape, 2, NULL, 0, &err));
    CHECK(rt_write_file(W("junk.safetensors"), "junk", 4) == 0);
    EXPECT(RUN(g_infer, "--weights", W("other.safetensors"), X_IN, "--output", W("o.npy")), 1, NULL,
           "other.safetensors: checkpoint of model 'fake_quad', but this is 'fake_softmax'");
    EXPECT(RUN(g_infer, "--weights", W("missing.safetensors"), X_IN, "--output", W("o.npy")), 1, NULL,
           "missing.safetensors: ");
    EXPECT(RUN(g_infer, "--weights", W("missing.safetensors"), X_IN, "--output", W("o.npy")), 1, NULL, "'b'");
    EXPECT(RUN(g_infer, "--weights", W("shape.safetensors"), X_IN, "--output", W("o.npy")), 1, NULL,
           "shape.safetensors: ");
    EXPECT(RUN(g_infer, "--weights", W("junk.safetensors"), X_IN, "--output", W("o.npy")), 1, NULL,
           "junk.safetensors: ");
    EXPECT(RUN(g_infer, "--weights", W("none.safetensors"), X_IN, "--output", W("o.npy")), 1, NULL,
           "none.safetensors: cannot open");
    /* Non-finite params are refused, as by `cannl gen --embed` (forward would print nan). */
    const float bnan[3] = {0, NAN, 0};
    const cannl_tensor nan[] = {{"w", CANNL_F32, 2, {4, 3}, (void *)w}, {"b", CANNL_F32, 1, {3}, (void *)bnan}};
    CHECK_OK(cannl_checkpoint_save(W("nan.safetensors"), nan, 2, NULL, 0, &err));
    EXPECT(RUN(g_infer, "--weights", W("nan.safetensors"), X_IN, "--output", W("o.npy")), 1, NULL,
           "nan.safetensors: param 'b' holds a non-finite value (nan) at element 1");
    EXPECT(RUN(g_infer, CK, "--input", F("x=%s", W("wide.npy")), "--output", W("o.npy")), 1, NULL,
           "wide.npy: 5 values per example, but input 'x' takes 4");
    EXPECT(RUN(g_infer, CK, "--input", F("x=%s", W("none.npy")), "--output", W("o.npy")), 1, NULL, "none.npy: ");
    /* One value per example for x, which forward reads: class indices (.npy, IDX, a 1-column
       CSV) or a single example's values as a 1-D array; never one-hot encoded for it. */
    write_f32(W("one.npy"), g_x, 1, (const int64_t[]){4});
    const unsigned char idx[8 + N] = {0, 0, 0x08, 1, 0, 0, 0, N};
    CHECK(rt_write_file(W("labels-idx1-ubyte"), idx, sizeof idx) == 0);
    CHECK(rt_write_file(W("col.csv"), "0\n1\n2\n", 6) == 0);
    const char *const one_value[] = {"yi.npy", "one.npy", "labels-idx1-ubyte", "col.csv"};
    for (size_t i = 0; i < sizeof one_value / sizeof one_value[0]; i++)
        EXPECT(RUN(g_infer, CK, "--input", F("x=%s", W(one_value[i])), "--output", W("o.npy")), 1, NULL,
               F("%s: 1 value per example, but input 'x' takes 4 (the forward pass reads it; ", W(one_value[i])));
    EXPECT(RUN(g_infer, CK, X_IN, "--output", W("no/dir/o.npy")), 1, NULL, "no/dir/o.npy: cannot create");
    CHECK(!rt_exists(W("o.npy")));
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);
}

/* cannl_npy_save: shapes, both dtypes, a 64-byte aligned header, and no file on failure. */
static void case_npy(void) {
    cannl_error err;
    const double d[6] = {1.5, -2, 3e-300, 4, 5, 6};
    CHECK_OK(cannl_npy_save(W("d.npy"), CANNL_F64, 3, (const int64_t[]){3, 1, 2}, d, &err));
    cannl_dataset ds;
    CHECK_OK(cannl_dataset_load(&ds, W("d.npy"), CANNL_FMT_AUTO, CANNL_F64, &err));
    CHECK(ds.count == 3 && ds.ndims == 2 && ds.dims[0] == 1 && ds.dims[1] == 2);
    CHECK(ds.data && memcmp(ds.data, d, sizeof d) == 0);
    cannl_dataset_free(&ds);
    size_t len;
    char *raw = rt_read_file(W("d.npy"), &len);
    CHECK(raw && len > sizeof d && (len - sizeof d) % 64 == 0 && memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0 &&
          raw[len - sizeof d - 1] == '\n');
    CHECK(raw && strstr(raw + 10, "'shape': (3,1,2), }") != NULL);
    free(raw);
    const float one[1] = {7};
    CHECK_OK(cannl_npy_save(W("v.npy"), CANNL_F32, 1, (const int64_t[]){1}, one, &err));
    raw = rt_read_file(W("v.npy"), &len);
    CHECK(raw && strstr(raw + 10, "'descr': '<f4', 'fortran_order': False, 'shape': (1,), }") != NULL);
    free(raw);
    CHECK_ERR(cannl_npy_save(W("no/dir/x.npy"), CANNL_F32, 1, (const int64_t[]){1}, one, &err), CANNL_E_IO,
              "no/dir/x.npy", "cannot create");
    CHECK_ERR(cannl_npy_save(W("x.npy"), CANNL_F32, 1, (const int64_t[]){-1}, one, &err), CANNL_E_ARG, "x.npy",
              "shape");
    /* cannl_csv_save: one line per first-axis index, float64 values that read back exactly. */
    const double dc[6] = {0.1, -2, 3e-300, 1.0 / 3, 5, 6e300};
    CHECK_OK(cannl_csv_save(W("d.csv"), CANNL_F64, 3, (const int64_t[]){3, 1, 2}, dc, &err));
    CHECK_OK(cannl_dataset_load(&ds, W("d.csv"), CANNL_FMT_CSV, CANNL_F64, &err));
    CHECK(ds.count == 3 && ds.elems == 2);
    CHECK(ds.data && memcmp(ds.data, dc, sizeof dc) == 0);
    cannl_dataset_free(&ds);
    raw = rt_read_file(W("d.csv"), NULL);
    CHECK(raw && strcmp(raw, "0.10000000000000001,-2\n3.0000000000000002e-300,0.33333333333333331\n"
                             "5,6.0000000000000003e+300\n") == 0);
    free(raw);
    CHECK_ERR(cannl_csv_save(W("no/dir/x.csv"), CANNL_F32, 1, (const int64_t[]){1}, one, &err), CANNL_E_IO,
              "no/dir/x.csv", "cannot create");
    CHECK(rt_count_matching(g_dir, ".tmp.") == 0);
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: test_infer CASE WORKDIR FAKE_INFER FAKE_INFER_EMBEDDED FAKE_INFER_TWO\n");
        return 2;
    }
    g_dir = argv[2];
    g_infer = argv[3];
    g_embedded = argv[4];
    g_two = argv[5];
    CHECK(rt_fresh_dir(g_dir) == 0);
    /* Under LeakSanitizer a leaking child would exit 1, like a run that fails on purpose;
       give leaks their own status so every expectation sees them. */
    setenv("LSAN_OPTIONS", "exitcode=99", 0);
    make_data();
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {{"cli", case_cli},           {"outputs", case_outputs}, {"metric", case_metric},
                 {"embedded", case_embedded}, {"names", case_names},     {"weights", case_weights},
                 {"npy", case_npy}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            cases[i].fn();
            return rt_finish(cases[i].name);
        }
    }
    fprintf(stderr, "test_infer: unknown case '%s'\n", argv[1]);
    return 2;
}
