/* use_model.c — the program of the CMake consumer projects (tests/cmake): links the model
 * library `mymodel` built by cannl_add_model from tiny.cannl, trains a few steps on a fixed
 * fake batch and checks that the loss is finite and goes down. Prints `w1 <count>` so that a
 * test can see a changed spec reach the binary. */
#include <math.h>
#include <stdio.h>

#include "tiny.h"

#define N 6

int main(void) {
  tiny *m = tiny_create(42);
  if (!m) {
    fprintf(stderr, "tiny_create failed\n");
    return 1;
  }
  tiny_real x[N * 4], label[N * 3];
  for (int i = 0; i < N; ++i) {
    for (int j = 0; j < 4; ++j) x[i * 4 + j] = (tiny_real)(((i * 7 + j * 3) % 11) - 5) / 5;
    for (int k = 0; k < 3; ++k) label[i * 3 + k] = (tiny_real)(k == i % 3);
  }
  const tiny_real *const inputs[TINY_NUM_INPUTS] = {x, label};
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    last = tiny_train_step(m, inputs, N);
    if (!isfinite(last)) {
      fprintf(stderr, "step %d: loss %g is not finite\n", step, last);
      tiny_destroy(m);
      return 1;
    }
    if (step == 0) first = last;
  }
  int64_t count = 0;
  if (!tiny_param(m, "w1", &count)) {
    fprintf(stderr, "no param w1\n");
    tiny_destroy(m);
    return 1;
  }
  printf("loss %.4f -> %.4f\nw1 %lld\n", first, last, (long long)count);
  tiny_destroy(m);
  if (!(last < first)) {
    fprintf(stderr, "the loss did not go down\n");
    return 1;
  }
  return 0;
}
