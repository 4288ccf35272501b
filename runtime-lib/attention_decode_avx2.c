/* attention_decode_avx2.c - cannl_attention_decode_* (attention_decode.c) in 32-byte vectors:
 * attention_decode_impl.h, this file compiled alone with -march=x86-64-v3
 * (runtime-lib/CMakeLists.txt); attention_decode.c calls it only when cannl_isa_select names AVX2. */
#include "cannl_attention.h"

#include <math.h>
#include <stddef.h>

#if !defined(__AVX2__)
#error "attention_decode_avx2.c is compiled with -march=x86-64-v3 (runtime-lib/CMakeLists.txt)"
#endif
#define AD_VBYTES 32
#define AD_PREFIX cannl__attn_decode_avx2
#include "attention_decode_types.h"
