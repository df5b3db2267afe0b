// defines: the tile-program verbs tl::program_id, arange, full, load, store, rows, load_rows,
//          store_rows, gather, sum, max, store_scalar, unpacked, loaded_t — the only things a program
//          calls besides element-wise tile arithmetic.
//
// A tile program is a functor with `template <class Ctx> BENCH_HD void operator()(Ctx&) const`
// and a `static constexpr int kBlock` (its widest tile). It never touches threads or barriers:
// the executor behind Ctx (CPU, emulated-block or CUDA) supplies them inside these verbs.
//
//   struct Scale {
//     static constexpr int kBlock = 1024;
//     const float* x; float* y; int64_t n; float a;
//     template <class Ctx> BENCH_HD void operator()(Ctx& c) const {
//       const int64_t off = tl::program_id(c, 0) * kBlock;
//       auto t = tl::load<kBlock>(c, x + off, n - off);
//       tl::store(c, y + off, t * a, n - off);
//     }
//   };
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "defs.h"
#include "layout.h"
#include "packed.h"
#include "tile.h"

namespace bench::tile {
namespace tl {

// Element-wise verbs (tile/tile.h) under the same prefix, so a program reads tl::exp(x).
using tile::abs;
using tile::cast;
using tile::erf;
using tile::exp;
using tile::log;
using tile::map;
using tile::maximum;
using tile::minimum;
using tile::rsqrt;
using tile::sigmoid;
using tile::sqrt;
using tile::tanh;
// A load of bf16 may return a packed tile (tile/packed.h: on CUDA and the emulated executor);
// every verb takes one. tl::unpacked(x) is x as a Tile (x itself where it is one).
using tile::unpacked;
using tile::unpacked_t;
using tile::where;

template <class Ctx>
BENCH_HD BENCH_FORCEINLINE int64_t program_id(const Ctx& c, int axis) {
  return c.program_id(axis);
}
template <class Ctx>
BENCH_HD BENCH_FORCEINLINE int64_t num_programs(const Ctx& c, int axis) {
  return c.num_programs(axis);
}
/// Tile holding its own element indices 0..N-1.
template <int N, class Ctx>
BENCH_HD BENCH_FORCEINLINE auto arange(const Ctx& c) {
  return c.template arange<N>();
}
/// Tile of N copies of `x`.
template <int N, class Ctx, class T>
BENCH_HD BENCH_FORCEINLINE auto full(const Ctx& c, T x) {
  return c.template full<N>(x);
}
/// The tile a load of N elements of T gives on Ctx, unpacked: `tl::loaded_t<B, Ctx, T> x =
/// tl::load<B>(c, p, n);` holds a float tile where `auto` would hold a packed one (a variable
/// that computed tiles are assigned to, e.g. a sum started from a load, or a tile unpacked once
/// for several uses), and is exactly `auto` where the load is not packed (the CPU executor).
template <int N, class Ctx, class T>
using loaded_t =
    unpacked_t<decltype(std::declval<const Ctx&>().template load<N>(std::declval<const T*>(), int64_t{0}, acc_t<T>{}))>;

/// Load p[0..N) converted to the compute type; elements at or beyond `n` read as `other`.
template <int N, class Ctx, class T>
BENCH_HD BENCH_FORCEINLINE auto load(const Ctx& c, const T* p, int64_t n, acc_t<T> other = acc_t<T>(0)) {
  return c.template load<N>(p, n, other);
}
/// The addressing of a tile of N elements laid in rows of `width` contiguous elements: tile
/// element i is flat element f = first + i of the rows, row f / width, column f % width; elements
/// i >= n are not moved. Computed once (on CUDA each run's row and column: a division each) and
/// shared by every load_rows and store_rows with that geometry, whatever their base and stride:
/// RoPE's rotate-half moves six tiles (x's two halves loaded and stored, the cos and sin tables)
/// over the same rows.
template <int N, class Ctx>
BENCH_HD BENCH_FORCEINLINE auto rows(const Ctx& c, int64_t width, int64_t first, int64_t n) {
  return c.template rows<N>(width, first, n);
}
/// Load a tile from rows `stride` elements apart (the heads of a token, the columns of a block),
/// in the geometry `at` of tl::rows: element i at p[(f / width) * stride + f % width]; elements i
/// >= n read as `other`. A run of a thread that stays within one row moves as one access, like
/// load's; stride 0 repeats one row (a table).
template <class Ctx, class T, class At>
BENCH_HD BENCH_FORCEINLINE auto load_rows(const Ctx& c, const T* p, int64_t stride, const At& at,
                                          acc_t<T> other = acc_t<T>(0)) {
  return c.load_rows(p, stride, at, other);
}
/// Store the first n elements of x (n: at's) to the rows of load_rows (the same addressing).
template <class Ctx, class T, class At, class U, int N, int L>
BENCH_HD BENCH_FORCEINLINE void store_rows(const Ctx& c, T* p, int64_t stride, const At& at, const Tile<U, N, L>& x) {
  c.store_rows(p, stride, at, x);
}
/// Load p[idx[i]] for the elements i < n, `other` elsewhere.
template <class Ctx, class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE auto gather(const Ctx& c, const T* p, const Tile<int, N, L>& idx, int64_t n,
                                       acc_t<T> other = acc_t<T>(0)) {
  return c.gather(p, idx, n, other);
}
/// Store the first n elements of x to p (converting to T).
template <class Ctx, class T, class U, int N, int L>
BENCH_HD BENCH_FORCEINLINE void store(const Ctx& c, T* p, const Tile<U, N, L>& x, int64_t n) {
  c.store(p, x, n);
}
/// Sum of all N elements; every agent of the program receives the result.
template <class Ctx, class U, int N, int L>
BENCH_HD BENCH_FORCEINLINE U sum(const Ctx& c, const Tile<U, N, L>& x) {
  return c.sum(x);
}
/// Maximum of all N elements; every agent of the program receives the result.
template <class Ctx, class U, int N, int L>
BENCH_HD BENCH_FORCEINLINE U max(const Ctx& c, const Tile<U, N, L>& x) {
  return c.max(x);
}
// The verbs above on a packed tile (tile/packed.h: a bf16 load's result on CUDA), unpacked here.
template <class Ctx, class T, class At, int N, int L, class P>
BENCH_HD BENCH_FORCEINLINE void store_rows(const Ctx& c, T* p, int64_t stride, const At& at, const Packed<N, L, P>& x) {
  c.store_rows(p, stride, at, unpacked(x));
}
/// A packed tile stored as bf16 (a tile loaded and stored unchanged: a copy, a relayout) moves its
/// words as loaded, without the unpack and the re-rounding (exact, but a conversion an element).
template <class Ctx, class T, int N, int L, class P>
BENCH_HD BENCH_FORCEINLINE void store(const Ctx& c, T* p, const Packed<N, L, P>& x, int64_t n) {
  if constexpr (std::is_same_v<T, bf16>) {
    c.store(p, x, n);
  } else {
    c.store(p, unpacked(x), n);
  }
}
template <class Ctx, int N, int L, class P>
BENCH_HD BENCH_FORCEINLINE float sum(const Ctx& c, const Packed<N, L, P>& x) {
  return c.sum(unpacked(x));
}
template <class Ctx, int N, int L, class P>
BENCH_HD BENCH_FORCEINLINE float max(const Ctx& c, const Packed<N, L, P>& x) {
  return c.max(unpacked(x));
}

/// Write one scalar per program (a single agent writes).
template <class Ctx, class T, class U>
BENCH_HD BENCH_FORCEINLINE void store_scalar(const Ctx& c, T* p, U v) {
  c.store_scalar(p, v);
}

}  // namespace tl
}  // namespace bench::tile
