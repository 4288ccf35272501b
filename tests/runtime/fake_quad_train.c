/* fake_quad_train.c - the training program of fake_quad (a model without inputs). */
#include "fake_models.h"

int main(int argc, char **argv) { return cannl_train_main(&fake_quad_api, argc, argv); }
