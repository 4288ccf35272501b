/* amx.c - whether the products may use AMX, the tile matrix unit of Intel's Xeons since Sapphire
 * Rapids (cannl__amx_features, rt_internal.h): the CPU reports AMX-TILE and the operation
 * (AMX-INT8: int8 dot products; AMX-BF16: bf16 ones), the OS enables the tile state (XCR0 bits
 * 17 and 18) and grants it to this process (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM), asked once;
 * a kernel that refuses, or another OS, means no AMX), and CANNL_ISA is unset or `amx` (any lower
 * instruction set turns it off). The CPU and the OS are asked at the first call, CANNL_ISA at each
 * (the products' contexts call this once, when created). */
#define _DEFAULT_SOURCE /* syscall */
#include "rt_internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(CANNL_GEMM_X86) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

/* The CPU's and the OS's part. */
static int detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const int tile = (d >> 24) & 1, i8 = (d >> 25) & 1, bf = (d >> 22) & 1;
    if (!tile || !(i8 || bf)) return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return 0; /* OSXSAVE: xgetbv works */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) return 0; /* XTILECFG and XTILEDATA */
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return 0;
    return (i8 ? CANNL__AMX_INT8 : 0) | (bf ? CANNL__AMX_BF16 : 0);
}

int cannl__amx_features(void) {
    static int known = -1;
    int f = __atomic_load_n(&known, __ATOMIC_ACQUIRE);
    if (f < 0) { /* racing first calls find the same */
        f = detect();
        __atomic_store_n(&known, f, __ATOMIC_RELEASE);
    }
    const char *want = getenv("CANNL_ISA");
    return want && *want && strcmp(want, "amx") != 0 ? 0 : f;
}
#else
int cannl__amx_features(void) { return 0; }
#endif
