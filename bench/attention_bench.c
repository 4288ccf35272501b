/* attention_bench.c - the runtime's attention kernels (cannl_attention.h) alone, on a GPT's
 * training shape: BATCH sequences x HEADS heads of CTX positions and head width HD, causal, q, k
 * and v read from a fused qkv buffer (rows 3 x HEADS x HD apart, as the generated models pass
 * them), one (sequence, head) pair per call on one thread, as the generated loop calls them;
 * then decode steps (one query at each position against the keys before it).
 *
 * Usage: attention_bench [BATCH HEADS CTX HD REPS]   (default 32 4 128 32 30: gpt_char's
 * 8 sequences x 4 layers)
 * Build: cc -O2 -Iruntime-lib bench/attention_bench.c build/release/runtime-lib/libcannl_rt.a \
 *          -lm -fopenmp -o build/attention_bench
 * Prints one JSON line: the best of REPS rounds of the thread's CPU time, in ms, for all the
 * forward calls, all the backward calls, and the decode calls (one round over every position,
 * sequence and head), and a checksum of the outputs. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, rand_r */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cannl_attention.h"

static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *filled(size_t n, unsigned *seed) {
  float *p = malloc(n * sizeof *p);
  if (!p) {
    fprintf(stderr, "attention_bench: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; ++i) p[i] = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
  return p;
}

int main(int argc, char **argv) {
  if (argc != 1 && argc != 6) {
    fprintf(stderr, "usage: attention_bench [BATCH HEADS CTX HD REPS]\n");
    return 2;
  }
  const long b = argc > 1 ? atol(argv[1]) : 32, h = argc > 1 ? atol(argv[2]) : 4;
  const long t = argc > 1 ? atol(argv[3]) : 128, hd = argc > 1 ? atol(argv[4]) : 32;
  const int reps = argc > 1 ? atoi(argv[5]) : 30;
  if (b < 1 || h < 1 || t < 1 || hd < 1 || reps < 1) {
    fprintf(stderr, "attention_bench: BATCH, HEADS, CTX, HD and REPS must be positive\n");
    return 2;
  }
  const long d = h * hd, st = 3 * d; /* a row of qkv: q, k, v of every head */
  unsigned seed = 1;
  float *qkv = filled((size_t)(b * t * st), &seed), *dout = filled((size_t)(b * t * d), &seed);
  float *dqkv = calloc((size_t)(b * t * st), sizeof *dqkv), *o = filled((size_t)(b * t * d), &seed);
  float *lse = malloc((size_t)(b * h * t) * sizeof *lse), *delta = malloc((size_t)t * sizeof *delta);
  float od[1024], ld[1];
  if (!dqkv || !lse || !delta || hd > 1024) {
    fprintf(stderr, "attention_bench: out of memory (or HD > 1024)\n");
    return 1;
  }
  const cannl_attn_dims dims = {t, t, hd, hd, 0, 1, 1 / sqrt((double)hd)};
  double fwd = 1e30, bwd = 1e30, dec = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = cpu_s();
    for (long s = 0; s < b; ++s)
      for (long j = 0; j < h; ++j) {
        const float *x = qkv + s * t * st + j * hd;
        cannl_attention_forward_f32(&dims, x, st, x + d, st, x + 2 * d, st, o + s * t * d + j * hd, d,
                                    lse + (s * h + j) * t);
      }
    const double t1 = cpu_s();
    for (long s = 0; s < b; ++s)
      for (long j = 0; j < h; ++j) {
        const float *x = qkv + s * t * st + j * hd;
        float *g = dqkv + s * t * st + j * hd;
        cannl_attention_backward_f32(&dims, x, st, x + d, st, x + 2 * d, st, o + s * t * d + j * hd, d,
                                     dout + s * t * d + j * hd, d, lse + (s * h + j) * t, delta, g, st, g + d, st,
                                     g + 2 * d, st);
      }
    const double t2 = cpu_s();
    for (long s = 0; s < b; ++s)
      for (long pos = 0; pos < t; ++pos)
        for (long j = 0; j < h; ++j) {
          const cannl_attn_dims one = {1, pos + 1, hd, hd, pos, 1, dims.scale};
          const float *x = qkv + s * t * st + j * hd;
          cannl_attention_forward_f32(&one, x + pos * st, st, x + d, st, x + 2 * d, st, od, hd, ld);
        }
    const double t3 = cpu_s();
    fwd = t1 - t0 < fwd ? t1 - t0 : fwd;
    bwd = t2 - t1 < bwd ? t2 - t1 : bwd;
    dec = t3 - t2 < dec ? t3 - t2 : dec;
  }
  double sum = 0;
  for (long i = 0; i < b * t * d; ++i) sum += o[i];
  for (long i = 0; i < b * t * st; ++i) sum += dqkv[i];
  printf("{\"batch\": %ld, \"heads\": %ld, \"ctx\": %ld, \"hd\": %ld, \"forward_ms\": %.3f, \"backward_ms\": %.3f, "
         "\"total_ms\": %.3f, \"decode_ms\": %.3f, \"checksum\": %.6g}\n",
         b, h, t, hd, fwd * 1e3, bwd * 1e3, (fwd + bwd) * 1e3, dec * 1e3, sum);
  free(qkv), free(dout), free(dqkv), free(o), free(lse), free(delta);
  return 0;
}
