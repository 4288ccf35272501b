/* fake_infer_embedded.c - fake_softmax's inference program with params compiled in
 * (see fake_infer.h), as `cannl gen --embed` makes it. */
#include "fake_infer.h"

int main(int argc, char **argv) {
    static const void *const params[] = {FAKE_EMBEDDED_W, FAKE_EMBEDDED_B};
    const cannl_infer_model model = {&fake_softmax_api, FAKE_FORWARD_READS, params, NULL, NULL};
    return cannl_infer_main(&model, argc, argv);
}
