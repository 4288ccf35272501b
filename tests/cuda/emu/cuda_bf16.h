// cuda_bf16.h — the CPU stand-in's bf16 (cuda_runtime.h): the conversions cannl_attention.cuh uses,
// float to bf16 rounding to nearest even as the device's __float2bfloat16 does.
#pragma once
#include <string.h>

struct __nv_bfloat16 {
  unsigned short bits;
};
inline __nv_bfloat16 __float2bfloat16(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {(unsigned short)((u >> 16) | 0x40)};  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return {(unsigned short)(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 b) {
  const unsigned u = (unsigned)b.bits << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
