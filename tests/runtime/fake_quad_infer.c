/* fake_quad_infer.c - the inference program of fake_quad, a model without inputs (its
 * flags: --input has nothing to bind, the others work as for any model). */
#include "fake_models.h"

int main(int argc, char **argv) {
    static const unsigned char reads[1] = {0}; /* (no inputs) */
    const cannl_infer_model model = {&fake_quad_api, reads, NULL, NULL, NULL};
    return cannl_infer_main(&model, argc, argv);
}
