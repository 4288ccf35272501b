/* opt_levels.c — the same short training run of one generated model, printed for comparison
 * across optimisation levels (tests/opt/compare.py reads the outputs of -O0, -O1 and -O2).
 *
 * Compiled once per (spec, level) against that model with
 *   -DOL_MODEL=<model>   the spec's model name (<model>.h, <model>_api, <model>_grad)
 * It creates the state and n examples of deterministic inputs (ol_common.h: the same data at
 * every level), and prints
 *   loss <step> <value>         for 10 train_steps
 *   grad <param> <sum |g|>      after the last step (<model>_grad, the API's promise)
 *   eval <loss>                 <model>_eval after training
 *   output <k> <sum>            <model>_forward's outputs after training
 *   param <name> <sum>          the params after training
 * every number with 17 significant digits. Exit status 0, or 2 when out of memory.
 */
#include "ol_common.h"

#define OL_STEPS 10

int main(void) {
    const cannl_model_api *api = &OL_API;
    void *m = NULL;
    ol_real *inputs[OL_MAX_INPUTS] = {0};
    int64_t n = 0;
    if (ol_setup(api, &m, inputs, &n)) return 2;
    const void *const *in = (const void *const *)inputs;
    for (int s = 1; s <= OL_STEPS; ++s) printf("loss %d %.17g\n", s, api->train_step(m, in, n));
    for (int32_t p = 0; p < api->num_params; ++p) {
        int64_t count = 0;
        const ol_real *g = OL_GRAD((OL_MODEL *)m, api->params[p].name, &count);
        double sum = 0;
        for (int64_t k = 0; g && k < count; ++k) sum += fabs((double)g[k]);
        printf("grad %s %.17g\n", api->params[p].name, sum);
    }
    double loss = 0, metrics[16] = {0};
    if (api->num_metrics > 16) return 2;
    api->eval(m, in, n, &loss, metrics);
    printf("eval %.17g\n", loss);
    for (int32_t k = 0; k < api->num_metrics; ++k) printf("metric %s %.17g\n", api->metric_names[k], metrics[k]);
    for (int32_t o = 0; o < api->num_outputs; ++o) {
        const int64_t count = n * api->outputs[o].size;
        ol_real *out = (ol_real *)malloc((size_t)count * sizeof(ol_real));
        void *outs[16] = {0};
        if (!out || api->num_outputs > 16) return 2;
        outs[o] = out;
        for (int32_t q = 0; q < api->num_outputs; ++q)
            if (!outs[q]) outs[q] = malloc((size_t)(n * api->outputs[q].size) * sizeof(ol_real));
        api->forward(m, in, n, (void *const *)outs);
        double sum = 0;
        for (int64_t k = 0; k < count; ++k) sum += fabs((double)out[k]);
        printf("output %d %.17g\n", (int)o, sum);
        for (int32_t q = 0; q < api->num_outputs; ++q) free(outs[q]);
    }
    for (int32_t p = 0; p < api->num_params; ++p) {
        int64_t count = 0;
        const ol_real *v = OL_PARAM((OL_MODEL *)m, api->params[p].name, &count);
        double sum = 0;
        for (int64_t k = 0; v && k < count; ++k) sum += fabs((double)v[k]);
        printf("param %s %.17g\n", api->params[p].name, sum);
    }
    for (int32_t i = 0; i < api->num_inputs; ++i) free(inputs[i]);
    api->destroy(m);
    return 0;
}
