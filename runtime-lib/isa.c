/* isa.c - the instruction set of the runtime's kernels (gemm.c): the CPU's best, from cpuid
 * through the compiler's __builtin_cpu_supports (which also checks that the OS saves the
 * vector registers), lowered by the CANNL_ISA environment variable (`amx` names the best: the
 * products' AMX kernels, amx.c, run only under it or none). Apart from gemm.c, so
 * that the programs can check CANNL_ISA without linking the kernels (and OpenMP). */
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

const char *cannl_isa_name(cannl_isa isa) {
    switch (isa) {
        case CANNL_ISA_AVX512: return "avx512";
        case CANNL_ISA_AVX2: return "avx2";
        case CANNL_ISA_SSE2: break;
    }
    return "sse2";
}

/* The best instruction set of this CPU that this build has kernels for. */
static cannl_isa cpu_isa(void) {
#if defined(CANNL_GEMM_X86) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return CANNL_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CANNL_ISA_AVX2;
#endif
    return CANNL_ISA_SSE2;
}

cannl_status cannl_isa_select(cannl_isa *isa, cannl_error *err) {
    const cannl_isa cpu = cpu_isa();
    *isa = cpu;
    const char *want = getenv("CANNL_ISA");
    if (!want || !*want || strcmp(want, "amx") == 0) return CANNL_OK; /* amx: the best (amx.c) */
    for (int i = CANNL_ISA_SSE2; i <= CANNL_ISA_AVX512; ++i)
        if (strcmp(want, cannl_isa_name((cannl_isa)i)) == 0) {
            if ((cannl_isa)i < cpu) *isa = (cannl_isa)i;
            return CANNL_OK;
        }
    return cannl__fail(err, CANNL_E_ARG, NULL, "CANNL_ISA=%s: expected amx, avx512, avx2 or sse2", want);
}
