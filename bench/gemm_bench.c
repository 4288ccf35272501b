/* gemm_bench.c - one matrix product of a generated model: the runtime's kernel (cannl_sgemm,
 * runtime-lib/gemm.c, on the instruction set cannl_isa_select picks: set CANNL_ISA to lower
 * it) against OpenBLAS's cblas_sgemm at the same shape.
 *
 * Usage: gemm_bench M N K a_m a_k b_k b_n c_m c_n OVERWRITE THREADS [dot]
 * with the arguments of a `cannl_sgemm` call of a model (bench.py reads them from the
 * generated .c, the batch count n replaced by the batch); `dot` times `cannl_sgemm_dot` (a_k
 * and b_k 1: the call the generator writes for `w3 . h2`, docs/gemm-tiles.md) instead. Times C = A B (OVERWRITE 1; cblas
 * with beta 0) or C += A B (0; beta 1) with each, the best of three rounds of repeats, and
 * prints one JSON line: both GFLOP/s by the wall clock, and by the process's CPU time (on one
 * thread, the speed while it had a core: steadier on a shared machine), and the kernel's ISA.
 * OpenBLAS picks its own kernel for the CPU; OPENBLAS_CORETYPE (Haswell, Nehalem, ...) lowers
 * it, as bench.py does for the lower paths. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cannl_rt.h"

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Wall-clock time, and the CPU time of the process: on one thread, the time the product had a
 * core (a machine shared with other jobs makes the wall clock slower, not the CPU time). */
typedef struct stamp {
    double wall, cpu;
} stamp;
static stamp now(void) { return (stamp){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_PROCESS_CPUTIME_ID)}; }

int main(int argc, char **argv) {
    const int dot = argc == 13 && strcmp(argv[12], "dot") == 0;
    if (argc != 12 && !dot) {
        fprintf(stderr, "usage: %s M N K a_m a_k b_k b_n c_m c_n OVERWRITE THREADS [dot]\n", argv[0]);
        return 2;
    }
    long v[9];
    for (int i = 0; i < 9; ++i) v[i] = atol(argv[i + 1]);
    const long M = v[0], N = v[1], K = v[2], a_m = v[3], a_k = v[4], b_k = v[5], b_n = v[6], c_m = v[7], c_n = v[8];
    const int overwrite = atoi(argv[10]) != 0, threads = atoi(argv[11]);
    if (dot && (a_k != 1 || b_k != 1)) {
        fprintf(stderr, "%s: dot needs a_k and b_k 1\n", argv[0]);
        return 2;
    }
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    cannl_gemm *g = cannl_gemm_create(CANNL_F32, threads);
    /* Sizes of the operands from their strides (each a dense M x K, K x N, M x N matrix). */
    const long na = (M - 1) * a_m + (K - 1) * a_k + 1, nb = (K - 1) * b_k + (N - 1) * b_n + 1;
    const long nc = (M - 1) * c_m + (N - 1) * c_n + 1;
    float *A = malloc(sizeof(float) * (size_t)na), *B = malloc(sizeof(float) * (size_t)nb);
    float *C = calloc((size_t)nc, sizeof(float));
    if (!g || !A || !B || !C) return 1;
    for (long i = 0; i < na; ++i) A[i] = (float)((i * 7919) % 1000) / 1000.f - 0.5f;
    for (long i = 0; i < nb; ++i) B[i] = (float)((i * 104729) % 1000) / 1000.f - 0.5f;
    const double flops = 2.0 * M * N * K;
    int reps = (int)(2e9 / flops);
    if (reps < 5) reps = 5;
    if (reps > 2000) reps = 2000;
    stamp best = {1e30, 1e30}, best_blas = {1e30, 1e30};
    /* cblas, row-major: C as it is (c_n == 1), or its transpose C^T = B^T A^T (c_m == 1);
     * then each operand as it is (column stride 1) or transposed (row stride 1). */
    const int ct = c_n != 1;
    const long rows = ct ? N : M, cols = ct ? M : N, ldc = ct ? c_n : c_m;
    const float *X = ct ? B : A, *Y = ct ? A : B;
    const long x_r = ct ? b_n : a_m, x_c = ct ? b_k : a_k, y_r = ct ? a_k : b_k, y_c = ct ? a_m : b_n;
    const int blas_ok = (c_n == 1 || c_m == 1) && (x_c == 1 || x_r == 1) && (y_c == 1 || y_r == 1);
    const int ta = x_c != 1, tb = y_c != 1;
    for (int round = 0; round < 3; ++round) {
        stamp t0 = now(), t1;
        for (int r = 0; r < reps; ++r)
            if (dot)
                cannl_sgemm_dot(g, M, N, K, 1.f, A, a_m, B, b_n, C, c_m, c_n, overwrite);
            else
                cannl_sgemm(g, M, N, K, 1.f, A, a_m, a_k, B, b_k, b_n, C, c_m, c_n, overwrite);
        t1 = now();
        if ((t1.wall - t0.wall) / reps < best.wall) best.wall = (t1.wall - t0.wall) / reps;
        if ((t1.cpu - t0.cpu) / reps < best.cpu) best.cpu = (t1.cpu - t0.cpu) / reps;
        if (blas_ok) {
            t0 = now();
            for (int r = 0; r < reps; ++r)
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)rows,
                            (int)cols, (int)K, 1.f, X, (int)(ta ? x_c : x_r), Y, (int)(tb ? y_c : y_r), overwrite ? 0.f : 1.f, C,
                            (int)ldc);
            t1 = now();
            if ((t1.wall - t0.wall) / reps < best_blas.wall) best_blas.wall = (t1.wall - t0.wall) / reps;
            if ((t1.cpu - t0.cpu) / reps < best_blas.cpu) best_blas.cpu = (t1.cpu - t0.cpu) / reps;
        }
    }
    printf("{\"M\": %ld, \"N\": %ld, \"K\": %ld, \"overwrite\": %d, \"threads\": %d, \"isa\": \"%s\", "
           "\"cannl_gflops\": %.2f, \"openblas_gflops\": %.2f, \"cannl_gflops_cpu\": %.2f, "
           "\"openblas_gflops_cpu\": %.2f}\n",
           M, N, K, overwrite, threads, cannl_isa_name(cannl_gemm_isa(g)), flops / best.wall * 1e-9,
           blas_ok ? flops / best_blas.wall * 1e-9 : 0.0, flops / best.cpu * 1e-9,
           blas_ok ? flops / best_blas.cpu * 1e-9 : 0.0);
    free(A);
    free(B);
    free(C);
    cannl_gemm_free(g);
    return 0;
}
