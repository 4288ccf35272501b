/* stream_read.c - the machine's read bandwidth, STREAM-style: the sum of a large float array
 * (4x the last-level cache at least; 1 GiB by default), read by T OpenMP threads (each its own
 * contiguous part, as decode's products split their weight rows), best of R passes. Prints
 * "read GB/s: X" (10^9 bytes per second). bench/decode_bench.sh runs it beside the decode
 * timings: the bandwidth bound of a decoded token is this figure over the bytes it reads.
 *
 *   cc -O3 -march=native -fopenmp bench/stream_read.c -o stream_read && ./stream_read [MiB] [reps] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 1024;
    const int reps = argc > 2 ? atoi(argv[2]) : 5;
    const size_t n = mib * 1024 * 1024 / sizeof(float);
    float *a = malloc(n * sizeof *a);
    if (!a) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) a[i] = (float)(i & 1023) * 1e-3f;
    double best = 1e30, sink = 0;
    for (int r = 0; r < reps; ++r) {
        const double t0 = now();
        double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (size_t blk = 0; blk < n / 4096; ++blk) {
            float s = 0;
            const float *p = a + blk * 4096;
#pragma omp simd reduction(+ : s)
            for (size_t i = 0; i < 4096; ++i) s += p[i];
            total += (double)s;
        }
        const double t = now() - t0;
        sink += total;
        if (t < best) best = t;
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("read GB/s: %.2f (%zu MiB, %d thread(s), best of %d; checksum %.3g)\n",
           (double)(n / 4096 * 4096) * sizeof(float) / best / 1e9, mib, threads, reps, sink);
    free(a);
    return 0;
}
