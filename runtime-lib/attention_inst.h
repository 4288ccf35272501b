/* attention_inst.h - attention_impl.h for float and double, named ATTN_PREFIX<forward|backward|ring>_f32
 * and _f64, in ATTN_VBYTES-byte vectors (the includer defines both, after <math.h>, and
 * CANNL_ATTN_MULTIVERSION, empty or a target_clones attribute): the same instances in attention.c
 * (32-byte vectors: AVX2 + FMA or the baseline, chosen by the loader) and attention_avx512.c
 * (64-byte vectors, compiled with -march=x86-64-v4). Not installed. */

/* Per element type (defined before each inclusion of attention_impl.h): ATTN_KB keys per tile,
 * ATTN_QC queries per chunk of a tile (the stack blocks of scores hold ATTN_QC x ATTN_KB),
 * ATTN_XB columns of a key row packed at a time (and the widest rows copied into contiguous
 * blocks); ATTN_MR rows per register block. float: 64, 64, 64 (144 KiB of stack in the
 * backward pass); double, whose speed matters less: 32, 32, 32. */
#define ATTN_MR 6

/* glibc's vector expf / logf (libmvec, linked through libm), declared as <math.h> declares them
 * under -ffast-math: the exponentials of a tile of scores vectorise (the generated models do
 * the same). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
__attribute__((__simd__("notinbranch"))) extern float expf(float);
#endif

/* How many keys query t sees. */
static inline int64_t cannl__attn_keys_seen(const cannl_attn_dims *d, int64_t t) {
  if (!d->causal) return d->tk;
  int64_t last = d->q_offset + t + 1;
  return last < 0 ? 0 : last > d->tk ? d->tk : last;
}

/* The first key query t sees (a sliding window's; 0 without one). */
static inline int64_t attn_first_key(const cannl_attn_dims *d, int64_t t) {
  if (!d->causal || d->window <= 0) return 0;
  const int64_t s = d->q_offset + t - d->window + 1;
  return s < 0 ? 0 : s;
}

/* The first query that sees key s0 (tq when none does; s0 < tk). */
static inline int64_t attn_first_query(const cannl_attn_dims *d, int64_t s0) {
  if (!d->causal) return 0;
  const int64_t t = s0 - d->q_offset;
  return t < 0 ? 0 : t > d->tq ? d->tq : t;
}

/* One past the last query that sees key s (a sliding window's; tq without one). */
static inline int64_t attn_end_query(const cannl_attn_dims *d, int64_t s) {
  if (!d->causal || d->window <= 0) return d->tq;
  const int64_t t = s - d->q_offset + d->window;
  return t < 0 ? 0 : t > d->tq ? d->tq : t;
}

#define ATTN_KB 64
#define ATTN_QC 64
#define ATTN_XB 64
#define R float
#define SFX f32
#define EXP expf
#define LOG logf
#include "attention_impl.h"
#undef R
#undef SFX
#undef EXP
#undef LOG
#undef ATTN_KB
#undef ATTN_QC
#undef ATTN_XB

#define ATTN_KB 32
#define ATTN_QC 32
#define ATTN_XB 32
#define R double
#define SFX f64
#define EXP exp
#define LOG log
#include "attention_impl.h"
#undef R
#undef SFX
#undef EXP
#undef LOG
#undef ATTN_KB
#undef ATTN_QC
#undef ATTN_MR
#undef ATTN_XB
