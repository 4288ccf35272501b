/* fma_peak.c — the machine's float32 FMA peak: independent fused multiply-adds on the
 * widest vectors the compiler targets (AVX-512, AVX2 or scalar), on THREADS OpenMP threads.
 * Usage: fma_peak THREADS; prints one JSON line with the GFLOP/s (2 flops per lane per FMA). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define SET1(x) _mm512_set1_ps(x)
#define SUM(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define SET1(x) _mm256_set1_ps(x)
static float SUM(vec v) {
    float t[8];
    _mm256_storeu_ps(t, v);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#else
typedef float vec;
#define LANES 1
#define FMA(a, b, c) ((a) * (b) + (c))
#define SET1(x) (x)
#define SUM(v) (v)
#endif

enum { CHAINS = 16 };

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 1;
    const long iters = 50000000;
    double best = 1e30;
    volatile float sink = 0;
    for (int round = 0; round < 3; ++round) {
        double t0 = now_s();
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
        const double t = now_s() - t0;
        if (t < best) best = t;
    }
    printf("{\"threads\": %d, \"lanes\": %d, \"peak_gflops\": %.1f}\n", threads, LANES,
           2.0 * LANES * CHAINS * (double)iters * threads / best * 1e-9);
    return 0;
}
