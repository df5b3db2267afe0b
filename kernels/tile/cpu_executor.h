// defines: bench::tile::CpuCtx, launch_cpu
//
// Triton-interpreter-style executor: each program runs on whole tiles (Tile<T, N, N>), and the
// programs of a grid are split over the OpenMP workers by parallel_for.
#pragma once

#include "defs.h"
#include "parallel.h"
#include "tile.h"

namespace bench::tile {

class CpuCtx : public GridPosition {
 public:
  using GridPosition::GridPosition;

  template <int N>
  Tile<int, N, N> arange() const {
    Tile<int, N, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = i;
    return r;
  }

  template <int N, class T>
  Tile<T, N, N> full(T x) const {
    return splat<N, N>(x);
  }

  template <int N, class T>
  Tile<acc_t<T>, N, N> load(const T* p, int64_t n, acc_t<T> other) const {
    Tile<acc_t<T>, N, N> r;
    if (n >= N) {
      BENCH_IVDEP for (int i = 0; i < N; ++i) r.v[i] = to_acc(p[i]);
    } else {
      const int valid = n > 0 ? static_cast<int>(n) : 0;
      for (int i = 0; i < valid; ++i) r.v[i] = to_acc(p[i]);
      for (int i = valid; i < N; ++i) r.v[i] = other;
    }
    return r;
  }

  /// tl::rows: the geometry as given (load_rows and store_rows walk the rows piece by piece).
  template <int N>
  struct Rows {
    int64_t width;
    int64_t first;
    int valid;  ///< tile elements moved: n clamped to [0, N]
  };

  template <int N>
  Rows<N> rows(int64_t width, int64_t first, int64_t n) const {
    return {width, first, n >= N ? N : (n > 0 ? static_cast<int>(n) : 0)};
  }

  template <class T, int N>
  Tile<acc_t<T>, N, N> load_rows(const T* p, int64_t stride, const Rows<N>& at, acc_t<T> other) const {
    Tile<acc_t<T>, N, N> r;
    for_row_segments(at.width, stride, at.first, at.valid, [&](int i, int64_t off, int len) {
      BENCH_IVDEP for (int k = 0; k < len; ++k) r.v[i + k] = to_acc(p[off + k]);
    });
    for (int i = at.valid; i < N; ++i) r.v[i] = other;
    return r;
  }

  template <class T, class U, int N>
  void store_rows(T* p, int64_t stride, const Rows<N>& at, const Tile<U, N, N>& x) const {
    for_row_segments(at.width, stride, at.first, at.valid, [&](int i, int64_t off, int len) {
      BENCH_IVDEP for (int k = 0; k < len; ++k) p[off + k] = from_acc<T>(x.v[i + k]);
    });
  }

  template <class T, int N>
  Tile<acc_t<T>, N, N> gather(const T* p, const Tile<int, N, N>& idx, int64_t n, acc_t<T> other) const {
    Tile<acc_t<T>, N, N> r;
    for (int i = 0; i < N; ++i) r.v[i] = i < n ? to_acc(p[idx.v[i]]) : other;
    return r;
  }

  template <class T, class U, int N>
  void store(T* p, const Tile<U, N, N>& x, int64_t n) const {
    const int valid = n >= N ? N : (n > 0 ? static_cast<int>(n) : 0);
    BENCH_IVDEP for (int i = 0; i < valid; ++i) p[i] = from_acc<T>(x.v[i]);
  }

  // Eight independent partial sums: the compiler may vectorize them without reassociating,
  // and the order is fixed, so a sum is reproducible.
  template <class U, int N>
  U sum(const Tile<U, N, N>& x) const {
    constexpr int kWays = N >= 8 ? 8 : 1;
    U part[kWays] = {};
    constexpr int kMain = N / kWays * kWays;
    for (int i = 0; i < kMain; i += kWays) {
      BENCH_IVDEP for (int w = 0; w < kWays; ++w) part[w] += x.v[i + w];
    }
    for (int i = kMain; i < N; ++i) part[0] += x.v[i];
    U s = U(0);
    for (int w = 0; w < kWays; ++w) s += part[w];
    return s;
  }

  // Eight independent partial maxima, as in sum: one serial chain of compares costs a compare
  // latency per element (it dominated the CPU softmax). The maximum is the same in any order.
  template <class U, int N>
  U max(const Tile<U, N, N>& x) const {
    constexpr int kWays = N >= 8 ? 8 : 1;
    U part[kWays];
    for (int w = 0; w < kWays; ++w) part[w] = math::lowest<U>();
    constexpr int kMain = N / kWays * kWays;
    for (int i = 0; i < kMain; i += kWays) {
      BENCH_IVDEP for (int w = 0; w < kWays; ++w) part[w] = x.v[i + w] > part[w] ? x.v[i + w] : part[w];
    }
    for (int i = kMain; i < N; ++i) part[0] = x.v[i] > part[0] ? x.v[i] : part[0];
    U m = math::lowest<U>();
    for (int w = 0; w < kWays; ++w) m = part[w] > m ? part[w] : m;
    return m;
  }

  template <class T, class U>
  void store_scalar(T* p, U v) const {
    *p = from_acc<T>(static_cast<acc_t<T>>(v));
  }

 private:
  /// f(i, at, len) for each piece of tile elements [0, valid) that lies in one row of load_rows'
  /// layout: elements i .. i + len - 1 at offsets at .. at + len - 1 from the base.
  template <class F>
  static void for_row_segments(int64_t width, int64_t stride, int64_t first, int valid, F&& f) {
    int64_t flat = first;
    for (int i = 0; i < valid;) {
      const int64_t row = flat / width, col = flat % width;
      const int len = static_cast<int>(width - col < valid - i ? width - col : valid - i);
      f(i, row * stride + col, len);
      i += len;
      flat += len;
    }
  }
};

/// Run every program of `grid` on the CPU worker threads.
template <class Program>
void launch_cpu(const Grid& grid, const Program& program) {
  parallel_for(grid.size(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      CpuCtx ctx(grid, i);
      program(ctx);
    }
  });
}

}  // namespace bench::tile
