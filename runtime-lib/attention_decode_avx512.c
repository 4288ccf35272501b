/* attention_decode_avx512.c - cannl_attention_decode_* (attention_decode.c) in 64-byte vectors:
 * attention_decode_impl.h, this file compiled alone with -march=x86-64-v4
 * (runtime-lib/CMakeLists.txt); attention_decode.c calls it only when cannl_isa_select names AVX-512. */
#include "cannl_attention.h"

#include <math.h>
#include <stddef.h>

#if !defined(__AVX512F__)
#error "attention_decode_avx512.c is compiled with -march=x86-64-v4 (runtime-lib/CMakeLists.txt)"
#endif
#define AD_VBYTES 64
#define AD_PREFIX cannl__attn_decode_avx512
#include "attention_decode_types.h"
