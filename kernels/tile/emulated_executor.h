// defines: bench::tile::EmulatedCtx, launch_emulated
//
// Runs a tile program with the CUDA executor's element-to-thread mapping (Layout) and its
// two-level reductions, lane by lane, on the CPU. A tile holds every lane's registers side by
// side: element i of lane l sits at v[l * kPer + i] and stands for tile index
// Layout::element(l, i). Wrong indexing in the mapping shows up here as wrong results in CI.
#pragma once

#include <cstdint>
#include <type_traits>

#include "defs.h"
#include "layout.h"
#include "packed.h"
#include "parallel.h"
#include "tile.h"

namespace bench::tile {

template <int TH, int Run = 4>
class EmulatedCtx : public GridPosition {
 public:
  using GridPosition::GridPosition;

  template <int N>
  Tile<int, N, N> arange() const {
    Tile<int, N, N> r;
    for (int lane = 0; lane < TH; ++lane)
      for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) r.v[slot<N>(lane, i)] = Layout<N, TH, Run>::element(lane, i);
    return r;
  }

  template <int N, class T>
  Tile<T, N, N> full(T x) const {
    return splat<N, N>(x);
  }

  // bf16 in runs of two or more comes back packed, as from the CUDA executor (tile/packed.h), so
  // that the programs' packed path runs here too.
  template <int N, class T>
  auto load(const T* p, int64_t n, acc_t<T> other) const {
    if constexpr (kLoadsPacked<T, Layout<N, TH, Run>::kVec>) {  // NOLINT(bugprone-branch-clone): one is discarded
      return pack<N>(n, other, [&](int e) { return p[e].bits; });
    } else {
      return load_unpacked<N>(p, n, other);
    }
  }

  /// tl::rows: the geometry as given; every element's row and column are computed at its access,
  /// as the definition reads (the CUDA executor's per-run addressing is checked against it).
  template <int N>
  struct Rows {
    int64_t width;
    int64_t first;
    int64_t n;
  };

  template <int N>
  Rows<N> rows(int64_t width, int64_t first, int64_t n) const {
    return {width, first, n};
  }

  template <class T, int N>
  auto load_rows(const T* p, int64_t stride, const Rows<N>& at, acc_t<T> other) const {
    if constexpr (kLoadsPacked<T, Layout<N, TH, Run>::kVec>) {  // NOLINT(bugprone-branch-clone): one is discarded
      return pack<N>(at.n, other, [&](int e) { return p[offset(at, stride, e)].bits; });
    } else {
      return load_rows_unpacked<N>(p, stride, at, other);
    }
  }

  /// A packed tile's words as floats, `other` at or past n (Packed's conversion).
  template <int N, int L>
  static Tile<float, N, L> unpack(const uint32_t* words, int64_t n, float other) {
    static_assert(L == N, "every lane's elements side by side");
    Tile<float, N, L> r;
    for (int lane = 0; lane < TH; ++lane)
      for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) {
        const int s = slot<N>(lane, i);
        const auto bits = static_cast<uint16_t>(words[s / 2] >> (s % 2 * 16));
        r.v[s] = Layout<N, TH, Run>::element(lane, i) < n ? bf16_to_float(bf16{bits}) : other;
      }
    return r;
  }

  template <class T, class U, int N>
  void store_rows(T* p, int64_t stride, const Rows<N>& at, const Tile<U, N, N>& x) const {
    for (int lane = 0; lane < TH; ++lane)
      for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) {
        const int e = Layout<N, TH, Run>::element(lane, i);
        if (e < at.n) p[offset(at, stride, e)] = from_acc<T>(x.v[slot<N>(lane, i)]);
      }
  }

  template <class T, int N>
  Tile<acc_t<T>, N, N> gather(const T* p, const Tile<int, N, N>& idx, int64_t n, acc_t<T> other) const {
    Tile<acc_t<T>, N, N> r;
    for (int lane = 0; lane < TH; ++lane)
      for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) {
        const int s = slot<N>(lane, i);
        r.v[s] = Layout<N, TH, Run>::element(lane, i) < n ? to_acc(p[idx.v[s]]) : other;
      }
    return r;
  }

  template <class T, class U, int N>
  void store(T* p, const Tile<U, N, N>& x, int64_t n) const {
    for (int lane = 0; lane < TH; ++lane)
      for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) {
        const int e = Layout<N, TH, Run>::element(lane, i);
        if (e < n) p[e] = from_acc<T>(x.v[slot<N>(lane, i)]);
      }
  }

  /// A packed tile stored as bf16: its bits as loaded (`other` rounded at or past x.n), as the
  /// CUDA executor stores one.
  template <int N>
  void store(bf16* p, const Packed<N, N, EmulatedCtx>& x, int64_t n) const {
    for (int lane = 0; lane < TH; ++lane)
      for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) {
        const int e = Layout<N, TH, Run>::element(lane, i);
        if (e < n) p[e] = e < x.n ? bf16{x.bits(slot<N>(lane, i))} : from_acc<bf16>(x.other);
      }
  }

  template <class U, int N>
  U sum(const Tile<U, N, N>& x) const {
    U lane_val[TH];
    for (int lane = 0; lane < TH; ++lane) {
      const int b = lane * Layout<N, TH, Run>::kPer;
      lane_val[lane] = local_sum(x, b, b + Layout<N, TH, Run>::kPer);
    }
    return block_reduce(lane_val, [](U a, U b) { return a + b; });
  }

  template <class U, int N>
  U max(const Tile<U, N, N>& x) const {
    U lane_val[TH];
    for (int lane = 0; lane < TH; ++lane) {
      const int b = lane * Layout<N, TH, Run>::kPer;
      lane_val[lane] = local_max(x, b, b + Layout<N, TH, Run>::kPer);
    }
    return block_reduce(lane_val, [](U a, U b) { return a > b ? a : b; });
  }

  template <class T, class U>
  void store_scalar(T* p, U v) const {
    *p = from_acc<T>(static_cast<acc_t<T>>(v));  // lane 0 only, as on the GPU
  }

 private:
  template <int N, class T>
  Tile<acc_t<T>, N, N> load_unpacked(const T* p, int64_t n, acc_t<T> other) const {
    Tile<acc_t<T>, N, N> r;
    for (int lane = 0; lane < TH; ++lane)
      for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) {
        const int e = Layout<N, TH, Run>::element(lane, i);
        r.v[slot<N>(lane, i)] = e < n ? to_acc(p[e]) : other;
      }
    return r;
  }

  template <int N, class T>
  Tile<acc_t<T>, N, N> load_rows_unpacked(const T* p, int64_t stride, const Rows<N>& at, acc_t<T> other) const {
    Tile<acc_t<T>, N, N> r;
    for (int lane = 0; lane < TH; ++lane)
      for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) {
        const int e = Layout<N, TH, Run>::element(lane, i);
        r.v[slot<N>(lane, i)] = e < at.n ? to_acc(p[offset(at, stride, e)]) : other;
      }
    return r;
  }

  // Where tile element e of the geometry `at` lies, rows `stride` apart.
  template <int N>
  static int64_t offset(const Rows<N>& at, int64_t stride, int e) {
    const int64_t f = at.first + e;
    return (f / at.width) * stride + f % at.width;
  }

  template <int N>
  static constexpr int slot(int lane, int i) {
    return lane * Layout<N, TH, Run>::kPer + i;
  }

  // The packed tile of the elements e < n, `bits(e)` each (0 past n: unpack gives `other`).
  template <int N, class Bits>
  Packed<N, N, EmulatedCtx> pack(int64_t n, float other, Bits bits) const {
    Packed<N, N, EmulatedCtx> r;
    r.n = n;
    r.other = other;
    for (int lane = 0; lane < TH; ++lane)
      for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) {
        const int s = slot<N>(lane, i);
        const int e = Layout<N, TH, Run>::element(lane, i);
        const uint32_t half = e < n ? bits(e) : 0U;
        r.words[s / 2] = s % 2 == 0 ? half : r.words[s / 2] | half << 16;
      }
    return r;
  }

  // Warp-shuffle tree (offsets 16, 8, 4, 2, 1 inside each 32-lane warp), then warp leaders
  // combined in order: the shape of a warp-reduction block reduce.
  template <class U, class Op>
  static U block_reduce(U* val, Op op) {
    constexpr int kWarp = TH < 32 ? TH : 32;  // NOLINT(bugprone-branch-clone): equal only when TH == 32
    for (int w0 = 0; w0 < TH; w0 += kWarp) {
      for (int off = kWarp / 2; off > 0; off /= 2)
        for (int l = 0; l < off; ++l) val[w0 + l] = op(val[w0 + l], val[w0 + l + off]);
    }
    U r = val[0];
    for (int w0 = kWarp; w0 < TH; w0 += kWarp) r = op(r, val[w0]);
    return r;
  }
};

/// Run every program of `grid` with the CUDA executor's mapping for Program::kBlock and its run.
template <class Program>
void launch_emulated(const Grid& grid, const Program& program) {
  constexpr int kRun = run_of<Program>();
  constexpr int kThreads = threads_for_tile(Program::kBlock, kRun);
  static_assert(kThreads % 32 == 0 || (kThreads < 32 && (kThreads & (kThreads - 1)) == 0),
                "emulated block size: whole warps, or a power of two below one warp");
  parallel_for(grid.size(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      EmulatedCtx<kThreads, kRun> ctx(grid, i);
      program(ctx);
    }
  });
}

}  // namespace bench::tile
