/* fma_peak.c — the machine's float32 FMA peak: independent fused multiply-adds on the
 * widest vectors the compiler targets (AVX-512, AVX2, SSE2 multiply + add, or scalar), on
 * THREADS OpenMP threads; bench/run.sh builds it once per instruction set (-march=x86-64-v4,
 * -v3, the baseline). Usage: fma_peak THREADS; prints one JSON line with the GFLOP/s (2 flops
 * per lane per FMA, or per multiply-add pair) by the wall clock, the same by the process's CPU
 * time (the speed of THREADS cores while the threads had them), and the instruction set. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

/* CHAINS independent accumulators: enough to cover the FMA latency, few enough to stay in
 * registers (16 ymm/xmm: 12 chains and the two constants). */
#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define CHAINS 16
#define ISA "avx512"
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define SET1(x) _mm512_set1_ps(x)
#define SUM(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define CHAINS 12
#define ISA "avx2"
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define SET1(x) _mm256_set1_ps(x)
static float SUM(vec v) {
    float t[8];
    _mm256_storeu_ps(t, v);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#elif defined(__SSE2__)
typedef __m128 vec;
#define LANES 4
#define CHAINS 12
#define ISA "sse2"
#define FMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#define SET1(x) _mm_set1_ps(x)
static float SUM(vec v) {
    float t[4];
    _mm_storeu_ps(t, v);
    return t[0] + t[1] + t[2] + t[3];
}
#else
typedef float vec;
#define LANES 1
#define CHAINS 12
#define ISA "scalar"
#define FMA(a, b, c) ((a) * (b) + (c))
#define SET1(x) (x)
#define SUM(v) (v)
#endif

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 1;
    const long iters = 50000000;
    double best = 1e30, best_cpu = 1e30;
    volatile float sink = 0;
    for (int round = 0; round < 3; ++round) {
        const double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
        {
            vec acc[CHAINS];
            const vec a = SET1(0.999999f), b = SET1(1e-7f);
            for (int c = 0; c < CHAINS; ++c) acc[c] = SET1((float)c);
            for (long i = 0; i < iters; ++i)
                for (int c = 0; c < CHAINS; ++c) acc[c] = FMA(acc[c], a, b);
            float s = 0;
            for (int c = 0; c < CHAINS; ++c) s += SUM(acc[c]);
            sink += s;
        }
        const double t = clock_s(CLOCK_MONOTONIC) - t0, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (t < best) best = t;
        if (c < best_cpu) best_cpu = c;
    }
    /* peak_gflops_cpu: per core while the threads had one (CPU time summed over the threads). */
    const double flops = 2.0 * LANES * CHAINS * (double)iters * threads;
    printf("{\"threads\": %d, \"isa\": \"%s\", \"lanes\": %d, \"peak_gflops\": %.1f, \"peak_gflops_cpu\": %.1f}\n",
           threads, ISA, LANES, flops / best * 1e-9, flops / best_cpu * 1e-9 * threads);
    return 0;
}
