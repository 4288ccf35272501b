/* attention_avx512.c - attention.c's kernels (attention_inst.h) in 64-byte vectors, named
 * cannl__attn_avx512_*. CMakeLists.txt compiles this file alone with -march=x86-64-v4 (the whole
 * file, not a function attribute: see CANNL_MULTIVERSION in cannl_rt.h); attention.c calls it
 * only when cannl_isa_select names AVX-512. */
#include "cannl_attention.h"

#if !defined(__AVX512F__)
#error "attention_avx512.c is compiled with -march=x86-64-v4 (runtime-lib/CMakeLists.txt)"
#endif

#include <math.h>
#include <stddef.h>

#define CANNL_ATTN_MULTIVERSION
#define ATTN_VBYTES 64
#define ATTN_PREFIX cannl__attn_avx512_
#include "attention_inst.h"
