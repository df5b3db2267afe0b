// defines: dropout_keep, dropout_seed, dropout_apply — inverted dropout with masks recomputed
//          from a seed (nothing stored between forward and backward)
//
// Sections, in order: 1. the mask (its own reference: the definition)  2. tile programs
// 3. launchers.
//
// Element i of a site is kept when hash(seed, i) >= p (24 random bits), and kept values are
// scaled by 1 / (1 - p), so the expectation is unchanged. Backward is the same map applied to the
// incoming gradient: dx = keep ? dy / (1 - p) : 0.
#pragma once

#include <cstdint>

#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

using tile::acc_t;
using tile::Exec;

// ---------------------------------------------------------------------------------------------
// 1. the mask
// ---------------------------------------------------------------------------------------------

/// SplitMix64's finalizer: a bijective 64-bit mix.
BENCH_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Whether element `i` survives dropout with rate `p` under `seed` (the same on every executor).
BENCH_HD inline bool dropout_keep(uint64_t seed, int64_t i, float p) {
  const uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f) >= p;
}

/// dropout_seed without the step: the part of a site's seed that stays from step to step.
inline uint64_t dropout_site_seed(uint64_t case_seed, int64_t site) {
  return mix64(case_seed ^ 0x5bd1e995u) + static_cast<uint64_t>(site);
}

/// The seed of step `step` of a site from its dropout_site_seed.
BENCH_HD inline uint64_t dropout_seed_at(uint64_t site_seed, int64_t step) {
  return mix64(site_seed + static_cast<uint64_t>(step) * 0x9e3779b97f4a7c15ull);
}

/// Seed of one dropout site: the case seed, the step, and a site number (e.g. layer * 8 + k).
/// The same bits as mix64(mix64(case_seed ^ c) + step * g + site): the sums wrap, in any order.
inline uint64_t dropout_seed(uint64_t case_seed, int64_t step, int64_t site) {
  return dropout_seed_at(dropout_site_seed(case_seed, site), step);
}

/// The seed a dropout kernel draws its mask from: `seed` itself, or, when the step is read from
/// device memory (`step_at` set: a step captured into a CUDA graph, whose replays must each draw
/// their own masks), dropout_seed_at(seed, *step_at) with `seed` the site's dropout_site_seed.
BENCH_HD inline uint64_t dropout_seed_of(uint64_t seed, const int64_t* step_at) {
  return step_at != nullptr ? dropout_seed_at(seed, *step_at) : seed;
}

/// The `seed` a launch takes with `step_at` (dropout_seed_of): dropout_seed(case_seed, step,
/// site), or the site's dropout_site_seed when the kernels read the step at `step_at`.
inline uint64_t dropout_launch_seed(uint64_t case_seed, int64_t step, int64_t site, const int64_t* step_at) {
  return step_at != nullptr ? dropout_site_seed(case_seed, site) : dropout_seed(case_seed, step, site);
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

template <class A>
struct DropoutMask {
  uint64_t seed;
  int64_t base;
  float p;
  A scale;
  BENCH_HD A operator()(int i, A x) const { return dropout_keep(seed, base + i, p) ? x * scale : A(0); }
};

/// y = dropout(x) over one chunk of B elements (y may alias x).
template <class T, int B>
struct Dropout {
  static constexpr int kBlock = B;
  const T* x;
  T* y;
  int64_t n;
  uint64_t seed;
  float p;
  const int64_t* step_at;  // null, or the step in device memory (dropout_seed_of)

  /// x read, y written; the scaling multiply (the mask is integer work).
  tile::Traffic traffic(const tile::Grid&) const { return {tile::traffic_bytes<T>(2 * n), static_cast<double>(n)}; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    using A = acc_t<T>;
    const int64_t off = tl::program_id(c, 0) * B;
    const DropoutMask<A> mask{dropout_seed_of(seed, step_at), off, p, A(1) / (A(1) - static_cast<A>(p))};
    tl::store(c, y + off, tl::map(mask, tl::arange<B>(c), tl::load<B>(c, x + off, n - off)), n - off);
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double, bf16 in dropout.cpp)
// ---------------------------------------------------------------------------------------------

/// y[i] = dropout_keep(seed, i, p) ? x[i] / (1 - p) : 0. Forward and backward alike (backward
/// with the same seed on the gradient). y may alias x; p = 0 copies. With `step_at` (in exec's
/// memory) the mask's seed is dropout_seed_of(seed, step_at), read when the kernel runs.
template <class T>
void dropout_apply(const Exec& exec, const T* x, T* y, int64_t n, double p, uint64_t seed,
                   const int64_t* step_at = nullptr);

}  // namespace bench::kernels
