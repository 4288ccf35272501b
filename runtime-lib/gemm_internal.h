/* gemm_internal.h - what gemm.c and the kernels of each instruction set share; not installed.
 *
 * A kernel is one thread's blocked product (gemm_kernel.h, compiled once per instruction
 * set and element type by gemm_avx512.c, gemm_avx2.c and gemm_base.c) and its tile sizes;
 * gemm.c picks the table of the instruction set chosen at run time and splits C between
 * threads in whole tiles. */
#ifndef CANNL_GEMM_INTERNAL_H
#define CANNL_GEMM_INTERNAL_H

#include "cannl_rt.h"
#include "rt_internal.h" /* cannl__amx_features */

typedef struct cannl__gemm_kernel {
    long mr, nr;        /* register tile of C: mr rows x nr columns */
    long kc, mc, nc;    /* cache blocks: K blocks of at most kc, A blocks of mc rows, B panels of nc columns */
    /* C[0:M, 0:N] (=|+=) alpha A B with one thread's workspace `slot` (mc kc elements, and kc
       times nc rounded up to a multiple of nr);
       A, B and C point to float or double, the kernel's element type. */
    void (*run)(long M, long N, long K, double alpha, const void *A, long a_m, long a_k, const void *B, long b_k,
                long b_n, void *C, long c_m, long c_n, int overwrite, void *slot);
    /* The same for A[i, p] at A[i * a_m + p] and B[p, j] at B[j * b_n + p], as dot products
       (gemm_dot.h: an order of their own) */
    void (*dot)(long M, long N, long K, double alpha, const void *A, long a_m, const void *B, long b_n, void *C,
                long c_m, long c_n, int overwrite);
} cannl__gemm_kernel;

/* gemm_base.c: baseline x86-64 (SSE2), or portable C elsewhere. */
extern const cannl__gemm_kernel cannl__gemm_base_f32, cannl__gemm_base_f64;
#ifdef CANNL_GEMM_X86
/* gemm_avx2.c (AVX2 + FMA) and gemm_avx512.c (AVX-512F), built with their own -march. */
extern const cannl__gemm_kernel cannl__gemm_avx2_f32, cannl__gemm_avx2_f64;
extern const cannl__gemm_kernel cannl__gemm_avx512_f32, cannl__gemm_avx512_f64;
/* gemm_bf16.c (AVX-512 + AVX512_BF16): float products in bf16 with fp32 accumulation, for a
   context set to CANNL_PRECISION_BF16; no dot form (gemm.c calls run). Its workspace, and that
   of the AMX kernel: mc kc / 2 + kc / 2 nc 4-byte words per thread. */
extern const cannl__gemm_kernel cannl__gemm_avx512bf16_f32;
#ifdef CANNL_GEMM_BF16_AMX
/* gemm_bf16_amx.c (AMX-BF16 tiles): the same contract where amx.c grants AMX-BF16. */
extern const cannl__gemm_kernel cannl__gemm_amxbf16_f32;
#endif
#endif

/* The int8 product of one thread (quant_kernel.h; quant.c quantises X and splits the weight
   rows between threads): X's M rows quantised to q (signed bytes), x_r bytes apart, zeros after
   K; xd their scales and xs their sums (sum over k of q[i, k]: the AVX-512 kernel's correction);
   C[i * c_x + j * c_w] (=|+=) alpha * scale[j] * (xd[i] * (float)S), S the exact int32 sum over k
   of q[i, k] * W[j * w_r + k]. */
#define CANNL__Q8_KERNEL(name)                                                                                 \
    void name(long M, long N, long K, float alpha, const uint8_t *X, long x_r, const float *xd, const int32_t *xs, \
              const int8_t *W, long w_r, const float *scale, float *C, long c_x, long c_w, int overwrite)
typedef CANNL__Q8_KERNEL((*cannl__q8_kernel));
CANNL__Q8_KERNEL(cannl__q8_base);
#ifdef CANNL_GEMM_X86
CANNL__Q8_KERNEL(cannl__q8_avx2);   /* quant_avx2.c: AVX2 */
CANNL__Q8_KERNEL(cannl__q8_avx512); /* quant_avx512.c: AVX-512 VNNI */
#ifdef CANNL_GEMM_AMX
CANNL__Q8_KERNEL(cannl__q8_amx); /* quant_amx.c: AMX-INT8 tiles (two or more rows of X) */
#endif
#endif

/* gemm.c: g's packing workspace when it holds `bytes` (quant.c's quantised X, between products:
   the same context is never in two products at once), else NULL. */
void *cannl__gemm_scratch(cannl_gemm *g, size_t bytes);
/* 1 when g's instruction set is AVX-512 and the CPU has VNNI and BW: the int8 products' kernel
   (quant.c), decided once when g is created. */
int cannl__gemm_vnni(const cannl_gemm *g);
/* The AMX operations g's products may use (cannl__amx_features when g's instruction set is
   AVX-512, else 0), decided once when g is created. */
int cannl__gemm_amx(const cannl_gemm *g);

#endif /* CANNL_GEMM_INTERNAL_H */
