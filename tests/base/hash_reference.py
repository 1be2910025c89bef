#!/usr/bin/env python3
"""ember::hash_bytes (src/base/hash.cpp) written again from its definition, in Python's
unbounded integers: prints the keys test_hash.cpp pins. The on-disk kernel caches name
their files by this hash, so a change to it must show here first."""
M = (1 << 64) - 1
K1, K2, K3 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def absorb(h, w):
    return (rotl(h ^ (rotl(w * K1 & M, 31) * K2 & M), 27) * K1 + K3) & M


def hash_bytes(b):
    h = absorb(0x243F6A8885A308D3, len(b))
    for i in range(0, len(b) - len(b) % 8, 8):
        h = absorb(h, int.from_bytes(b[i:i + 8], "little"))
    if len(b) % 8:
        h = absorb(h, int.from_bytes(b[len(b) - len(b) % 8:], "little"))
    h ^= h >> 30
    h = h * K2 & M
    h ^= h >> 27
    h = h * K3 & M
    return h ^ (h >> 31)


if __name__ == "__main__":
    cases = [b"", b"a", b"a\0", b"The quick brown fox jumps over the lazy dog", bytes(range(256))]
    for c in cases:
        print(f"{len(c):4d} bytes: 0x{hash_bytes(c):016x}ULL")
