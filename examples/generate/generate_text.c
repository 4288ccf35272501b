/* generate_text.c — text from a GPT compiled into the program (examples/generate).
 *
 *   generate_text [PROMPT [N [SEED]]]
 *
 * Writes PROMPT (default "And God said") and N (default 300) bytes sampled from the model
 * whose trained params the library holds (`cannl gen --embed`): no file is read. The
 * model's KV cache does the work: <model>_decode_prefill runs the prompt once, then
 * <model>_decode_step adds one byte at a time and gives the next position's logits. Past
 * the model's ctx the window becomes its last ctx/2 bytes, prefilled again (contract v1 §6).
 * Sampling: softmax(logits / 0.8) over the 40 most likely bytes, xorshift seeded by SEED. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include GPT_HEADER

/* The model's C API by name: API(_decode_step) is <model>_decode_step. */
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define API(x) CAT(GPT_MODEL, x)

typedef API(_real) real;

enum { TOP_K = 40 };
static const double temperature = 0.8;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* One byte from the logits: the TOP_K largest (ties: the lower byte), softmax at temperature. */
static int32_t pick(const real *logits, int64_t n) {
    int32_t top[TOP_K];
    int k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (k == TOP_K && !(logits[i] > logits[top[TOP_K - 1]])) continue;
        int at = k < TOP_K ? k++ : TOP_K - 1; /* the slot freed: a new one, or the smallest's */
        while (at > 0 && logits[top[at - 1]] < logits[i]) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = i;
    }
    double w[TOP_K], total = 0;
    for (int j = 0; j < k; j++) total += w[j] = exp(((double)logits[top[j]] - (double)logits[top[0]]) / temperature);
    double u = uniform() * total;
    for (int j = 0; j < k; j++)
        if ((u -= w[j]) < 0) return top[j];
    return top[k - 1];
}

int main(int argc, char **argv) {
    const char *prompt = argc > 1 ? argv[1] : "And God said";
    const long n = argc > 2 ? atol(argv[2]) : 300;
    if (argc > 3) rng ^= (uint64_t)strtoull(argv[3], NULL, 10) * 0x2545F4914F6CDD1Dull;
    const int64_t ctx = API(_decode_api).ctx;
    const int64_t vocab = API(_infer_api).outputs[0].dims[1];
    const int64_t len0 = (int64_t)strlen(prompt);
    if (vocab != 256 || len0 == 0 || n < 0) {
        fprintf(stderr, "generate_text: %s\n", vocab != 256 ? "the model is not byte-level (vocab 256)"
                                                            : "usage: generate_text [PROMPT [N [SEED]]]");
        return 2;
    }
    struct API(_infer) *s = API(_infer_create_embedded_batch)(1); /* one sequence */
    int32_t *text = malloc((size_t)(len0 + n) * sizeof *text);
    real *logits = malloc((size_t)vocab * sizeof *logits);
    if (!s || !text || !logits) {
        fprintf(stderr, "generate_text: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < len0; i++) text[i] = (unsigned char)prompt[i];
    fputs(prompt, stdout);
    int64_t len = len0, start = 0, cached = 0; /* the window text[start, len), cached of it in the cache */
    for (long step = 0; step < n; step++) {
        if (len - start > ctx) { /* past ctx: the last ctx/2 bytes (1 if ctx is 1), prefilled again */
            start = len - (ctx > 1 ? ctx / 2 : 1);
            cached = 0;
        }
        cannl_status st = cached == 0 ? API(_decode_prefill)(s, text + start, len - start, logits)
                                      : API(_decode_step)(s, text[len - 1], logits);
        if (st != CANNL_OK) {
            fprintf(stderr, "generate_text: decode failed\n");
            return 1;
        }
        cached = len - start;
        text[len] = pick(logits, vocab);
        putchar(text[len++]);
    }
    putchar('\n');
    API(_infer_destroy)(s);
    free(text);
    free(logits);
    return 0;
}
