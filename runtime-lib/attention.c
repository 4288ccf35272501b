/* attention.c - cannl_attention.h: flash-style attention for one (sequence, head) pair, in
 * float and double (one body, attention_impl.h, included once per type). */
#include "cannl_attention.h"

#include <math.h>

/* Keys are scored in tiles of this many: a tile of scores is the only buffer (on the stack). */
#define CANNL_ATTN_TILE 64

/* How many keys query t sees. */
static int64_t cannl__attn_keys_seen(const cannl_attn_dims *d, int64_t t) {
  if (!d->causal) return d->tk;
  int64_t last = d->q_offset + t + 1;
  return last < 0 ? 0 : last > d->tk ? d->tk : last;
}

#define R float
#define SFX f32
#define EXP expf
#define LOG logf
#include "attention_impl.h"
#undef R
#undef SFX
#undef EXP
#undef LOG

#define R double
#define SFX f64
#define EXP exp
#define LOG log
#include "attention_impl.h"
#undef R
#undef SFX
#undef EXP
#undef LOG
