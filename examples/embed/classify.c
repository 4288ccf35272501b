/* classify.c — a C program with a trained model compiled in (examples/embed).
 *
 *   classify [CHECKPOINT]
 *
 * Classifies the four inputs of XOR with the params compiled into the library (no file is
 * read). Given a checkpoint, it also loads it into a second state and checks that both
 * states give the same outputs, bit for bit. Exit status 0 when every class is right. */
#include <stdio.h>
#include <string.h>

#include "xor.h"

int main(int argc, char **argv) {
    /* Caller-owned buffers: 4 examples of input `bits` [2] and of output `logits` [2]. */
    enum { N = 4 };
    const xor_real bits[N * 2] = {0, 0, 0, 1, 1, 0, 1, 1};
    xor_real logits[N * 2];
    const xor_real *inputs[XOR_NUM_INPUTS] = {NULL};
    inputs[XOR_INPUT_BITS] = bits; /* the target `label` is not needed by forward */
    xor_real *outputs[XOR_NUM_OUTPUTS] = {logits};

    xor_infer *s = xor_infer_create_embedded();
    if (!s) {
        fprintf(stderr, "classify: out of memory\n");
        return 1;
    }
    if (xor_infer_forward(s, inputs, N, outputs) != CANNL_OK) {
        fprintf(stderr, "classify: forward failed\n");
        xor_infer_destroy(s);
        return 1;
    }
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        int a = (int)bits[2 * i], b = (int)bits[2 * i + 1];
        int cls = logits[2 * i + 1] > logits[2 * i];
        printf("%d xor %d = %d   (logits %+.3f %+.3f)\n", a, b, cls, (double)logits[2 * i], (double)logits[2 * i + 1]);
        wrong += cls != (a ^ b);
    }
    /* A batch count outside 1..XOR_MAX_BATCH, or a NULL where forward needs a buffer (the
       input `bits`, an output), is refused, nothing written. */
    const xor_real *no_bits[XOR_NUM_INPUTS] = {NULL};
    xor_real *no_logits[XOR_NUM_OUTPUTS] = {NULL};
    if (xor_infer_forward(s, inputs, 0, outputs) != CANNL_E_ARG ||
        xor_infer_forward(s, inputs, XOR_MAX_BATCH + 1, outputs) != CANNL_E_ARG ||
        xor_infer_forward(s, no_bits, N, outputs) != CANNL_E_ARG || xor_infer_forward(s, inputs, N, no_logits) != CANNL_E_ARG ||
        xor_infer_forward(s, NULL, N, outputs) != CANNL_E_ARG || xor_infer_forward(s, inputs, N, NULL) != CANNL_E_ARG) {
        fprintf(stderr, "classify: a bad batch count or a missing buffer was accepted\n");
        wrong++;
    }

    if (argc > 1) {
        /* The same model from a checkpoint file: identical outputs. */
        xor_infer *t = xor_infer_create();
        cannl_error err;
        xor_real again[N * 2];
        xor_real *outputs2[XOR_NUM_OUTPUTS] = {again};
        if (!t || xor_infer_load(t, argv[1], &err) != CANNL_OK) {
            fprintf(stderr, "classify: %s\n", t ? err.msg : "out of memory");
            wrong++;
        } else if (xor_infer_forward(t, inputs, N, outputs2) != CANNL_OK || memcmp(again, logits, sizeof logits) != 0) {
            fprintf(stderr, "classify: the loaded params give other outputs than the embedded ones\n");
            wrong++;
        } else {
            printf("%s: the same outputs, bit for bit\n", argv[1]);
        }
        xor_infer_destroy(t);
    }
    xor_infer_destroy(s);
    return wrong ? 1 : 0;
}
