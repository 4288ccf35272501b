/* fake_infer.h - the inference programs of fake_softmax used by test_infer.c:
 *   fake_infer           what the generator's <model>_infer.c looks like (no embedded params)
 *   fake_infer_embedded  the same with FAKE_EMBEDDED_W / FAKE_EMBEDDED_B compiled in
 *   fake_infer_two       a variant table with two outputs, "probs" and "twice" (2 * probs),
 *                        for the naming of several outputs
 * forward reads x only; y (the one-hot target) is needed by --metric. */
#ifndef FAKE_INFER_H
#define FAKE_INFER_H

#include "fake_models.h"

static const unsigned char FAKE_FORWARD_READS[] = {1, 0};

/* Trained-looking params of fake_softmax: w [4, 3], b [3]. */
static const float FAKE_EMBEDDED_W[12] = {0.5f,  -0.25f, 0.125f, -0.75f, 1.5f, 0.0625f,
                                          0.3f,  -0.1f,  0.9f,   0.2f,   0.4f, -0.6f};
static const float FAKE_EMBEDDED_B[3] = {0.01f, -0.02f, 0.03f};

#endif
