/* gradcheck.c — checks the gradients of one generated model against central finite
 * differences.
 *
 * Compiled once per spec, against that spec's generated model (f64), with
 *   -DGC_MODEL=<model>      the model name (the spec's `model` statement): the C symbols
 *                           <model>_api, <model>_param, <model>_grad and the header <model>.h
 *   -DGC_SPEC_NAME=<name>   the spec's file name without .cannl (for messages only)
 *   -DGC_MAIN=<function>    optional: the entry point is this function instead of main (tests/gpu
 *                           links every spec's harness into one program, gc_cuda_check_all, whose
 *                           main, tests/gpu/gc_all.c.in, calls the one named on its command line)
 *
 * What it does:
 *   1. creates the state (seed GC_SEED: the spec's initialisers) and fills every input with
 *      n = 3 examples of deterministic pseudo-random values, uniform in [-1, 1), or integer ids in [0, min(ids, 64)) for an `int` input (a spec
 *      without inputs runs with n = 1 and inputs = NULL);
 *   2. runs one train_step, copies <model>_grad of every param (the analytic gradient of
 *      the loss before the update) and restores the params to their values before the step;
 *      checks that eval's loss at those values equals the loss train_step returned;
 *   3. for every element p of every param, the central difference
 *          numeric = (L(p + h) - L(p - h)) / ((p + h) - (p - h)),   h = 1e-6 * max(1, |p|),
 *      with L the loss from <model>_eval (the denominator is the difference of the two
 *      rounded arguments, so representation error in p ± h does not count);
 *   4. passes an element when
 *          |analytic - numeric| <= 1e-6 * max(1, |analytic|, |numeric|)
 *      i.e. a relative error below 1e-6 for gradients of magnitude above 1, an absolute error
 *      below 1e-6 for smaller ones (so elements whose true gradient is 0 are not judged
 *      by the rounding noise of the difference quotient).
 *   It also fails when a param has no gradient (<model>_grad returns NULL), when a gradient
 *   has the wrong element count, when a whole gradient is zero (the check would say
 *   nothing: change the spec) or when a loss is not finite.
 *
 * Training mode (-DGC_TRAIN_MODE=1, the specs of dropout and batch_norm, whose training step
 * computes another function than eval): L is the loss train_step returns at step 1 with the
 * learning rate set to 0 (the params stay; the step count is set back to 0 before every
 * call, so dropout draws the same masks each time: a fixed mask), and batch_norm's running
 * statistics (params named *.running_mean, *.running_var, *.num_batches_tracked: state the
 * training step updates, with no gradient) are neither checked nor dumped.
 *
 * Usage: gradcheck [--batch N] [--dump DIR] [--no-fd] [--selftest] [--quiet]
 *   --batch N   n examples instead of 3 (1 <= N <= the model's MAX_BATCH)
 *   --dump DIR  also write DIR/loss.npy, DIR/input_<name>.npy (n examples), DIR/param_<name>.npy
 *               (values before the step) and DIR/grad_<name>.npy (analytic), float64 .npy in
 *               storage order, for tests/gradcheck/torch_check.py; DIR must exist
 *   --no-fd     skip the finite differences (only the checks of step 2, and the dump)
 *   --selftest  shows that the check catches a small error: adds 1e-5 * max(1, |g|) to the
 *               first element g of the first param's analytic gradient and passes only if
 *               exactly that element fails
 * Exit status: 0 pass, 1 a check failed, 2 bad usage or out of memory.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GC_STR_(x) #x
#define GC_STR(x) GC_STR_(x)
#define GC_CAT_(a, b) a##b
#define GC_CAT(a, b) GC_CAT_(a, b)

#ifndef GC_MODEL
#error "compile with -DGC_MODEL=<model name>"
#endif
#ifndef GC_SPEC_NAME
#define GC_SPEC_NAME GC_MODEL
#endif

#include GC_STR(GC_MODEL.h)

#define GC_API GC_CAT(GC_MODEL, _api)
#define GC_PARAM GC_CAT(GC_MODEL, _param)
#define GC_GRAD GC_CAT(GC_MODEL, _grad)
typedef GC_CAT(GC_MODEL, _real) gc_real;
typedef GC_MODEL gc_state;

#define GC_SEED 20261121u
#define GC_BATCH 3
#define GC_REL_H 1e-6
#define GC_TOL 1e-6

static const char *spec_name = GC_STR(GC_SPEC_NAME);

/* splitmix64: deterministic, platform-independent input values. */
static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}
static double rng_uniform(double lo, double hi) {
    return lo + (hi - lo) * ((double)(rng_next() >> 11) * (1.0 / 9007199254740992.0));
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "gradcheck %s: out of memory\n", spec_name);
        exit(2);
    }
    return p;
}

/* A float64 .npy file (format 1.0, C order). */
static int write_npy(const char *dir, const char *prefix, const char *name, const double *data,
                     const int64_t *dims, int ndims) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s.npy", dir, prefix, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "gradcheck %s: cannot write %s\n", spec_name, path);
        return 0;
    }
    char shape[512] = "";
    size_t len = 0;
    int64_t count = 1;
    for (int i = 0; i < ndims; ++i) {
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%lld%s", (long long)dims[i],
                                ndims == 1 ? "," : (i + 1 < ndims ? ", " : ""));
        count *= dims[i];
    }
    char header[640];
    int hl = snprintf(header, sizeof header,
                      "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }", shape);
    /* magic (6) + version (2) + header length (2) + header, padded with spaces to a
       multiple of 64 and ending in '\n' */
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    unsigned hlen = (unsigned)(hl + pad + 1);
    unsigned char hb[2] = {(unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    fwrite(hb, 1, 2, f);
    fwrite(header, 1, (size_t)hl, f);
    for (int i = 0; i < pad; ++i) fputc(' ', f);
    fputc('\n', f);
    /* little-endian doubles (every platform this runs on) */
    fwrite(data, sizeof(double), (size_t)count, f);
    if (fclose(f) != 0) {
        fprintf(stderr, "gradcheck %s: cannot write %s\n", spec_name, path);
        return 0;
    }
    return 1;
}

#ifndef GC_TRAIN_MODE
#define GC_TRAIN_MODE 0
#endif

static double eval_loss(gc_state *m, const void *const *inputs, int64_t n) {
    double loss = NAN;
    double metrics[16]; /* main checks num_metrics <= 16 */
    if (GC_TRAIN_MODE) { /* the training step's loss at step 1, lr 0 (see the top) */
        GC_API.set_step(m, 0);
        return GC_API.train_step(m, inputs, n);
    }
    GC_API.eval(m, inputs, n, &loss, metrics);
    return loss;
}

/* batch_norm's running statistics, in training mode: state without a gradient. */
static int is_state(const char *name) {
    static const char *const suffix[] = {".running_mean", ".running_var", ".num_batches_tracked"};
    if (!GC_TRAIN_MODE) return 0;
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; ++i) {
        size_t a = strlen(name), b = strlen(suffix[i]);
        if (a > b && strcmp(name + a - b, suffix[i]) == 0) return 1;
    }
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: gradcheck [--batch N] [--dump DIR] [--no-fd] [--selftest] [--quiet]\n");
    exit(2);
}

#ifdef GC_MAIN
int GC_MAIN(int argc, char **argv);
#define main GC_MAIN
#endif
int main(int argc, char **argv) {
    const char *dump_dir = NULL;
    int do_fd = 1, quiet = 0, selftest = 0;
    long batch = GC_BATCH;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) dump_dir = argv[++i];
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            char *end = NULL;
            batch = strtol(argv[++i], &end, 10);
            if (!end || *end || batch < 1) usage();
        }
        else if (strcmp(argv[i], "--selftest") == 0) selftest = 1;
        else if (strcmp(argv[i], "--no-fd") == 0) do_fd = 0;
        else if (strcmp(argv[i], "--quiet") == 0) quiet = 1;
        else usage();
    }

    const cannl_model_api *api = &GC_API;
    if (api->dtype != CANNL_F64 || sizeof(gc_real) != sizeof(double)) {
        fprintf(stderr, "gradcheck %s: the model must be generated with --dtype f64\n", spec_name);
        return 2;
    }
    if (api->num_metrics > 16) {
        fprintf(stderr, "gradcheck %s: more than 16 metrics\n", spec_name);
        return 2;
    }
    int failures = 0;
    gc_state *m = (gc_state *)api->create(GC_SEED);
    if (!m) {
        fprintf(stderr, "gradcheck %s: create failed\n", spec_name);
        return 2;
    }

    /* inputs */
    if (batch > api->max_batch) {
        fprintf(stderr, "gradcheck %s: --batch %ld is above the model's maximum %lld\n", spec_name,
                batch, (long long)api->max_batch);
        return 2;
    }
    const int64_t n = api->num_inputs > 0 ? (int64_t)batch : 1;
    double **input_data = xcalloc((size_t)api->num_inputs + 1, sizeof *input_data);
    /* what the model reads: input_data, or for an integer input (ids > 0) int32 ids, uniform
       in [0, min(ids, 64)) (the small ranges of these specs make ids repeat) */
    const void **model_inputs = xcalloc((size_t)api->num_inputs + 1, sizeof *model_inputs);
    for (int i = 0; i < api->num_inputs; ++i) {
        int64_t count = n * api->inputs[i].size;
        input_data[i] = xcalloc((size_t)count, sizeof(double));
        const int64_t ids = api->inputs[i].ids;
        if (ids > 0) {
            int32_t *id = xcalloc((size_t)count, sizeof(int32_t));
            const double range = (double)(ids < 64 ? ids : 64);
            for (int64_t j = 0; j < count; ++j) {
                id[j] = (int32_t)(rng_uniform(0.0, range));
                input_data[i][j] = (double)id[j];
            }
            model_inputs[i] = id;
        } else {
            for (int64_t j = 0; j < count; ++j) input_data[i][j] = rng_uniform(-1.0, 1.0);
            model_inputs[i] = input_data[i];
        }
    }
    const void *const *inputs = api->num_inputs > 0 ? (const void *const *)model_inputs : NULL;

    /* params before the step */
    const int np = api->num_params;
    double **before = xcalloc((size_t)np + 1, sizeof *before);
    double **analytic = xcalloc((size_t)np + 1, sizeof *analytic);
    gc_real **storage = xcalloc((size_t)np + 1, sizeof *storage);
    for (int i = 0; i < np; ++i) {
        const cannl_tensor_info *info = &api->params[i];
        int64_t count = -1;
        storage[i] = GC_PARAM(m, info->name, &count);
        if (!storage[i] || count != info->size) {
            fprintf(stderr, "gradcheck %s: FAIL: param '%s': _param gives %s (count %lld, expected %lld)\n",
                    spec_name, info->name, storage[i] ? "storage" : "NULL", (long long)count,
                    (long long)info->size);
            return 1;
        }
        before[i] = xcalloc((size_t)count, sizeof(double));
        memcpy(before[i], storage[i], (size_t)count * sizeof(double));
    }

    /* the analytic gradients */
    const double step_loss = api->train_step(m, inputs, n);
    if (!isfinite(step_loss)) {
        fprintf(stderr, "gradcheck %s: FAIL: train_step returned the loss %g\n", spec_name, step_loss);
        return 1;
    }
    for (int i = 0; i < np; ++i) {
        const cannl_tensor_info *info = &api->params[i];
        int64_t count = -1;
        const gc_real *g = GC_GRAD(m, info->name, &count);
        analytic[i] = xcalloc((size_t)info->size, sizeof(double));
        if (is_state(info->name)) {
            if (g) {
                fprintf(stderr, "gradcheck %s: FAIL: the running statistic '%s' has a gradient\n", spec_name,
                        info->name);
                ++failures;
            }
            continue;
        }
        if (!g) {
            fprintf(stderr, "gradcheck %s: FAIL: param '%s' has no gradient (_grad returned NULL)\n",
                    spec_name, info->name);
            ++failures;
            continue;
        }
        if (count != info->size) {
            fprintf(stderr, "gradcheck %s: FAIL: param '%s': gradient has %lld elements, expected %lld\n",
                    spec_name, info->name, (long long)count, (long long)info->size);
            ++failures;
            continue;
        }
        memcpy(analytic[i], g, (size_t)count * sizeof(double));
        int all_zero = 1, finite = 1;
        for (int64_t j = 0; j < count; ++j) {
            if (analytic[i][j] != 0.0) all_zero = 0;
            if (!isfinite(analytic[i][j])) finite = 0;
        }
        if (!finite) {
            fprintf(stderr, "gradcheck %s: FAIL: param '%s': the gradient is not finite\n", spec_name, info->name);
            ++failures;
        } else if (all_zero) {
            fprintf(stderr,
                    "gradcheck %s: FAIL: param '%s': the whole gradient is zero, so the check says "
                    "nothing (make the loss depend on it)\n",
                    spec_name, info->name);
            ++failures;
        }
    }
    for (int i = 0; i < np; ++i)
        memcpy(storage[i], before[i], (size_t)api->params[i].size * sizeof(double));
    if (GC_TRAIN_MODE) api->set_lr(m, 0.0);

    const double loss0 = eval_loss(m, inputs, n);
    if (!(fabs(loss0 - step_loss) <= 1e-12 * fmax(1.0, fabs(step_loss)))) {
        fprintf(stderr,
                "gradcheck %s: FAIL: eval's loss %.17g differs from the loss %.17g train_step "
                "returned, at the same params\n",
                spec_name, loss0, step_loss);
        ++failures;
    }
    if (!quiet)
        printf("gradcheck %s (model %s): %d params, %d inputs, n = %lld, loss %.12g\n", spec_name,
               api->name, np, api->num_inputs, (long long)n, step_loss);

    if (dump_dir) {
        int64_t dims[CANNL_MAX_DIMS + 1] = {0}; /* zeroed: gcc 12 at -O3 and gcc 13 cannot see that a
                                                   0-d write reads none of it (-Wmaybe-uninitialized) */
        int ok = write_npy(dump_dir, "", "loss", &step_loss, dims, 0);
        for (int i = 0; i < api->num_inputs; ++i) {
            const cannl_tensor_info *info = &api->inputs[i];
            dims[0] = n;
            for (int d = 0; d < info->ndims; ++d) dims[d + 1] = info->dims[d];
            ok = ok && write_npy(dump_dir, "input_", info->name, input_data[i], dims, info->ndims + 1);
        }
        for (int i = 0; i < np; ++i) {
            const cannl_tensor_info *info = &api->params[i];
            if (is_state(info->name)) continue;
            ok = ok && write_npy(dump_dir, "param_", info->name, before[i], info->dims, info->ndims);
            ok = ok && write_npy(dump_dir, "grad_", info->name, analytic[i], info->dims, info->ndims);
        }
        if (!ok) return 2;
    }

    if (selftest && np > 0) analytic[0][0] += 1e-5 * fmax(1.0, fabs(analytic[0][0]));
    int64_t total_bad = 0, first_bad_param = -1, first_bad_elem = -1;
    if (do_fd) {
        for (int i = 0; i < np; ++i) {
            const cannl_tensor_info *info = &api->params[i];
            if (is_state(info->name)) continue;
            double worst = 0.0, worst_abs = 0.0;
            int64_t worst_at = 0, bad = 0;
            for (int64_t j = 0; j < info->size; ++j) {
                const double p = before[i][j];
                const double h = GC_REL_H * fmax(1.0, fabs(p));
                const double pp = p + h, pm = p - h;
                storage[i][j] = pp;
                const double lp = eval_loss(m, inputs, n);
                storage[i][j] = pm;
                const double lm = eval_loss(m, inputs, n);
                storage[i][j] = p;
                const double numeric = (lp - lm) / (pp - pm);
                const double a = analytic[i][j];
                const double err = fabs(a - numeric);
                const double scale = fmax(1.0, fmax(fabs(a), fabs(numeric)));
                const double rel = err / scale;
                if (!(rel <= GC_TOL)) { /* also catches NaN */
                    if (total_bad++ == 0) {
                        first_bad_param = i;
                        first_bad_elem = j;
                    }
                    if (bad < 10)
                        fprintf(stderr,
                                "gradcheck %s: FAIL: param '%s' element %lld (of %lld): analytic "
                                "%.12g, numeric %.12g, error %.3g > %g * %.3g\n",
                                spec_name, info->name, (long long)j, (long long)info->size, a,
                                numeric, err, GC_TOL, scale);
                    ++bad;
                }
                if (!(rel <= worst)) {
                    worst = rel;
                    worst_abs = err;
                    worst_at = j;
                }
            }
            if (bad) ++failures;
            if (!quiet || bad)
                printf("  %-12s %5lld elements  max error %.3g (|err| %.3g at element %lld)%s\n",
                       info->name, (long long)info->size, worst, worst_abs, (long long)worst_at,
                       bad ? "  FAIL" : "");
            if (bad > 10)
                fprintf(stderr, "gradcheck %s: param '%s': %lld elements failed in all\n", spec_name,
                        info->name, (long long)bad);
        }
    }

    for (int i = 0; i < np; ++i) {
        free(before[i]);
        free(analytic[i]);
    }
    for (int i = 0; i < api->num_inputs; ++i) {
        if (model_inputs[i] != input_data[i]) free((void *)model_inputs[i]);
        free(input_data[i]);
    }
    free(model_inputs);
    free(before);
    free(analytic);
    free(storage);
    free(input_data);
    api->destroy(m);

    if (selftest) {
        if (failures == 1 && total_bad == 1 && first_bad_param == 0 && first_bad_elem == 0) {
            printf("gradcheck %s: selftest ok: the check caught the 1e-5 error planted in the "
                   "gradient of '%s' (and only it)\n", spec_name, np > 0 ? api->params[0].name : "");
            return 0;
        }
        fprintf(stderr, "gradcheck %s: selftest FAILED: expected exactly the planted error to be "
                "caught, got %d failing checks, %lld failing elements\n", spec_name, failures,
                (long long)total_bad);
        return 1;
    }
    if (failures) {
        fprintf(stderr, "gradcheck %s: FAILED (%d check%s)\n", spec_name, failures, failures == 1 ? "" : "s");
        return 1;
    }
    if (!quiet) printf("gradcheck %s: ok (tolerance %g)\n", spec_name, GC_TOL);
    return 0;
}
