/* fake_infer.c - the inference program of fake_softmax, as the generator writes
 * <model>_infer.c (see fake_infer.h). */
#include "fake_infer.h"

int main(int argc, char **argv) {
    const cannl_infer_model model = {&fake_softmax_api, FAKE_FORWARD_READS, NULL, NULL, NULL};
    return cannl_infer_main(&model, argc, argv);
}
