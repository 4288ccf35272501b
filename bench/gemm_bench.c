/* gemm_bench.c — one contraction of a generated model against OpenBLAS at the same shape.
 *
 * Built by bench/run.sh with -DCANNL_BENCH_MODEL_C='"<path>/<model>.c"': the generated
 * model source is included so that its own `cannl_gemm` (templates/c/gemm.c.mustache, as
 * emitted for that model) is the code timed. Usage:
 *     gemm_bench M N K a_m a_k b_k b_n c_m c_n THREADS
 * with the arguments of a `cannl_gemm` call of the model (bench.py reads them from the
 * generated .c, the batch count n replaced by the batch). Times the product with
 * C += A * B, best of several repeats, and the same product with cblas_sgemm (transposes and
 * leading dimensions derived from the strides); prints one JSON line with both GFLOP/s. */
#include CANNL_BENCH_MODEL_C

#include <cblas.h>
#include <stdio.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 11) {
        fprintf(stderr, "usage: %s M N K a_m a_k b_k b_n c_m c_n THREADS\n", argv[0]);
        return 2;
    }
    long v[9];
    for (int i = 0; i < 9; ++i) v[i] = atol(argv[i + 1]);
    const long M = v[0], N = v[1], K = v[2], a_m = v[3], a_k = v[4], b_k = v[5], b_n = v[6], c_m = v[7], c_n = v[8];
    const int threads = atoi(argv[10]);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    /* Sizes of the operands from their strides (each a dense M x K, K x N, M x N matrix). */
    const long na = (M - 1) * a_m + (K - 1) * a_k + 1, nb = (K - 1) * b_k + (N - 1) * b_n + 1;
    const long nc = (M - 1) * c_m + (N - 1) * c_n + 1;
    float *A = malloc(sizeof(float) * (size_t)na), *B = malloc(sizeof(float) * (size_t)nb);
    float *C = calloc((size_t)nc, sizeof(float));
    const int slots = threads;
    float *ws = malloc(sizeof(float) * (size_t)(CANNL_GEMM_SLOT * slots));
    if (!A || !B || !C || !ws) return 1;
    for (long i = 0; i < na; ++i) A[i] = (float)((i * 7919) % 1000) / 1000.f - 0.5f;
    for (long i = 0; i < nb; ++i) B[i] = (float)((i * 104729) % 1000) / 1000.f - 0.5f;
    const double flops = 2.0 * M * N * K;
    int reps = (int)(2e9 / flops);
    if (reps < 5) reps = 5;
    if (reps > 2000) reps = 2000;
    double best = 1e30, best_blas = 1e30;
    /* cblas, row-major: C as it is (c_n == 1), or its transpose C^T = B^T A^T (c_m == 1);
     * then each operand as it is (column stride 1) or transposed (row stride 1). */
    const int ct = c_n != 1;
    const long rows = ct ? N : M, cols = ct ? M : N, ldc = ct ? c_n : c_m;
    const float *X = ct ? B : A, *Y = ct ? A : B;
    const long x_r = ct ? b_n : a_m, x_c = ct ? b_k : a_k, y_r = ct ? a_k : b_k, y_c = ct ? a_m : b_n;
    const int blas_ok = (c_n == 1 || c_m == 1) && (x_c == 1 || x_r == 1) && (y_c == 1 || y_r == 1);
    const int ta = x_c != 1, tb = y_c != 1;
    for (int round = 0; round < 3; ++round) {
        double t0 = now_s();
        for (int r = 0; r < reps; ++r) cannl_gemm(M, N, K, 1.f, A, a_m, a_k, B, b_k, b_n, C, c_m, c_n, 0, ws, slots);
        double t = (now_s() - t0) / reps;
        if (t < best) best = t;
        if (blas_ok) {
            t0 = now_s();
            for (int r = 0; r < reps; ++r)
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)rows,
                            (int)cols, (int)K, 1.f, X, (int)(ta ? x_c : x_r), Y, (int)(tb ? y_c : y_r), 1.f, C, (int)ldc);
            t = (now_s() - t0) / reps;
            if (t < best_blas) best_blas = t;
        }
    }
    printf("{\"M\": %ld, \"N\": %ld, \"K\": %ld, \"threads\": %d, \"cannl_gflops\": %.2f, \"openblas_gflops\": %.2f}\n", M,
           N, K, threads, flops / best * 1e-9, blas_ok ? flops / best_blas * 1e-9 : 0.0);
    free(A);
    free(B);
    free(C);
    free(ws);
    return 0;
}
