/* attention_decode.c - cannl_attention_decode_* (cannl_attention.h): a decode row's attention over
 * the KV cache, several heads per call (attention_decode_impl.h), in the widest vectors of the
 * instruction set cannl_isa_select names (chosen at the first call, as the matrix products'
 * kernel is: AVX-512 or AVX2 from attention_decode_avx512.c / _avx2.c, built with their own
 * -march; this file's 16-byte vectors on other CPUs), and cannl_attention_decode_parts. */
#include "cannl_attention.h"
#include "rt_internal.h"

#include <math.h>
#include <stddef.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#define AD_VBYTES 16
#define AD_PREFIX cannl__attn_decode_base
#include "attention_decode_types.h"
#undef AD_VBYTES
#undef AD_PREFIX

typedef void (*decode_f32)(const cannl_attn_dims *, int64_t, int64_t, int64_t, const float *, const float *, int64_t,
                           const float *, int64_t, float *, float *, int64_t);
typedef void (*decode_f64)(const cannl_attn_dims *, int64_t, int64_t, int64_t, const double *, const double *,
                           int64_t, const double *, int64_t, double *, double *, int64_t);

#ifdef CANNL_GEMM_X86
/* attention_decode_avx2.c, attention_decode_avx512.c */
void cannl__attn_decode_avx2_f32(const cannl_attn_dims *, int64_t, int64_t, int64_t, const float *, const float *,
                                 int64_t, const float *, int64_t, float *, float *, int64_t);
void cannl__attn_decode_avx2_f64(const cannl_attn_dims *, int64_t, int64_t, int64_t, const double *, const double *,
                                 int64_t, const double *, int64_t, double *, double *, int64_t);
void cannl__attn_decode_avx512_f32(const cannl_attn_dims *, int64_t, int64_t, int64_t, const float *, const float *,
                                   int64_t, const float *, int64_t, float *, float *, int64_t);
void cannl__attn_decode_avx512_f64(const cannl_attn_dims *, int64_t, int64_t, int64_t, const double *,
                                   const double *, int64_t, const double *, int64_t, double *, double *, int64_t);

/* The instruction set's kernels (rt_internal.h), chosen once (cannl_isa_select: the CPU's best,
 * lowered by CANNL_ISA); a race between first calls stores the same value. */
static int chosen = -1;

int cannl__attn_isa(void) {
  int c = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
  if (c < 0) {
    cannl_isa i = CANNL_ISA_SSE2;
    (void)cannl_isa_select(&i, NULL); /* a bad CANNL_ISA: the CPU's best (the products report it) */
    c = (int)i;
    __atomic_store_n(&chosen, c, __ATOMIC_RELAXED);
  }
  return c;
}
#endif

void cannl_attention_decode_f32(const cannl_attn_dims *d, int64_t h0, int64_t h1, int64_t group, const float *q,
                                const float *k, int64_t k_st, const float *v, int64_t v_st, float *o, float *lse,
                                int64_t lse_st) {
  decode_f32 fn = cannl__attn_decode_base_f32;
#ifdef CANNL_GEMM_X86
  const int c = cannl__attn_isa();
  if (c == CANNL_ISA_AVX512) fn = cannl__attn_decode_avx512_f32;
  else if (c == CANNL_ISA_AVX2) fn = cannl__attn_decode_avx2_f32;
#endif
  fn(d, h0, h1, group, q, k, k_st, v, v_st, o, lse, lse_st);
}

void cannl_attention_decode_f64(const cannl_attn_dims *d, int64_t h0, int64_t h1, int64_t group, const double *q,
                                const double *k, int64_t k_st, const double *v, int64_t v_st, double *o, double *lse,
                                int64_t lse_st) {
  decode_f64 fn = cannl__attn_decode_base_f64;
#ifdef CANNL_GEMM_X86
  const int c = cannl__attn_isa();
  if (c == CANNL_ISA_AVX512) fn = cannl__attn_decode_avx512_f64;
  else if (c == CANNL_ISA_AVX2) fn = cannl__attn_decode_avx2_f64;
#endif
  fn(d, h0, h1, group, q, k, k_st, v, v_st, o, lse, lse_st);
}

int64_t cannl_attention_decode_parts(int64_t rows, int64_t kv_heads, int parallel) {
  int64_t threads = 1;
#ifdef _OPENMP
  if (parallel && !omp_in_parallel()) threads = omp_get_max_threads();
#else
  (void)parallel;
#endif
  if (threads <= 1 || rows < 1) return 1;
  /* the fewest parts that give every thread the same number of (row, part) items, or at least
   * four items per thread */
  int64_t p = 1;
  while (p < kv_heads && (rows * p) % threads != 0 && rows * p < 4 * threads) ++p;
  return p;
}
