/* ol_common.h — what tests/opt's two drivers (opt_levels.c, roll_check.c) share: the model's
 * names from -DOL_MODEL=<model>, and its state with n = min(4, max_batch) examples of
 * deterministic inputs (splitmix64 from a fixed start: the same data in every build compared;
 * values in [0, 1), an `int` input's ids in [0, min(ids, 1000))). */
#ifndef OL_COMMON_H
#define OL_COMMON_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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
#define OL_MAX_INPUTS 16

static uint64_t rng_state = 0x243F6A8885A308D3u;
static double rng_uniform(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* The state (seed 20261121) in *m, its inputs in inputs[] (OL_MAX_INPUTS, zeroed by the caller)
 * and the batch in *n. 0, or 2 when out of memory or the model has too many inputs. */
static int ol_setup(const cannl_model_api *api, void **m, ol_real **inputs, int64_t *n) {
    *n = api->num_inputs == 0 ? 1 : (api->max_batch < OL_BATCH ? api->max_batch : OL_BATCH);
    *m = api->create(20261121u);
    if (!*m || api->num_inputs > OL_MAX_INPUTS) return 2;
    for (int32_t i = 0; i < api->num_inputs; ++i) {
        const int64_t count = *n * api->inputs[i].size;
        inputs[i] = (ol_real *)malloc((size_t)count * sizeof(ol_real)); /* int32_t fits in either */
        if (!inputs[i]) return 2;
        const int64_t ids = api->inputs[i].ids; /* an `int` input: ids in [0, ids) */
        for (int64_t k = 0; k < count; ++k) {
            if (ids > 0) ((int32_t *)(void *)inputs[i])[k] = (int32_t)(rng_uniform() * (double)(ids < 1000 ? ids : 1000));
            else inputs[i][k] = (ol_real)rng_uniform();
        }
    }
    return 0;
}

#endif
