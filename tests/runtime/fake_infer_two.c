/* fake_infer_two.c - fake_softmax with a second output "twice" (2 * probs), for the
 * naming of several outputs (see fake_infer.h). */
#include "fake_infer.h"

#include <string.h>

static const cannl_tensor_info OUTPUTS[] = {{"probs", 1, {3}, 3, 0}, {"twice", 1, {3}, 3, 0}};

static void forward_two(void *m, const void *const *in, int64_t n, void *const *out) {
    fake_softmax_api.forward(m, in, n, out);
    const float *p = out[0];
    float *t = out[1];
    for (int64_t i = 0; i < 3 * n; i++) t[i] = 2 * p[i];
}

int main(int argc, char **argv) {
    cannl_model_api api = fake_softmax_api;
    api.name = "fake_softmax";
    api.num_outputs = 2;
    api.outputs = OUTPUTS;
    api.forward = forward_two;
    const cannl_infer_model model = {&api, FAKE_FORWARD_READS, NULL, NULL, NULL};
    return cannl_infer_main(&model, argc, argv);
}
