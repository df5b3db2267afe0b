// defines: the tile-program verbs tl::program_id, arange, full, load, store, load_rows,
//          store_rows, gather, sum, max, store_scalar — the only things a program calls besides element-wise tile
//          arithmetic.
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

#include "defs.h"
#include "layout.h"
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
/// Load p[0..N) converted to the compute type; elements at or beyond `n` read as `other`.
template <int N, class Ctx, class T>
BENCH_HD BENCH_FORCEINLINE auto load(const Ctx& c, const T* p, int64_t n, acc_t<T> other = acc_t<T>(0)) {
  return c.template load<N>(p, n, other);
}
/// Load a tile from rows of `width` contiguous elements, `stride` elements apart (the heads of a
/// token, the columns of a block): tile element i is element first + i of that layout, f = first
/// + i at p[(f / width) * stride + f % width]; elements i >= n read as `other`. A run of a thread
/// that stays within one row moves as one access, like load's; stride 0 repeats one row (a table).
template <int N, class Ctx, class T>
BENCH_HD BENCH_FORCEINLINE auto load_rows(const Ctx& c, const T* p, int64_t width, int64_t stride, int64_t first,
                                          int64_t n, acc_t<T> other = acc_t<T>(0)) {
  return c.template load_rows<N>(p, width, stride, first, n, other);
}
/// Store the first n elements of x to the rows of load_rows (the same addressing).
template <class Ctx, class T, class U, int N, int L>
BENCH_HD BENCH_FORCEINLINE void store_rows(const Ctx& c, T* p, int64_t width, int64_t stride, int64_t first,
                                           const Tile<U, N, L>& x, int64_t n) {
  c.store_rows(p, width, stride, first, x, n);
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
/// Write one scalar per program (a single agent writes).
template <class Ctx, class T, class U>
BENCH_HD BENCH_FORCEINLINE void store_scalar(const Ctx& c, T* p, U v) {
  c.store_scalar(p, v);
}

}  // namespace tl
}  // namespace bench::tile
