/* roll_check.c — a short training run of one generated model, for comparing two builds
 * of the same spec (rolled repeat blocks against --no-roll: tests/opt/roll_parity.py).
 * Compile with -DOL_MODEL=<model> against <model>.c (the state and inputs: ol_common.h).
 *
 *   roll_check [--steps N] [--load CKPT] [--save CKPT] [--dump FILE]
 *
 * Creates the state from a fixed seed (20261121), fills the inputs with n = min(4, max_batch)
 * examples of deterministic values (splitmix64; ids in [0, min(ids, 1000))), optionally loads a
 * whole checkpoint (<model>_load, CANNL_LOAD_ALL), runs N (default 10) train_steps printing
 *   loss <step> <value>
 * then optionally saves a checkpoint, and prints per param (API order)
 *   param <name> <sum |x|> <sum x>      grad <name> <sum |g|>
 * --dump FILE writes every param's and gradient's values, then forward's outputs and eval's
 * loss and metrics on the same inputs after the steps (the inference routines), binary: per
 * tensor its name (a 0-terminated string, "grad:" before a gradient's, "output:" before an
 * output's, "eval:loss_and_metrics"), an int64 count, count doubles.
 * Exit status 0, 1 on a load/save error, 2 when out of memory.
 */
#include <string.h>

#include "ol_common.h"

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
    void *m = NULL;
    ol_real *inputs[OL_MAX_INPUTS] = {0};
    int64_t n = 0;
    if (ol_setup(api, &m, inputs, &n)) return 2;
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
    if (f) {  /* forward's outputs and eval's loss and metrics after the steps */
        for (int32_t o = 0; o < api->num_outputs && o < OL_MAX_INPUTS; ++o) {
            void *outs[OL_MAX_INPUTS] = {0};
            for (int32_t k = 0; k < api->num_outputs && k < OL_MAX_INPUTS; ++k)
                outs[k] = calloc((size_t)(n * api->outputs[k].size), sizeof(ol_real));
            api->forward(m, in, n, outs);
            dump(f, "output:", api->outputs[o].name, (const ol_real *)outs[o], n * api->outputs[o].size);
            for (int32_t k = 0; k < api->num_outputs && k < OL_MAX_INPUTS; ++k) free(outs[k]);
        }
        double loss = 0, metrics[64] = {0};
        if (api->num_metrics <= 64) {
            api->eval(m, in, n, &loss, metrics);
            ol_real v[65];
            v[0] = (ol_real)loss;
            for (int32_t k = 0; k < api->num_metrics; ++k) v[k + 1] = (ol_real)metrics[k];
            dump(f, "eval:", "loss_and_metrics", v, 1 + api->num_metrics);
        }
        fclose(f);
    }
    for (int32_t i = 0; i < api->num_inputs; ++i) free(inputs[i]);
    api->destroy(m);
    return 0;
}
