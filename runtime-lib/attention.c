/* attention.c - cannl_attention.h: flash-style attention for one (sequence, head) pair, in
 * float and double (one body, attention_impl.h, included once per type by attention_inst.h),
 * in the widest vectors of the instruction set cannl_isa_select names (chosen at the first
 * call, as the matrix products' kernel is: attention_avx512.c's 64-byte vectors on AVX-512,
 * else this file's 32-byte ones, compiled for AVX2 + FMA and the baseline). */
#include "cannl_attention.h"
#include "rt_internal.h"

#include <math.h>
#include <stddef.h>

/* The routines in 32-byte vectors compiled for AVX2 + FMA and baseline x86-64, the loader
 * choosing (as CANNL_MULTIVERSION in cannl_rt.h does for the generated loops). */
#if defined(__x86_64__) && defined(__ELF__) && defined(__GLIBC__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__AVX2__)
#define CANNL_ATTN_MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CANNL_ATTN_MULTIVERSION
#endif

#define ATTN_VBYTES 32
#define ATTN_PREFIX cannl__attn_base_
#include "attention_inst.h"
#undef ATTN_VBYTES
#undef ATTN_PREFIX

#ifdef CANNL_GEMM_X86
/* attention_avx512.c: the same in 64-byte vectors */
#define ATTN_DECLARE(isa)                                                                                          \
  void cannl__attn_##isa##_forward_f32(const cannl_attn_dims *, const float *, int64_t, const float *, int64_t,   \
                                       const float *, int64_t, float *, int64_t, float *);                        \
  void cannl__attn_##isa##_forward_f64(const cannl_attn_dims *, const double *, int64_t, const double *, int64_t, \
                                       const double *, int64_t, double *, int64_t, double *);                     \
  void cannl__attn_##isa##_backward_f32(const cannl_attn_dims *, const float *, int64_t, const float *, int64_t,  \
                                        const float *, int64_t, const float *, int64_t, const float *, int64_t,   \
                                        const float *, float *, float *, int64_t, float *, int64_t, float *,      \
                                        int64_t);                                                                 \
  void cannl__attn_##isa##_backward_f64(const cannl_attn_dims *, const double *, int64_t, const double *,         \
                                        int64_t, const double *, int64_t, const double *, int64_t,                \
                                        const double *, int64_t, const double *, double *, double *, int64_t,     \
                                        double *, int64_t, double *, int64_t);                                    \
  void cannl__attn_##isa##_ring_f32(const cannl_attn_dims *, const float *, const float *, int64_t,               \
                                    const float *, int64_t, float *, float *);                                    \
  void cannl__attn_##isa##_ring_f64(const cannl_attn_dims *, const double *, const double *, int64_t,             \
                                    const double *, int64_t, double *, double *);
ATTN_DECLARE(avx512)
#define ATTN_PICK(name) (cannl__attn_isa() == CANNL_ISA_AVX512 ? cannl__attn_avx512_##name : cannl__attn_base_##name)
#else
#define ATTN_PICK(name) cannl__attn_base_##name
#endif

/* The public functions: the kernels of cannl_isa_select's instruction set (chosen once). */
void cannl_attention_forward_f32(const cannl_attn_dims *d, const float *q, int64_t q_st, const float *k, int64_t k_st,
                                 const float *v, int64_t v_st, float *o, int64_t o_st, float *lse) {
  ATTN_PICK(forward_f32)(d, q, q_st, k, k_st, v, v_st, o, o_st, lse);
}

void cannl_attention_forward_f64(const cannl_attn_dims *d, const double *q, int64_t q_st, const double *k,
                                 int64_t k_st, const double *v, int64_t v_st, double *o, int64_t o_st, double *lse) {
  ATTN_PICK(forward_f64)(d, q, q_st, k, k_st, v, v_st, o, o_st, lse);
}

void cannl_attention_backward_f32(const cannl_attn_dims *d, const float *q, int64_t q_st, const float *k,
                                  int64_t k_st, const float *v, int64_t v_st, const float *o, int64_t o_st,
                                  const float *dout, int64_t do_st, const float *lse, float *delta, float *dq,
                                  int64_t dq_st, float *dk, int64_t dk_st, float *dv, int64_t dv_st) {
  ATTN_PICK(backward_f32)(d, q, q_st, k, k_st, v, v_st, o, o_st, dout, do_st, lse, delta, dq, dq_st, dk, dk_st, dv,
                          dv_st);
}

void cannl_attention_backward_f64(const cannl_attn_dims *d, const double *q, int64_t q_st, const double *k,
                                  int64_t k_st, const double *v, int64_t v_st, const double *o, int64_t o_st,
                                  const double *dout, int64_t do_st, const double *lse, double *delta, double *dq,
                                  int64_t dq_st, double *dk, int64_t dk_st, double *dv, int64_t dv_st) {
  ATTN_PICK(backward_f64)(d, q, q_st, k, k_st, v, v_st, o, o_st, dout, do_st, lse, delta, dq, dq_st, dk, dk_st, dv,
                          dv_st);
}

void cannl_attention_ring_f32(const cannl_attn_dims *d, const float *q, const float *k, int64_t k_st, const float *v,
                              int64_t v_st, float *o, float *lse) {
  ATTN_PICK(ring_f32)(d, q, k, k_st, v, v_st, o, lse);
}

void cannl_attention_ring_f64(const cannl_attn_dims *d, const double *q, const double *k, int64_t k_st,
                              const double *v, int64_t v_st, double *o, double *lse) {
  ATTN_PICK(ring_f64)(d, q, k, k_st, v, v_st, o, lse);
}
