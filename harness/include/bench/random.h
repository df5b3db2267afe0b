// defines: bench::Rng, hash_seed — deterministic, platform-independent random numbers
//
// std::normal_distribution differs between standard libraries; initialization and synthetic
// data must not, so they use this small generator (SplitMix64 seeding xoshiro256**).
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace bench {

/// SplitMix64 step: a good 64-bit mixer, also used to derive seeds.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Seed derived from a base seed and a name (FNV-1a of the name, mixed with the seed).
inline uint64_t hash_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  uint64_t s = seed ^ (h + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
  return splitmix64(s);
}

/// Seed derived from a base seed and up to three integers.
inline uint64_t hash_seed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  uint64_t s = seed;
  uint64_t h = splitmix64(s) ^ a;
  h = splitmix64(h) ^ b;
  h = splitmix64(h) ^ c;
  return splitmix64(h);
}

/// xoshiro256** generator.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>(uniform() * static_cast<double>(n)); }
  /// Standard normal (Box-Muller; the second value of each pair is kept for the next call).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(6.283185307179586 * u2);
    has_spare_ = true;
    return r * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace bench
