/* rng.c - seeded deterministic random numbers and shuffling.
 *
 * xoshiro256** (Blackman & Vigna) whose 256-bit state is filled from the seed
 * by splitmix64, so every seed (even 0) gives a well-mixed non-zero state.
 * Only integer arithmetic is used for the raw stream, uniforms and the
 * shuffle, so they are identical on every platform. */
#include "rt_internal.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void cannl_rng_seed(cannl_rng *rng, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
    rng->spare = 0.0;
    rng->has_spare = 0;
}

uint64_t cannl_dropout_key(uint64_t seed, int64_t step) {
    uint64_t x = seed ^ UINT64_C(0xD1B54A32D192ED03);
    uint64_t k = splitmix64(&x);
    x = k + (uint64_t)step;
    return splitmix64(&x);
}

uint64_t cannl_rng_next(cannl_rng *rng) {
    uint64_t *s = rng->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t cannl_rng_below(cannl_rng *rng, uint64_t n) {
    if (n == 0) return 0;
    /* Reject the lowest (2^64 mod n) values so that r % n is unbiased. */
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
        uint64_t r = cannl_rng_next(rng);
        if (r >= threshold) return r % n;
    }
}

double cannl_rng_uniform(cannl_rng *rng) { return (double)(cannl_rng_next(rng) >> 11) * 0x1.0p-53; }

float cannl_rng_uniformf(cannl_rng *rng) { return (float)(cannl_rng_next(rng) >> 40) * 0x1.0p-24f; }

double cannl_rng_normal(cannl_rng *rng) {
    if (rng->has_spare) {
        rng->has_spare = 0;
        return rng->spare;
    }
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = 1.0 - cannl_rng_uniform(rng); /* (0, 1]: log is finite */
    double u2 = cannl_rng_uniform(rng);
    double r = sqrt(-2.0 * log(u1));
    rng->spare = r * sin(two_pi * u2);
    rng->has_spare = 1;
    return r * cos(two_pi * u2);
}

void cannl_shuffle(cannl_rng *rng, int64_t *idx, int64_t n) {
    if (!idx) return;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)cannl_rng_below(rng, (uint64_t)i + 1);
        int64_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
}
