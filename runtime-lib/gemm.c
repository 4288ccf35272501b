/* gemm.c - the matrix products of generated models: the context (the kernel of the
 * instruction set chosen at run time, and packing workspace) and the split of C between
 * threads.
 *
 * The kernels (gemm_kernel.h) are compiled once per instruction set: gemm_base.c for every
 * x86-64 (SSE2) or other CPU, gemm_avx2.c and gemm_avx512.c on x86-64 with their own -march
 * (CMakeLists.txt). cannl_gemm_create picks one, once, by cannl_isa_select (isa.c). */
#include "gemm_internal.h"

#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <xmmintrin.h> /* mirror_f32_rows: SSE, in every x86-64 */
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

/* A product below this many flops runs on one thread: waking a second costs more than it
 * saves (docs/gemm-tiles.md). */
#define CANNL__GEMM_PARALLEL_FLOPS 4.0e6

struct cannl_gemm {
    cannl_dtype dtype;
    cannl_isa isa;
    const cannl__gemm_kernel *kernel;
    int bf16;           /* kernel is gemm_bf16.c's or gemm_bf16_amx.c's (cannl_gemm_set_precision) */
    int vnni;           /* isa is AVX-512 and the CPU has VNNI and BW (the int8 products' kernel, quant.c) */
    int amx;            /* cannl__amx_features() when isa is AVX-512, else 0 */
    int slots;          /* threads that have a workspace slot */
    size_t slot_bytes;  /* a multiple of 64 */
    unsigned char *ws;  /* slots x slot_bytes */
};

static const cannl__gemm_kernel *kernel_for(cannl_isa isa, cannl_dtype dtype) {
    const int f64 = dtype == CANNL_F64;
#ifdef CANNL_GEMM_X86
    if (isa == CANNL_ISA_AVX512) return f64 ? &cannl__gemm_avx512_f64 : &cannl__gemm_avx512_f32;
    if (isa == CANNL_ISA_AVX2) return f64 ? &cannl__gemm_avx2_f64 : &cannl__gemm_avx2_f32;
#else
    (void)isa;
#endif
    return f64 ? &cannl__gemm_base_f64 : &cannl__gemm_base_f32;
}

cannl_gemm *cannl_gemm_create(cannl_dtype dtype, int threads) {
    if (dtype != CANNL_F32 && dtype != CANNL_F64) return NULL;
    cannl_gemm *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->dtype = dtype;
    (void)cannl_isa_select(&g->isa, NULL); /* a bad CANNL_ISA: the CPU's best (the programs refuse it) */
    g->kernel = kernel_for(g->isa, dtype);
#if defined(CANNL_GEMM_X86) && (defined(__GNUC__) || defined(__clang__))
    g->vnni = g->isa == CANNL_ISA_AVX512 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
    g->amx = g->isa == CANNL_ISA_AVX512 ? cannl__amx_features() : 0;
#endif
    g->slots = threads > 1 ? threads : 1;
    const cannl__gemm_kernel *k = g->kernel;
    /* A packed block, and a packed panel of B padded to whole slivers. */
    const size_t elems = (size_t)(k->mc * k->kc + k->kc * ((k->nc + k->nr - 1) / k->nr * k->nr));
    g->slot_bytes = (elems * cannl_dtype_size(dtype) + 63) / 64 * 64;
    g->ws = cannl_alloc(g->slot_bytes * (size_t)g->slots);
    if (!g->ws) {
        free(g);
        return NULL;
    }
    return g;
}

void cannl_gemm_free(cannl_gemm *g) {
    if (!g) return;
    cannl_free(g->ws);
    free(g);
}

cannl_isa cannl_gemm_isa(const cannl_gemm *g) { return g->isa; }

int cannl__gemm_vnni(const cannl_gemm *g) { return g->vnni; }

int cannl__gemm_amx(const cannl_gemm *g) { return g->amx; }

void *cannl__gemm_scratch(cannl_gemm *g, size_t bytes) {
    return g && bytes <= g->slot_bytes * (size_t)g->slots ? g->ws : NULL;
}

cannl_precision cannl_gemm_set_precision(cannl_gemm *g, cannl_precision p) {
    if (!g) return CANNL_PRECISION_FP32;
    g->kernel = kernel_for(g->isa, g->dtype);
    g->bf16 = 0;
#if defined(CANNL_GEMM_X86) && defined(CANNL_GEMM_BF16) && (defined(__GNUC__) || defined(__clang__))
    if (p == CANNL_PRECISION_BF16 && g->dtype == CANNL_F32 && g->isa == CANNL_ISA_AVX512) {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512bf16")) {
            const cannl__gemm_kernel *k = &cannl__gemm_avx512bf16_f32;
#ifdef CANNL_GEMM_BF16_AMX
            if (g->amx & CANNL__AMX_BF16) k = &cannl__gemm_amxbf16_f32;
#endif
            const size_t bytes = ((size_t)(k->mc * k->kc / 2 + k->kc / 2 * k->nc) * 4 + 63) / 64 * 64;
            if (bytes > g->slot_bytes) { /* more than the fp32 kernel's: a new workspace */
                unsigned char *ws = cannl_alloc(bytes * (size_t)g->slots);
                if (!ws) return CANNL_PRECISION_FP32;
                cannl_free(g->ws);
                g->ws = ws;
                g->slot_bytes = bytes;
            }
            g->kernel = k;
            g->bf16 = 1;
            return CANNL_PRECISION_BF16;
        }
    }
#else
    (void)p;
#endif
    return CANNL_PRECISION_FP32;
}

/* Workspace for `threads` threads (more than at creation: omp_set_num_threads since); false,
 * and the workspace as it was, when out of memory. */
static int grow(cannl_gemm *g, int threads) {
    unsigned char *ws = cannl_alloc(g->slot_bytes * (size_t)threads);
    if (!ws) return 0;
    cannl_free(g->ws);
    g->ws = ws;
    g->slots = threads;
    return 1;
}

/* The threads a product of M x N x K may use: OpenMP's count when it is large enough and not
   already inside a parallel region, else 1. */
static int product_threads(long M, long N, long K) {
#ifdef _OPENMP
    if (2.0 * (double)M * (double)N * (double)K >= CANNL__GEMM_PARALLEL_FLOPS && !omp_in_parallel())
        return omp_get_max_threads();
#else
    (void)M, (void)N, (void)K;
#endif
    return 1;
}

/* C (=|+=) alpha A B, elements of `es` bytes; C is split between threads in whole tiles. On one
   thread (a small product, or a call inside a parallel region) it packs into ws1: g's first slot,
   or the caller's own (product_sym's bands, a thread each). */
static void product_in(cannl_gemm *g, unsigned char *ws1, size_t es, long M, long N, long K, double alpha,
                       const char *A, long a_m, long a_k, const char *B, long b_k, long b_n, char *C, long c_m,
                       long c_n, int overwrite) {
    if (M <= 0 || N <= 0) return;
    const cannl__gemm_kernel *k = g->kernel;
    /* Columns are computed NR at a time (a partial last tile wastes its padding); rows have
       tiles of every height. */
    const double pad_m = (double)((M + k->nr - 1) / k->nr * k->nr) / (double)M;
    const double pad_n = (double)((N + k->nr - 1) / k->nr * k->nr) / (double)N;
    if ((c_n != 1 && c_m == 1 && pad_m <= 1.15 * pad_n) || (c_n == 1 && K >= 256 && pad_n > 1.15 * pad_m) ||
        (c_n == 1 && K >= 2048 && M <= 64 && N >= 2 * M && (size_t)c_m * es % 4096 != 0 &&
                      !(b_n == 1 && b_k * (long)es >= 1024))) {
        /* C's rows are its strided axis: compute C^T = B^T A^T, so that the tiles' vector stores
           run along C's contiguous axis (the same sums; each product's factors swapped), unless
           M is so far from a multiple of NR that the padding costs more than scalar stores.
           Likewise the other way when N wastes much of its last column tile and K is long (a
           convolution's weight gradient, 32 x 25 x n*784: 25 columns in a tile of 32), and
           when few rows meet many columns over a long K (a layer of 64 examples, 64 x 256 x
           3136, its weights stored [out, in]): the large operand then becomes A, read in
           place instead of packed (CPU time 75 -> 78 and 92 -> 94-98 GFLOP/s on AVX-512, 70
           -> 73-80 on AVX2). The tiles then store through a buffer, once per K block; not at a
           row stride of 4 KiB, where a column of stores falls into one L1 set (64 x 1024 x
           3136 fell from 80 to 34), and not when the large operand is a row-major B with rows
           1 KiB or more apart (a convolution's weight gradient, 64 x 800 x n*196 against the
           im2col rows): as A it would be packed anyway (gemm_kernel.h), and C stored element
           by element for nothing (100-122 -> 115-133 GFLOP/s, OpenBLAS 113-137). */
        const char *t = A;
        A = B, B = t;
        long x = M;
        M = N, N = x;
        x = a_m, a_m = b_n, b_n = x;
        x = a_k, a_k = b_k, b_k = x;
        x = c_m, c_m = c_n, c_n = x;
    }
    int threads = product_threads(M, N, K);
    if (threads > g->slots && !grow(g, threads)) threads = g->slots;
    /* Split the columns (each thread then packs all of A, M x K) or the rows (all of B, K x N),
       whichever packs less twice and has a tile for every thread. */
    const long mtiles = (M + k->mr - 1) / k->mr, ntiles = (N + k->nr - 1) / k->nr;
    const int by_cols = (M <= N && ntiles >= threads) || mtiles < threads;
    const long tiles = by_cols ? ntiles : mtiles;
    if (threads > tiles) threads = (int)tiles;
    if (threads <= 1) {
        k->run(M, N, K, alpha, A, a_m, a_k, B, b_k, b_n, C, c_m, c_n, overwrite, ws1);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const long lo = tiles * t / nt, hi = tiles * (t + 1) / nt;
        void *slot = g->ws + (size_t)t * g->slot_bytes;
        if (by_cols) {
            const long j0 = lo * k->nr, j1 = hi * k->nr < N ? hi * k->nr : N;
            if (j1 > j0)
                k->run(M, j1 - j0, K, alpha, A, a_m, a_k, B + (size_t)(j0 * b_n) * es, b_k, b_n,
                       C + (size_t)(j0 * c_n) * es, c_m, c_n, overwrite, slot);
        } else {
            const long i0 = lo * k->mr, i1 = hi * k->mr < M ? hi * k->mr : M;
            if (i1 > i0)
                k->run(i1 - i0, N, K, alpha, A + (size_t)(i0 * a_m) * es, a_m, a_k, B, b_k, b_n,
                       C + (size_t)(i0 * c_m) * es, c_m, c_n, overwrite, slot);
        }
    }
#endif
}

static void product(cannl_gemm *g, size_t es, long M, long N, long K, double alpha, const char *A, long a_m,
                    long a_k, const char *B, long b_k, long b_n, char *C, long c_m, long c_n, int overwrite) {
    product_in(g, g->ws, es, M, N, K, alpha, A, a_m, a_k, B, b_k, b_n, C, c_m, c_n, overwrite);
}

/* C (=|+=) alpha A B as dot products (gemm_dot.h), split between threads by blocks of 4 of the
   longer of M and N. */
static void product_dot(cannl_gemm *g, size_t es, long M, long N, long K, double alpha, const char *A, long a_m,
                        const char *B, long b_n, char *C, long c_m, long c_n, int overwrite) {
    if (M <= 0 || N <= 0) return;
    const cannl__gemm_kernel *k = g->kernel;
    int threads = product_threads(M, N, K);
    const int by_cols = N >= M;
    const long blocks = ((by_cols ? N : M) + 3) / 4;
    if (threads > blocks) threads = (int)blocks;
    if (threads <= 1) {
        k->dot(M, N, K, alpha, A, a_m, B, b_n, C, c_m, c_n, overwrite);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const long lo = blocks * t / nt * 4, hi = blocks * (t + 1) / nt * 4;
        const long end = by_cols ? (hi < N ? hi : N) : (hi < M ? hi : M);
        if (end > lo) {
            if (by_cols)
                k->dot(M, end - lo, K, alpha, A, a_m, B + (size_t)(lo * b_n) * es, b_n, C + (size_t)(lo * c_n) * es,
                       c_m, c_n, overwrite);
            else
                k->dot(end - lo, N, K, alpha, A + (size_t)(lo * a_m) * es, a_m, B, b_n, C + (size_t)(lo * c_m) * es,
                       c_m, c_n, overwrite);
        }
    }
#else
    (void)es; /* product_threads is 1 without OpenMP */
#endif
}

void cannl_sgemm(cannl_gemm *g, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t a_m,
                 int64_t a_k, const float *B, int64_t b_k, int64_t b_n, float *C, int64_t c_m, int64_t c_n,
                 int overwrite) {
    if (!g || g->dtype != CANNL_F32) return;
    product(g, sizeof(float), (long)M, (long)N, (long)K, alpha, (const char *)A, (long)a_m, (long)a_k,
            (const char *)B, (long)b_k, (long)b_n, (char *)C, (long)c_m, (long)c_n, overwrite);
}

void cannl_dgemm(cannl_gemm *g, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t a_m,
                 int64_t a_k, const double *B, int64_t b_k, int64_t b_n, double *C, int64_t c_m, int64_t c_n,
                 int overwrite) {
    if (!g || g->dtype != CANNL_F64) return;
    product(g, sizeof(double), (long)M, (long)N, (long)K, alpha, (const char *)A, (long)a_m, (long)a_k,
            (const char *)B, (long)b_k, (long)b_n, (char *)C, (long)c_m, (long)c_n, overwrite);
}

void cannl_sgemm_dot(cannl_gemm *g, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t a_m,
                     const float *B, int64_t b_n, float *C, int64_t c_m, int64_t c_n, int overwrite) {
    if (!g || g->dtype != CANNL_F32) return;
    if (g->bf16) { /* the bf16 kernel has one form: A[i, p] at A[i * a_m + p], B[p, j] at B[j * b_n + p] */
        product(g, sizeof(float), (long)M, (long)N, (long)K, alpha, (const char *)A, (long)a_m, 1, (const char *)B, 1,
                (long)b_n, (char *)C, (long)c_m, (long)c_n, overwrite);
        return;
    }
    product_dot(g, sizeof(float), (long)M, (long)N, (long)K, alpha, (const char *)A, (long)a_m, (const char *)B,
                (long)b_n, (char *)C, (long)c_m, (long)c_n, overwrite);
}

void cannl_dgemm_dot(cannl_gemm *g, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t a_m,
                     const double *B, int64_t b_n, double *C, int64_t c_m, int64_t c_n, int overwrite) {
    if (!g || g->dtype != CANNL_F64) return;
    product_dot(g, sizeof(double), (long)M, (long)N, (long)K, alpha, (const char *)A, (long)a_m, (const char *)B,
                (long)b_n, (char *)C, (long)c_m, (long)c_n, overwrite);
}

/* C = alpha A A^T by bands of SYM_COLS columns: band j0 computes its rows up to j0 + SYM_COLS (the
 * diagonal block and above it) with the product above, then each element below the diagonal
 * takes its mirror's value. B[p, j] = A[j, p]: the band's B is A from row j0, b_k = a_k, b_n = a_m.
 * Bands of columns rather than rows: each band's B is one sliver, packed once in all (N x K), and
 * its A (the rows above) is read in place, where bands of rows packed both again for every band
 * (about 10% of the product's time at N = 128, 352). Element (i, j) and (j, i) of the full
 * product sum the same terms in the same order (the kernel's order does not depend on the blocks
 * of M and N it is handed), so the mirror is what the full product would give, bit for bit. */
enum { SYM_COLS = 32 };

/* C[i, j] = C[j, i] for j < i < N, by MIRROR_B x MIRROR_B blocks (a block and its mirror's lines
 * stay in L1), each element copied as its own type (cannl_sgemm_sym: float, _dgemm_sym: double; a
 * memcpy of a run-time size per element was most of the copy's time). A row-major float C goes by
 * 4 x 4 blocks transposed in SSE registers below the diagonal's blocks (cannl_sgemm_sym at 1 thread,
 * AVX-512: N = 128, K = 128 27.8 -> 25.8 us; N = 352, K = 128 182 -> 165 us). */
enum { MIRROR_B = 16 };
#define MIRROR_FN(name, T)                                                                        \
    static void name(long N, T *c, long c_m, long c_n) {                                          \
        for (long i0 = 0; i0 < N; i0 += MIRROR_B)                                                 \
            for (long j0 = 0; j0 <= i0; j0 += MIRROR_B)                                           \
                for (long i = i0; i < N && i < i0 + MIRROR_B; ++i)                                \
                    for (long j = j0; j < i && j < j0 + MIRROR_B; ++j)                            \
                        c[i * c_m + j * c_n] = c[j * c_m + i * c_n];                              \
    }
MIRROR_FN(mirror_f32, float)
MIRROR_FN(mirror_f64, double)
#undef MIRROR_FN

#ifdef __SSE2__
/* mirror_f32 for c_n = 1: the blocks of 4 x 4 strictly below the diagonal's by register
 * transposes, then the rest (the diagonal's blocks, and the rows and columns past the last
 * whole block) element by element. */
static void mirror_f32_rows(long N, float *c, long c_m) {
    const long n4 = N / 4 * 4;
    for (long i0 = 4; i0 < n4; i0 += 4)
        for (long j0 = 0; j0 < i0; j0 += 4) {
            __m128 r0 = _mm_loadu_ps(c + j0 * c_m + i0), r1 = _mm_loadu_ps(c + (j0 + 1) * c_m + i0);
            __m128 r2 = _mm_loadu_ps(c + (j0 + 2) * c_m + i0), r3 = _mm_loadu_ps(c + (j0 + 3) * c_m + i0);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(c + i0 * c_m + j0, r0), _mm_storeu_ps(c + (i0 + 1) * c_m + j0, r1);
            _mm_storeu_ps(c + (i0 + 2) * c_m + j0, r2), _mm_storeu_ps(c + (i0 + 3) * c_m + j0, r3);
        }
    for (long i = 1; i < N; ++i)
        for (long j = i < n4 ? i / 4 * 4 : 0; j < i; ++j) c[i * c_m + j] = c[j * c_m + i];
}
#endif

static void mirror(size_t es, long N, char *C, long c_m, long c_n) {
    if (es == sizeof(float)) {
#ifdef __SSE2__
        if (c_n == 1) {
            mirror_f32_rows(N, (float *)C, c_m);
            return;
        }
#endif
        mirror_f32(N, (float *)C, c_m, c_n);
    } else if (es == sizeof(double)) {
        mirror_f64(N, (double *)C, c_m, c_n);
    } else {
        for (long i = 1; i < N; ++i)
            for (long j = 0; j < i; ++j)
                memcpy(C + (size_t)(i * c_m + j * c_n) * es, C + (size_t)(j * c_m + i * c_n) * es, es);
    }
}

/* Band j0 of product_sym into ws1 (one thread): its rows above the diagonal block and the block's
 * first half of rows (all h columns), then the block's other half of rows (its last h - h / 2
 * columns: a half tile where h / 2 is NR / 2); the block's corner below the diagonal, computed
 * for nothing, is a quarter of it (N = 128, K = 128: 25.6 -> 24.6 us; K = 352: 69 -> 66 us). */
static void sym_band(cannl_gemm *g, unsigned char *ws1, size_t es, long N, long K, double alpha, const char *A,
                     long a_m, long a_k, char *C, long c_m, long c_n, long j0) {
    const long h = N - j0 < SYM_COLS ? N - j0 : SYM_COLS, j1 = j0 + h / 2;
    product_in(g, ws1, es, j1, h, K, alpha, A, a_m, a_k, A + (size_t)(j0 * a_m) * es, a_k, a_m,
               C + (size_t)(j0 * c_n) * es, c_m, c_n, 1);
    product_in(g, ws1, es, j0 + h - j1, j0 + h - j1, K, alpha, A + (size_t)(j1 * a_m) * es, a_m, a_k,
               A + (size_t)(j1 * a_m) * es, a_k, a_m, C + (size_t)(j1 * (c_m + c_n)) * es, c_m, c_n, 1);
}

static void product_sym(cannl_gemm *g, size_t es, long N, long K, double alpha, const char *A, long a_m, long a_k,
                        char *C, long c_m, long c_n) {
    const long bands = (N + SYM_COLS - 1) / SYM_COLS;
    /* The bands between threads when the triangle is worth it (each band's product alone is
       mostly below CANNL__GEMM_PARALLEL_FLOPS: Muon's 128 x 352 gram matrix ran on one thread),
       the tallest first; each band computed by one thread, in its own slot. */
    int threads = product_threads(N, (N + 1) / 2, K);
    if (threads > bands) threads = (int)bands;
    if (threads > g->slots && !grow(g, threads)) threads = g->slots;
    if (threads <= 1) {
        for (long j0 = 0; j0 < N; j0 += SYM_COLS) sym_band(g, g->ws, es, N, K, alpha, A, a_m, a_k, C, c_m, c_n, j0);
    } else {
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (long b = bands - 1; b >= 0; --b)
            sym_band(g, g->ws + (size_t)omp_get_thread_num() * g->slot_bytes, es, N, K, alpha, A, a_m, a_k, C, c_m,
                     c_n, b * SYM_COLS);
#endif
    }
    mirror(es, N, C, c_m, c_n);
}

void cannl_sgemm_sym(cannl_gemm *g, int64_t N, int64_t K, float alpha, const float *A, int64_t a_m, int64_t a_k,
                     float *C, int64_t c_m, int64_t c_n) {
    if (!g || g->dtype != CANNL_F32) return;
    product_sym(g, sizeof(float), (long)N, (long)K, alpha, (const char *)A, (long)a_m, (long)a_k, (char *)C, (long)c_m,
                (long)c_n);
}

void cannl_dgemm_sym(cannl_gemm *g, int64_t N, int64_t K, double alpha, const double *A, int64_t a_m, int64_t a_k,
                     double *C, int64_t c_m, int64_t c_n) {
    if (!g || g->dtype != CANNL_F64) return;
    product_sym(g, sizeof(double), (long)N, (long)K, alpha, (const char *)A, (long)a_m, (long)a_k, (char *)C,
                (long)c_m, (long)c_n);
}
