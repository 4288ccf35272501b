/* roll_check.c — a short training run of one generated model, for comparing two builds
 * of the same spec (rolled repeat blocks against --no-roll: tests/opt/roll_parity.py).
 * Built from tests/opt/opt_levels.c: compile with -DOL_MODEL=<model> against <model>.c.
 *
 *   roll_check [--steps N] [--load CKPT] [--save CKPT] [--dump FILE]
 *
 * Creates the state from a fixed seed (20261121), fills the inputs with n = min(4, max_batch)
 * examples of deterministic values (splitmix64; ids in [0, min(ids, 1000))), optionally loads a
 * whole checkpoint (<model>_load, CANNL_LOAD_ALL), runs N (default 10) train_steps printing
 *   loss <step> <value>
 * then optionally saves a checkpoint, and prints per param (API order)
 *   param <name> <sum |x|> <sum x>      grad <name> <sum |g|>
 * --dump FILE writes every param's and gradient's values, binary: per tensor its name (a
 * 0-terminated string, "grad:" before a gradient's), an int64 count, count doubles.
 * Exit status 0, 1 on a load/save error, 2 when out of memory.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OL_STR_(x) #x
#define OL_STR(x) OL_STR_(x)
#define OL_CAT_(a, b) a##b
#define OL_CAT(a, b) OL_CAT_(a, b)

#ifndef OL_MODEL
#error "compile with -DOL_MODEL=<model name>"
#endif
#include OL_STR(OL_MODEL.h)

#define OL_API OL_CAT(OL_MODEL, _api)
#define OL_GRAD OL_CAT(OL_MODEL, _grad)
#define OL_PARAM OL_CAT(OL_MODEL, _param)
#define OL_SAVE OL_CAT(OL_MODEL, _save)
#define OL_LOAD OL_CAT(OL_MODEL, _load)
typedef OL_CAT(OL_MODEL, _real) ol_real;

#define OL_BATCH 4

static uint64_t rng_state = 0x243F6A8885A308D3u;
static double rng_uniform(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static void dump(FILE *f, const char *prefix, const char *name, const ol_real *v, int64_t count) {
    fprintf(f, "%s%s", prefix, name);
    fputc(0, f);
    fwrite(&count, sizeof count, 1, f);
    for (int64_t k = 0; k < count; ++k) {
        double x = v ? (double)v[k] : 0.0;
        fwrite(&x, sizeof x, 1, f);
    }
}

int main(int argc, char **argv) {
    int steps = 10;
    const char *load = NULL, *save = NULL, *dumpfile = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--load")) load = argv[i + 1];
        else if (!strcmp(argv[i], "--save")) save = argv[i + 1];
        else if (!strcmp(argv[i], "--dump")) dumpfile = argv[i + 1];
        else { fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
    }
    const cannl_model_api *api = &OL_API;
    const int64_t n = api->num_inputs == 0 ? 1 : (api->max_batch < OL_BATCH ? api->max_batch : OL_BATCH);
    void *m = api->create(20261121u);
    ol_real *inputs[16] = {0};
    if (!m || api->num_inputs > 16) return 2;
    for (int32_t i = 0; i < api->num_inputs; ++i) {
        const int64_t count = n * api->inputs[i].size;
        inputs[i] = (ol_real *)malloc((size_t)count * sizeof(ol_real));
        if (!inputs[i]) return 2;
        const int64_t ids = api->inputs[i].ids;
        for (int64_t k = 0; k < count; ++k) {
            if (ids > 0) ((int32_t *)(void *)inputs[i])[k] = (int32_t)(rng_uniform() * (double)(ids < 1000 ? ids : 1000));
            else inputs[i][k] = (ol_real)rng_uniform();
        }
    }
    cannl_error err;
    if (load && OL_LOAD((OL_MODEL *)m, load, CANNL_LOAD_ALL, &err) != CANNL_OK) {
        fprintf(stderr, "load: %s\n", err.msg);
        return 1;
    }
    const void *const *in = (const void *const *)inputs;
    for (int s = 1; s <= steps; ++s) printf("loss %d %.17g\n", s, api->train_step(m, in, n));
    if (save && OL_SAVE((OL_MODEL *)m, save, &err) != CANNL_OK) {
        fprintf(stderr, "save: %s\n", err.msg);
        return 1;
    }
    FILE *f = dumpfile ? fopen(dumpfile, "wb") : NULL;
    if (dumpfile && !f) return 1;
    for (int32_t p = 0; p < api->num_params; ++p) {
        int64_t count = 0, gcount = 0;
        const ol_real *v = OL_PARAM((OL_MODEL *)m, api->params[p].name, &count);
        const ol_real *g = OL_GRAD((OL_MODEL *)m, api->params[p].name, &gcount);
        double sa = 0, s = 0, ga = 0;
        for (int64_t k = 0; v && k < count; ++k) sa += fabs((double)v[k]), s += (double)v[k];
        for (int64_t k = 0; g && k < gcount; ++k) ga += fabs((double)g[k]);
        printf("param %s %.17g %.17g\n", api->params[p].name, sa, s);
        printf("grad %s %.17g\n", api->params[p].name, ga);
        if (f) {
            dump(f, "", api->params[p].name, v, count);
            if (g) dump(f, "grad:", api->params[p].name, g, gcount);
        }
    }
    if (f) fclose(f);
    for (int32_t i = 0; i < api->num_inputs; ++i) free(inputs[i]);
    api->destroy(m);
    return 0;
}
