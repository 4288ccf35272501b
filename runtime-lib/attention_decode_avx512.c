/* attention_decode_avx512.c - cannl_attention_decode_* (attention_decode.c) in 64-byte vectors:
 * attention_decode_impl.h, this file compiled alone with -march=x86-64-v4
 * (runtime-lib/CMakeLists.txt); attention_decode.c calls it only when cannl_isa_select names AVX-512. */
#include "cannl_attention.h"

#include <math.h>
#include <stddef.h>

#if !defined(__AVX512F__)
#error "attention_decode_avx512.c is compiled with -march=x86-64-v4 (runtime-lib/CMakeLists.txt)"
#endif
#if defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
__attribute__((__simd__("notinbranch"))) extern float expf(float);
__attribute__((__simd__("notinbranch"))) extern double exp(double);
#endif

#define AD_VBYTES 64
#define AD_EXP expf
#define AD_LOG logf
#define AD_R float
#define AD_NAME cannl__attn_decode_avx512_f32
#include "attention_decode_impl.h"
#undef AD_R
#undef AD_NAME
#undef AD_EXP
#undef AD_LOG
#define AD_EXP exp
#define AD_LOG log
#define AD_R double
#define AD_NAME cannl__attn_decode_avx512_f64
#include "attention_decode_impl.h"
