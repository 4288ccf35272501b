/* attention_decode_types.h - attention_decode_impl.h for float and double, the functions named
 * AD_PREFIX_f32 and AD_PREFIX_f64, in AD_VBYTES-byte vectors (the includer defines both, after
 * <math.h>): the same two instances in attention_decode.c and each instruction set's file. The
 * exponentials vectorised by libmvec where glibc has it. Not installed. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
__attribute__((__simd__("notinbranch"))) extern float expf(float);
__attribute__((__simd__("notinbranch"))) extern double exp(double);
#endif
#define AD_CAT2(a, b) a##b
#define AD_CAT(a, b) AD_CAT2(a, b)

#define AD_EXP expf
#define AD_LOG logf
#define AD_R float
#define AD_NAME AD_CAT(AD_PREFIX, _f32)
#include "attention_decode_impl.h"
#undef AD_R
#undef AD_NAME
#undef AD_EXP
#undef AD_LOG

#define AD_EXP exp
#define AD_LOG log
#define AD_R double
#define AD_NAME AD_CAT(AD_PREFIX, _f64)
#include "attention_decode_impl.h"
#undef AD_R
#undef AD_NAME
#undef AD_EXP
#undef AD_LOG
#undef AD_CAT
#undef AD_CAT2
