/* fake_bigram_train.c - the training program of fake_bigram, as the generator writes
 * <model>_train.c. */
#include "fake_models.h"

int main(int argc, char **argv) { return cannl_train_main(&fake_bigram_api, argc, argv); }
