#!/usr/bin/env python3
"""An independent Python model of the runtime's generator (splitmix64 seeding
xoshiro256**, uniform, below, Fisher-Yates). With an executable argument it
compares that program's `--dump SEED` output against the model; without,
it prints the model's values (used to write the constants in test_rng.c).
Usage: rng_reference.py [TEST_RNG_EXE]"""
import subprocess
import sys

M = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return x, z ^ (z >> 31)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M


class Rng:
    def __init__(self, seed):
        x = seed & M
        self.s = []
        for _ in range(4):
            x, z = splitmix64(x)
            self.s.append(z)

    def next(self):
        s = self.s
        result = (rotl((s[1] * 5) & M, 7) * 9) & M
        t = (s[1] << 17) & M
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        threshold = ((1 << 64) - n) % n
        while True:
            r = self.next()
            if r >= threshold:
                return r % n

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53


def dump(seed):
    """Must match test_rng.c's --dump output exactly."""
    r = Rng(seed)
    lines = ["%016x" % r.next() for _ in range(8)]
    lines += ["%.17g" % r.uniform() for _ in range(4)]
    idx = list(range(20))
    for i in range(len(idx) - 1, 0, -1):
        j = r.below(i + 1)
        idx[i], idx[j] = idx[j], idx[i]
    lines.append(" ".join(str(v) for v in idx))
    return lines


def main():
    seeds = [0, 1, 42, 0xFFFFFFFFFFFFFFFF]
    if len(sys.argv) < 2:
        for s in seeds:
            print("seed", s)
            print("\n".join(dump(s)))
        return 0
    bad = 0
    for s in seeds:
        out = subprocess.run([sys.argv[1], "--dump", str(s)], capture_output=True, text=True, check=True).stdout
        got, want = out.split("\n")[:-1], dump(s)
        if got != want:
            bad += 1
            print("seed %d: C output differs from the Python model" % s)
            for g, w in zip(got, want):
                print(("   " if g == w else "!! ") + g + " | " + w)
    print("rng reference: %s" % ("ok" if not bad else "%d seed(s) differ" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
