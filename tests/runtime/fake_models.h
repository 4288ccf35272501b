/* fake_models.h - two small hand-written models implementing
 * cannl_model_api, standing in for generated code in the trainer tests.
 *
 * fake_softmax: softmax regression, float32. Inputs x [2, 2] (4 values per
 *   example) and y [3] (one-hot), output probs [3], params w [4, 3] and b [3],
 *   metric "accuracy", max batch 16, lr 0.05. SGD with momentum 0.9, so the
 *   state also holds w.momentum_buffer and b.momentum_buffer.
 * fake_quad: no inputs, float64. Minimises (w - 3)^2 + (v0 - 1)^2 + (v1 + 2)^2
 *   over the scalar w and v [2], SGD with momentum 0.5, lr 0.1.
 *
 * Test hooks, environment variables read when a model is created:
 *   FAKE_SIGNAL_AT_STEP=N[:TERM|:HUP|:KILL]  train_step raises the signal (SIGINT without a
 *                                            suffix) right after step N
 *   FAKE_NAN_AT_STEP=N    step N leaves a nan in the first element of the second param's
 *                         momentum buffer (b.momentum_buffer, v.momentum_buffer)
 *   FAKE_STEP_DELAY_MS=N  every step sleeps N ms (for tests that signal from outside)
 *   FAKE_TERM_AT_EVAL=K   the K-th call of eval prints "fake: eval K" (each call does) and raises
 *                         SIGTERM (a signal during an evaluation)
 * set_threads prints "fake: set_threads(N)". */
#ifndef FAKE_MODELS_H
#define FAKE_MODELS_H

#include "cannl_rt.h"

extern const cannl_model_api fake_softmax_api;
extern const cannl_model_api fake_quad_api;
/* fake_bigram (fake_bigram.c): a byte-level bigram language model with integer inputs
 * tokens [8] and next [8] (ids < 256), output logits [8, 256], param table [256, 256]. */
extern const cannl_model_api fake_bigram_api;

#endif
