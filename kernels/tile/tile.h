// defines: bench::tile::Tile, element-wise tile arithmetic, map, where, exp/log/... on tiles
//
// Tile<T, N, L> is the part of a tile that one execution agent holds: all N elements on the CPU
// executor, N / threads elements per thread on the CUDA executor, and every lane's slice laid
// side by side on the emulated-block executor. Element-wise operations never depend on which
// element sits where, so they are written once here; only loads, stores, arange and reductions
// (which know the element-to-thread mapping) live in the executors.
#pragma once

#include "defs.h"

namespace bench::tile {

template <class T, int N, int L>
struct Tile {
  static_assert(L > 0, "a tile holds at least one element per agent");
  using value_type = T;
  static constexpr int kLocal = L;
  T v[L];

  BENCH_HD BENCH_FORCEINLINE T& operator[](int i) { return v[i]; }
  BENCH_HD BENCH_FORCEINLINE const T& operator[](int i) const { return v[i]; }
};

/// A tile with every local element set to `x`.
template <int N, int L, class T>
BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> splat(T x) {
  Tile<T, N, L> r;
  BENCH_IVDEP
  for (int i = 0; i < L; ++i) r.v[i] = x;
  return r;
}

/// Apply `f` element by element to one or more tiles of the same local size.
template <class F, class T, int N, int L, class... Rest>
BENCH_HD BENCH_FORCEINLINE auto map(F f, const Tile<T, N, L>& a, const Rest&... rest) {
  using R = decltype(f(a.v[0], rest.v[0]...));
  Tile<R, N, L> r;
  BENCH_IVDEP
  for (int i = 0; i < L; ++i) r.v[i] = f(a.v[i], rest.v[i]...);
  return r;
}

/// `cond ? a : b`, element by element.
template <class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> where(const Tile<bool, N, L>& c, const Tile<T, N, L>& a,
                                               const Tile<T, N, L>& b) {
  Tile<T, N, L> r;
  BENCH_IVDEP
  for (int i = 0; i < L; ++i) r.v[i] = c.v[i] ? a.v[i] : b.v[i];
  return r;
}
template <class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> where(const Tile<bool, N, L>& c, const Tile<T, N, L>& a, T b) {
  Tile<T, N, L> r;
  BENCH_IVDEP
  for (int i = 0; i < L; ++i) r.v[i] = c.v[i] ? a.v[i] : b;
  return r;
}

/// Convert a tile to another element type.
template <class U, class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE Tile<U, N, L> cast(const Tile<T, N, L>& a) {
  Tile<U, N, L> r;
  BENCH_IVDEP
  for (int i = 0; i < L; ++i) r.v[i] = static_cast<U>(a.v[i]);
  return r;
}

#define BENCH_TILE_BINARY(OP)                                                                            \
  template <class T, int N, int L>                                                                       \
  BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> operator OP(const Tile<T, N, L>& a, const Tile<T, N, L>& b) { \
    Tile<T, N, L> r;                                                                                     \
    BENCH_IVDEP for (int i = 0; i < L; ++i) r.v[i] = a.v[i] OP b.v[i];                                   \
    return r;                                                                                            \
  }                                                                                                      \
  template <class T, int N, int L>                                                                       \
  BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> operator OP(const Tile<T, N, L>& a, T b) {                    \
    Tile<T, N, L> r;                                                                                     \
    BENCH_IVDEP for (int i = 0; i < L; ++i) r.v[i] = a.v[i] OP b;                                        \
    return r;                                                                                            \
  }                                                                                                      \
  template <class T, int N, int L>                                                                       \
  BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> operator OP(T a, const Tile<T, N, L>& b) {                    \
    Tile<T, N, L> r;                                                                                     \
    BENCH_IVDEP for (int i = 0; i < L; ++i) r.v[i] = a OP b.v[i];                                        \
    return r;                                                                                            \
  }
BENCH_TILE_BINARY(+)
BENCH_TILE_BINARY(-)
BENCH_TILE_BINARY(*)
BENCH_TILE_BINARY(/)
#undef BENCH_TILE_BINARY

#define BENCH_TILE_COMPARE(OP)                                                                              \
  template <class T, int N, int L>                                                                          \
  BENCH_HD BENCH_FORCEINLINE Tile<bool, N, L> operator OP(const Tile<T, N, L>& a, const Tile<T, N, L>& b) { \
    Tile<bool, N, L> r;                                                                                     \
    for (int i = 0; i < L; ++i) r.v[i] = a.v[i] OP b.v[i];                                                  \
    return r;                                                                                               \
  }                                                                                                         \
  template <class T, int N, int L>                                                                          \
  BENCH_HD BENCH_FORCEINLINE Tile<bool, N, L> operator OP(const Tile<T, N, L>& a, T b) {                    \
    Tile<bool, N, L> r;                                                                                     \
    for (int i = 0; i < L; ++i) r.v[i] = a.v[i] OP b;                                                       \
    return r;                                                                                               \
  }
BENCH_TILE_COMPARE(<)
BENCH_TILE_COMPARE(<=)
BENCH_TILE_COMPARE(>)
BENCH_TILE_COMPARE(>=)
BENCH_TILE_COMPARE(==)
#undef BENCH_TILE_COMPARE

template <int N, int L>
BENCH_HD BENCH_FORCEINLINE Tile<bool, N, L> operator&&(const Tile<bool, N, L>& a, const Tile<bool, N, L>& b) {
  Tile<bool, N, L> r;
  for (int i = 0; i < L; ++i) r.v[i] = a.v[i] && b.v[i];
  return r;
}

template <class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> operator-(const Tile<T, N, L>& a) {
  Tile<T, N, L> r;
  BENCH_IVDEP
  for (int i = 0; i < L; ++i) r.v[i] = -a.v[i];
  return r;
}

#define BENCH_TILE_UNARY(NAME)                                            \
  template <class T, int N, int L>                                        \
  BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> NAME(const Tile<T, N, L>& a) { \
    Tile<T, N, L> r;                                                      \
    BENCH_IVDEP for (int i = 0; i < L; ++i) r.v[i] = math::NAME(a.v[i]);  \
    return r;                                                             \
  }
BENCH_TILE_UNARY(exp)
BENCH_TILE_UNARY(log)
BENCH_TILE_UNARY(sqrt)
BENCH_TILE_UNARY(rsqrt)
BENCH_TILE_UNARY(tanh)
BENCH_TILE_UNARY(erf)
BENCH_TILE_UNARY(abs)
BENCH_TILE_UNARY(sigmoid)
#undef BENCH_TILE_UNARY

template <class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> maximum(const Tile<T, N, L>& a, const Tile<T, N, L>& b) {
  Tile<T, N, L> r;
  BENCH_IVDEP
  for (int i = 0; i < L; ++i) r.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i];
  return r;
}
template <class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> maximum(const Tile<T, N, L>& a, T b) {
  Tile<T, N, L> r;
  BENCH_IVDEP
  for (int i = 0; i < L; ++i) r.v[i] = a.v[i] > b ? a.v[i] : b;
  return r;
}
template <class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE Tile<T, N, L> minimum(const Tile<T, N, L>& a, const Tile<T, N, L>& b) {
  Tile<T, N, L> r;
  BENCH_IVDEP
  for (int i = 0; i < L; ++i) r.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i];
  return r;
}

/// Sum of the local elements (the first stage of a tile reduction; executors finish it).
template <class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE T local_sum(const Tile<T, N, L>& a, int begin = 0, int end = L) {
  T s = T(0);
  for (int i = begin; i < end; ++i) s += a.v[i];
  return s;
}
template <class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE T local_max(const Tile<T, N, L>& a, int begin = 0, int end = L) {
  T m = math::lowest<T>();
  for (int i = begin; i < end; ++i) m = a.v[i] > m ? a.v[i] : m;
  return m;
}

}  // namespace bench::tile
