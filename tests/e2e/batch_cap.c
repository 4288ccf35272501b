/* batch_cap.c — run-time-sized states (issue 36 item 7): a state created for a cap below the
 * model's maximum batch (create_batch, infer_create_batch) computes what the state at the
 * maximum computes, bit for bit, and refuses a larger batch.
 *
 * For MODEL (its <model>_api and <model>_infer_api tables): two training states from one seed,
 * one at the maximum, one at cap CAP, train STEPS steps on the same CAP examples (the losses
 * equal), then forward and eval on them (the outputs and the loss equal); the same for two
 * forward-only states; a batch of CAP + 1 gives NaN (training) or nothing (forward); a cap of 0 or
 * above the maximum gives no state. Under the sanitizers (the memory set) a state's buffers
 * sized for the cap are read and written only inside their allocation. Exit 0 when all hold.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include HEADER

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define M(name) CAT(MODEL, _##name)

#ifndef CAP
#define CAP 3
#endif
#define STEPS 3

static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "batch_cap: FAIL: %s\n", what);
        failures++;
    }
}

/* n examples of every input: ids in range for an integer input, small values otherwise. */
static void **make_inputs(const cannl_model_api *api, int64_t n) {
    void **in = calloc((size_t)api->num_inputs + 1, sizeof *in);
    uint64_t x = 12345;
    for (int32_t i = 0; i < api->num_inputs; i++) {
        const cannl_tensor_info *t = &api->inputs[i];
        const size_t count = (size_t)(n * t->size);
        if (t->ids > 0) {
            int32_t *v = malloc(count * sizeof *v);
            for (size_t k = 0; k < count; k++) {
                x = x * 6364136223846793005u + 1442695040888963407u;
                v[k] = (int32_t)((x >> 33) % (uint64_t)(t->ids < 1000 ? t->ids : 1000));
            }
            in[i] = v;
        } else {
            const size_t es = api->dtype == CANNL_F64 ? sizeof(double) : sizeof(float);
            char *v = malloc(count * es);
            for (size_t k = 0; k < count; k++) {
                x = x * 6364136223846793005u + 1442695040888963407u;
                const double d = (double)((x >> 40) % 1000) / 1000.0;
                if (api->dtype == CANNL_F64) ((double *)(void *)v)[k] = d;
                else ((float *)(void *)v)[k] = (float)d;
            }
            in[i] = v;
        }
    }
    return in;
}

static void **make_outputs(const cannl_model_api *api, int64_t n) {
    void **out = calloc((size_t)api->num_outputs + 1, sizeof *out);
    const size_t es = api->dtype == CANNL_F64 ? sizeof(double) : sizeof(float);
    for (int32_t k = 0; k < api->num_outputs; k++) out[k] = calloc((size_t)(n * api->outputs[k].size), es);
    return out;
}

static int same_outputs(const cannl_model_api *api, void **a, void **b, int64_t n) {
    const size_t es = api->dtype == CANNL_F64 ? sizeof(double) : sizeof(float);
    for (int32_t k = 0; k < api->num_outputs; k++)
        if (memcmp(a[k], b[k], (size_t)(n * api->outputs[k].size) * es) != 0) return 0;
    return 1;
}

/* Forward and eval of a state at the maximum (full) and one at CAP (small) on the same inputs. */
static void compare_forward(const cannl_model_api *api, void *full, void *small, const char *which) {
    char what[160];
    void **in = make_inputs(api, CAP + 1);
    void **of = make_outputs(api, CAP + 1), **os = make_outputs(api, CAP + 1);
    api->forward(full, (const void *const *)in, CAP, of);
    api->forward(small, (const void *const *)in, CAP, os);
    snprintf(what, sizeof what, "%s: forward at the cap equals the full state's", which);
    check(same_outputs(api, of, os, CAP), what);
    double lf = 0, ls = 0, mf[16] = {0}, ms[16] = {0};
    api->eval(full, (const void *const *)in, CAP, &lf, mf);
    api->eval(small, (const void *const *)in, CAP, &ls, ms);
    snprintf(what, sizeof what, "%s: eval at the cap equals the full state's (%.17g, %.17g)", which, lf, ls);
    check(lf == ls && isfinite(lf) && memcmp(mf, ms, sizeof mf) == 0, what);
    /* A batch above the cap: nothing done (the outputs keep a marker). */
    const size_t es = api->dtype == CANNL_F64 ? sizeof(double) : sizeof(float);
    for (int32_t k = 0; k < api->num_outputs; k++) memset(os[k], 0x7f, (size_t)((CAP + 1) * api->outputs[k].size) * es);
    api->forward(small, (const void *const *)in, CAP + 1, os);
    int untouched = 1;
    for (int32_t k = 0; k < api->num_outputs; k++)
        untouched = untouched && ((unsigned char *)os[k])[0] == 0x7f;
    snprintf(what, sizeof what, "%s: forward on CAP + 1 examples refused", which);
    check(untouched, what);
    for (int32_t i = 0; i < api->num_inputs; i++) free(in[i]);
    for (int32_t k = 0; k < api->num_outputs; k++) free(of[k]), free(os[k]);
    free(in), free(of), free(os);
}

int main(void) {
    const cannl_model_api *api = &M(api), *inf = &M(infer_api);
    if (CAP >= api->max_batch) {
        fprintf(stderr, "batch_cap: CAP %d is not below the model's maximum batch %lld\n", CAP,
                (long long)api->max_batch);
        return 1;
    }
    check(api->create_batch && inf->create_batch, "the tables have create_batch");
    check(api->create_batch(1, 0) == NULL, "a cap of 0: no state");
    check(api->create_batch(1, api->max_batch + 1) == NULL, "a cap above the maximum: no state");
    check(inf->create_batch(0, api->max_batch + 1) == NULL, "a forward-only cap above the maximum: no state");

    /* Training: the same losses step by step, then the same forward. */
    void *full = api->create(7), *small = api->create_batch(7, CAP);
    check(full && small, "created");
    if (!full || !small) return 1;
    void **in = make_inputs(api, CAP + 1);
    for (int s = 0; s < STEPS; s++) {
        const double a = api->train_step(full, (const void *const *)in, CAP);
        const double b = api->train_step(small, (const void *const *)in, CAP);
        char what[128];
        snprintf(what, sizeof what, "step %d: the loss at the cap equals the full state's (%.17g, %.17g)", s + 1, a, b);
        check(a == b && isfinite(a), what);
    }
    check(isnan(api->train_step(small, (const void *const *)in, CAP + 1)), "train_step on CAP + 1 examples: NaN");
    check(api->get_step(small) == STEPS, "the refused step left the step count");
    compare_forward(api, full, small, "training state");

    /* Forward-only states holding the trained params. */
    void *ifull = inf->create(0), *ismall = inf->create_batch(0, CAP);
    check(ifull && ismall, "forward-only states created");
    if (!ifull || !ismall) return 1;
    const size_t n = api->state_tensors(full, NULL, 0), ni = inf->state_tensors(ifull, NULL, 0);
    cannl_tensor *t = calloc(n + 1, sizeof *t), *tf = calloc(ni + 1, sizeof *tf), *ts = calloc(ni + 1, sizeof *ts);
    api->state_tensors(full, t, n);
    inf->state_tensors(ifull, tf, ni);
    inf->state_tensors(ismall, ts, ni);
    const size_t es = api->dtype == CANNL_F64 ? sizeof(double) : sizeof(float);
    for (int32_t i = 0; i < api->num_params; i++) {
        memcpy(tf[i].data, t[i].data, (size_t)api->params[i].size * es);
        memcpy(ts[i].data, t[i].data, (size_t)api->params[i].size * es);
    }
    compare_forward(inf, ifull, ismall, "forward-only state");

    for (int32_t i = 0; i < api->num_inputs; i++) free(in[i]);
    free(in), free(t), free(tf), free(ts);
    api->destroy(full), api->destroy(small);
    inf->destroy(ifull), inf->destroy(ismall);
    if (failures) return 1;
    printf("batch_cap: cap %d of %lld: %d steps, forward and eval equal the full state's; CAP + 1 refused\n", CAP,
           (long long)api->max_batch, STEPS);
    return 0;
}
