/* fake_bigram_infer.c - the inference program of fake_bigram, as the generator writes
 * <model>_infer.c: forward reads tokens; next is only for --metric. */
#include "fake_models.h"

int main(int argc, char **argv) {
    const cannl_infer_model model = {&fake_bigram_api, fake_bigram_api.forward_reads, NULL, NULL, NULL};
    return cannl_infer_main(&model, argc, argv);
}
