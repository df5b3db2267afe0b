// defines: bench::tile::Packed, is_packed, unpacked, and the element-wise verbs of tile.h on
//          packed tiles (they unpack, then run tile.h's)
//
// A bf16 tile as the CUDA executor's load returns it: its elements' raw bits, two to a 32-bit
// word, unpacked to a Tile<float> where a program first computes with it. A load that unpacked at
// once put its shifts and masks (and its tail's selects) between its own accesses and the next
// load's per-run branches; the next load's accesses were issued only when the first one's data
// had arrived, so a bf16 thread had one tile's accesses in flight where a float thread had all of
// them. Returned packed, every load of a program is issued before any unpack.
//
// The CUDA executor makes them (tile/cuda_executor.cuh), and the emulated-block executor alike
// (tile/emulated_executor.h, so that CI runs the programs' packed path); the CPU executor loads
// Tile<float> as before, and the overloads below, constrained to packed operands, are never
// instantiated for it. A program reads the same on every executor: `auto x = tl::load<B>(c, ...)`
// then any tile arithmetic, reduction or store on x. Where a program must hold the float tile
// itself (assigning computed tiles back to the variable, or unpacking once for several uses), it
// declares it so: `tl::loaded_t<B, Ctx, T> x = tl::load<B>(c, ...)` (tile/program.h).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "defs.h"
#include "tile.h"

namespace bench::tile {

/// Whether a load of T whose runs are `vec` elements long (Layout::kVec) comes back packed, on
/// the CUDA executor and the emulated-block executor alike (the one definition both use): bf16 in
/// runs of at least two elements, whose accesses move whole 32-bit words (a run of one moves a
/// single bf16, and is unpacked at its load). Unpacked inside the branch that chose the vector
/// access, each run's shift and mask read its load before the next run's branch: in the SASS
/// every bf16 LDG.E.128 was followed by its first use, one 16-byte load in flight a thread, where
/// float (whose loads write the tile's registers directly) had all of its runs in flight.
/// Unpacked when the load returned, a program's next load waited for this one's data (the unpack
/// sat between the two loads' branches). Returned packed, every load of a program is issued first.
template <class T, int Vec>
inline constexpr bool kLoadsPacked = Vec >= 2 && std::is_same_v<T, bf16>;

/// The local part of a bf16 tile of N elements, L of them an agent, as raw words. Elements at or
/// past `n` (tile-relative, as the load's n) read as `other`. `Unpack` is the executor's
/// element mapping: `Unpack::template unpack<N, L>(words, n, other)` gives the Tile<float>.
template <int N, int L, class Unpack>
struct Packed {
  static_assert(L % 2 == 0, "two bf16 a word");
  using value_type = float;  ///< what the tile holds once unpacked
  static constexpr int kLocal = L;
  uint32_t words[L / 2];
  int64_t n;
  float other;

  /// The raw bits of local element k (the low half of word k / 2 when k is even).
  BENCH_HD BENCH_FORCEINLINE uint16_t bits(int k) const { return static_cast<uint16_t>(words[k / 2] >> (k % 2 * 16)); }

  /// The tile as floats: exact (a bf16 is the upper half of a float).
  BENCH_HD BENCH_FORCEINLINE operator Tile<float, N, L>() const {  // NOLINT(google-explicit-constructor)
    return Unpack::template unpack<N, L>(words, n, other);
  }
};

template <class X>
struct IsPacked : std::false_type {};
template <int N, int L, class U>
struct IsPacked<Packed<N, L, U>> : std::true_type {};
/// Whether any of the operands is a packed tile (the overloads below take those only).
template <class... X>
inline constexpr bool kAnyPacked = (IsPacked<std::remove_cv_t<X>>::value || ...);

/// A packed tile as its Tile<float>; anything else (a tile, a scalar) as it is.
template <class X>
BENCH_HD BENCH_FORCEINLINE const X& unpacked(const X& x) {
  return x;
}
template <int N, int L, class U>
BENCH_HD BENCH_FORCEINLINE Tile<float, N, L> unpacked(const Packed<N, L, U>& x) {
  return x;
}

/// The tile type X stands for: Tile<float> for a packed tile, X otherwise. A program helper that
/// takes a loaded tile and returns a computed one of its type returns unpacked_t of it.
template <class X>
using unpacked_t = std::decay_t<decltype(unpacked(std::declval<const X&>()))>;

#define BENCH_PACKED_BINARY(OP)                                            \
  template <class A, class B, std::enable_if_t<kAnyPacked<A, B>, int> = 0> \
  BENCH_HD BENCH_FORCEINLINE auto operator OP(const A& a, const B& b) {    \
    return unpacked(a) OP unpacked(b);                                     \
  }
BENCH_PACKED_BINARY(+)
BENCH_PACKED_BINARY(-)
BENCH_PACKED_BINARY(*)
BENCH_PACKED_BINARY(/)
BENCH_PACKED_BINARY(<)
BENCH_PACKED_BINARY(<=)
BENCH_PACKED_BINARY(>)
BENCH_PACKED_BINARY(>=)
BENCH_PACKED_BINARY(==)
#undef BENCH_PACKED_BINARY

template <int N, int L, class U>
BENCH_HD BENCH_FORCEINLINE Tile<float, N, L> operator-(const Packed<N, L, U>& a) {
  return -unpacked(a);
}

#define BENCH_PACKED_CALL(NAME)                                                  \
  template <class A, class... B, std::enable_if_t<kAnyPacked<A, B...>, int> = 0> \
  BENCH_HD BENCH_FORCEINLINE auto NAME(const A& a, const B&... b) {              \
    return NAME(unpacked(a), unpacked(b)...);                                    \
  }
BENCH_PACKED_CALL(exp)
BENCH_PACKED_CALL(log)
BENCH_PACKED_CALL(sqrt)
BENCH_PACKED_CALL(rsqrt)
BENCH_PACKED_CALL(tanh)
BENCH_PACKED_CALL(erf)
BENCH_PACKED_CALL(abs)
BENCH_PACKED_CALL(sigmoid)
BENCH_PACKED_CALL(maximum)
BENCH_PACKED_CALL(minimum)
#undef BENCH_PACKED_CALL

/// where(c, a, b) with a or b packed.
template <class A, class B, int N, int L, std::enable_if_t<kAnyPacked<A, B>, int> = 0>
BENCH_HD BENCH_FORCEINLINE auto where(const Tile<bool, N, L>& c, const A& a, const B& b) {
  return where(c, unpacked(a), unpacked(b));
}

/// cast<U>(a) of a packed a.
template <class U, int N, int L, class P>
BENCH_HD BENCH_FORCEINLINE Tile<U, N, L> cast(const Packed<N, L, P>& a) {
  return cast<U>(unpacked(a));
}

/// map(f, a, rest...) with a packed first operand, and map(f, a, b) with a packed second one
/// (tile.h's map takes tiles; these unpack, then call it).
template <class F, int N, int L, class P, class... Rest>
BENCH_HD BENCH_FORCEINLINE auto map(F f, const Packed<N, L, P>& a, const Rest&... rest) {
  return map(f, unpacked(a), unpacked(rest)...);
}
template <class F, class T, int N, int L, class P>
BENCH_HD BENCH_FORCEINLINE auto map(F f, const Tile<T, N, L>& a, const Packed<N, L, P>& b) {
  return map(f, a, unpacked(b));
}

}  // namespace bench::tile
