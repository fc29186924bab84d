// Counter-based random bits: the same stream for any thread count, cheap enough for masks.
#pragma once

#include <cstdint>

namespace htm {

/// SplitMix64's finaliser: a well-mixed 64-bit value from any 64-bit counter.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The n-th value of stream `seed`.
inline uint64_t counter_bits(uint64_t seed, uint64_t n) { return splitmix64(seed ^ (n * 0xd1b54a32d192ed03ULL)); }

}  // namespace htm
