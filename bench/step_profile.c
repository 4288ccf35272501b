/* step_profile.c — where a generated model's training step goes: every matrix product and every
 * attention call of the step, timed by the calling thread's CPU clock. Linked with
 * bench/step_bench.c (which calls the hooks below around its timed steps) through the linker's
 * --wrap, so the generated code and the runtime are the ones the bench times:
 *
 *   cc -std=c11 -O3 ... -Iruntime-lib -I$GEN -DCANNL_BENCH_API=llama_char_api bench/step_bench.c \
 *      bench/step_profile.c $GEN/llama_char.c libcannl_rt.a -lz -lm \
 *      -Wl,--wrap=cannl_sgemm,--wrap=cannl_sgemm_sym \
 *      -Wl,--wrap=cannl_attention_forward_f32,--wrap=cannl_attention_backward_f32 -o step_profile
 *   ./step_profile 8 3 15 1      (bench/README.md: the same arguments as step_bench)
 *
 * Prints to stderr, per timed step: each product shape (M x N x K, A's and B's strides, whether C
 * is overwritten; `sym`: cannl_sgemm_sym's N x N triangle over K), its calls, milliseconds and
 * GFLOP/s (2 M N K flops, N (N + 1) K for a triangle), their total, and the attention kernels'
 * milliseconds; the rest of the step (element-wise nests, reductions, optimisers) is the step's
 * CPU time less these. One thread: at more, each thread's calls are summed without a lock, so
 * the figures are meaningful at one thread only (the counts race). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cannl_attention.h"
#include "cannl_rt.h"

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    int64_t m, n, k, a_m, a_k, b_k, b_n;
    int overwrite, sym;
    long calls;
    double s;
} shape;

enum { SHAPES = 256 };
static shape shapes[SHAPES];
static int nshapes, on;
static double attn_s[2];
static long attn_calls[2];

static void count(shape key, double s) {
    if (!on) return;
    for (int i = 0; i < nshapes; ++i) {
        shape *e = &shapes[i];
        if (e->m == key.m && e->n == key.n && e->k == key.k && e->a_m == key.a_m && e->a_k == key.a_k &&
            e->b_k == key.b_k && e->b_n == key.b_n && e->overwrite == key.overwrite && e->sym == key.sym) {
            e->calls++, e->s += s;
            return;
        }
    }
    if (nshapes == SHAPES) return;
    key.calls = 1, key.s = s;
    shapes[nshapes++] = key;
}

void __real_cannl_sgemm(cannl_gemm *g, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t a_m,
                        int64_t a_k, const float *B, int64_t b_k, int64_t b_n, float *C, int64_t c_m, int64_t c_n,
                        int overwrite);
void __wrap_cannl_sgemm(cannl_gemm *g, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t a_m,
                        int64_t a_k, const float *B, int64_t b_k, int64_t b_n, float *C, int64_t c_m, int64_t c_n,
                        int overwrite) {
    const double t0 = cpu_s();
    __real_cannl_sgemm(g, M, N, K, alpha, A, a_m, a_k, B, b_k, b_n, C, c_m, c_n, overwrite);
    count((shape){M, N, K, a_m, a_k, b_k, b_n, overwrite, 0, 0, 0}, cpu_s() - t0);
}

void __real_cannl_sgemm_sym(cannl_gemm *g, int64_t N, int64_t K, float alpha, const float *A, int64_t a_m,
                            int64_t a_k, float *C, int64_t c_m, int64_t c_n);
void __wrap_cannl_sgemm_sym(cannl_gemm *g, int64_t N, int64_t K, float alpha, const float *A, int64_t a_m,
                            int64_t a_k, float *C, int64_t c_m, int64_t c_n) {
    const double t0 = cpu_s();
    __real_cannl_sgemm_sym(g, N, K, alpha, A, a_m, a_k, C, c_m, c_n);
    count((shape){N, N, K, a_m, a_k, 0, 0, 1, 1, 0, 0}, cpu_s() - t0);
}

void __real_cannl_attention_forward_f32(const cannl_attn_dims *d, const float *q, int64_t q_st, const float *k,
                                        int64_t k_st, const float *v, int64_t v_st, float *o, int64_t o_st,
                                        float *lse);
void __wrap_cannl_attention_forward_f32(const cannl_attn_dims *d, const float *q, int64_t q_st, const float *k,
                                        int64_t k_st, const float *v, int64_t v_st, float *o, int64_t o_st,
                                        float *lse) {
    const double t0 = cpu_s();
    __real_cannl_attention_forward_f32(d, q, q_st, k, k_st, v, v_st, o, o_st, lse);
    if (on) attn_s[0] += cpu_s() - t0, attn_calls[0]++;
}

void __real_cannl_attention_backward_f32(const cannl_attn_dims *d, const float *q, int64_t q_st, const float *k,
                                         int64_t k_st, const float *v, int64_t v_st, const float *o, int64_t o_st,
                                         const float *dout, int64_t do_st, const float *lse, float *delta, float *dq,
                                         int64_t dq_st, float *dk, int64_t dk_st, float *dv, int64_t dv_st);
void __wrap_cannl_attention_backward_f32(const cannl_attn_dims *d, const float *q, int64_t q_st, const float *k,
                                         int64_t k_st, const float *v, int64_t v_st, const float *o, int64_t o_st,
                                         const float *dout, int64_t do_st, const float *lse, float *delta, float *dq,
                                         int64_t dq_st, float *dk, int64_t dk_st, float *dv, int64_t dv_st) {
    const double t0 = cpu_s();
    __real_cannl_attention_backward_f32(d, q, q_st, k, k_st, v, v_st, o, o_st, dout, do_st, lse, delta, dq, dq_st, dk,
                                        dk_st, dv, dv_st);
    if (on) attn_s[1] += cpu_s() - t0, attn_calls[1]++;
}

/* step_bench.c's hooks (weak there): counting starts with the timed steps. */
void cannl_bench_profile_start(void) { on = 1; }

void cannl_bench_profile_report(long steps, double step_cpu_us) {
    double ms = 0, flops = 0;
    fprintf(stderr, "| product | M x N x K | A strides (m, k) | B strides (k, n) | overwrite | calls | ms "
                    "| GFLOP/s |\n");
    fprintf(stderr, "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < nshapes; ++i) {
        const shape *e = &shapes[i];
        const double f = (e->sym ? (double)e->m * (double)(e->m + 1) * (double)e->k
                                 : 2.0 * (double)e->m * (double)e->n * (double)e->k) * (double)e->calls / (double)steps;
        const double t = e->s / (double)steps * 1e3;
        ms += t, flops += f;
        fprintf(stderr, "| %s | %lld x %lld x %lld | %lld, %lld | %lld, %lld | %d | %ld | %.3f | %.1f |\n",
                e->sym ? "sgemm_sym" : "sgemm", (long long)e->m, (long long)e->n, (long long)e->k, (long long)e->a_m,
                (long long)e->a_k, (long long)e->b_k, (long long)e->b_n, e->overwrite, e->calls / steps, t,
                t > 0 ? f / (t * 1e6) : 0.0);
    }
    const double fwd = attn_s[0] / (double)steps * 1e3, bwd = attn_s[1] / (double)steps * 1e3;
    fprintf(stderr, "products: %.2f ms, %.3f GFLOP, %.1f GFLOP/s; attention: forward %.2f ms (%ld calls), "
                    "backward %.2f ms (%ld calls); the rest: %.2f ms of the step's %.2f CPU ms\n",
            ms, flops * 1e-9, ms > 0 ? flops / (ms * 1e6) : 0.0, fwd, attn_calls[0] / steps, bwd,
            attn_calls[1] / steps, step_cpu_us * 1e-3 - ms - fwd - bwd, step_cpu_us * 1e-3);
}
