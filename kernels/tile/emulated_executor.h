// defines: bench::tile::EmulatedCtx, launch_emulated
//
// Runs a tile program with the CUDA executor's element-to-thread mapping (Layout) and its
// two-level reductions, lane by lane, on the CPU. A tile holds every lane's registers side by
// side: element i of lane l sits at v[l * kPer + i] and stands for tile index
// Layout::element(l, i). Every load and store runs the CUDA executor's own per-thread code
// (tile/thread_access.h) for each lane in turn: its vector accesses and their fallbacks, tl::rows'
// walk across rows, bf16's packing, the tails. Wrong indexing or a wrong branch there shows up
// here as wrong results in CI.
#pragma once

#include <cstdint>
#include <type_traits>

#include "defs.h"
#include "layout.h"
#include "packed.h"
#include "parallel.h"
#include "thread_access.h"
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
      Packed<N, N, EmulatedCtx> r;
      r.n = n;
      r.other = other;
      for (int lane = 0; lane < TH; ++lane) Access::template load_packed<N>(lane, p, n, words_of<N>(r.words, lane));
      return r;
    } else {
      Tile<acc_t<T>, N, N> r;
      for (int lane = 0; lane < TH; ++lane) Access::template load<N>(lane, p, n, other, &r.v[slot<N>(lane, 0)]);
      return r;
    }
  }

  /// tl::rows: every lane's runs' rows and columns, as the CUDA executor's threads hold them.
  template <int N>
  struct Rows {
    typename ThreadAccess<TH, Run>::template Rows<N> lane[TH];
    int64_t n;
  };

  template <int N>
  Rows<N> rows(int64_t width, int64_t first, int64_t n) const {
    Rows<N> r;
    r.n = n;
    for (int lane = 0; lane < TH; ++lane) r.lane[lane] = Access::template rows<N>(lane, width, first, n);
    return r;
  }

  template <class T, int N>
  auto load_rows(const T* p, int64_t stride, const Rows<N>& at, acc_t<T> other) const {
    if constexpr (kLoadsPacked<T, Layout<N, TH, Run>::kVec>) {  // NOLINT(bugprone-branch-clone): one is discarded
      Packed<N, N, EmulatedCtx> r;
      r.n = at.n;
      r.other = other;
      for (int lane = 0; lane < TH; ++lane)
        Access::template load_rows_packed<N>(lane, p, stride, at.lane[lane], words_of<N>(r.words, lane));
      return r;
    } else {
      Tile<acc_t<T>, N, N> r;
      for (int lane = 0; lane < TH; ++lane)
        Access::template load_rows<T, N>(lane, p, stride, at.lane[lane], other, &r.v[slot<N>(lane, 0)]);
      return r;
    }
  }

  /// A packed tile's words as floats, `other` at or past n (Packed's conversion).
  template <int N, int L>
  static Tile<float, N, L> unpack(const uint32_t* words, int64_t n, float other) {
    static_assert(L == N, "every lane's elements side by side");
    Tile<float, N, L> r;
    for (int lane = 0; lane < TH; ++lane)
      Access::template unpack<N>(lane, words + slot<N>(lane, 0) / 2, n, other, &r.v[slot<N>(lane, 0)]);
    return r;
  }

  template <class T, class U, int N>
  void store_rows(T* p, int64_t stride, const Rows<N>& at, const Tile<U, N, N>& x) const {
    for (int lane = 0; lane < TH; ++lane)
      Access::template store_rows<T, U, N>(lane, p, stride, at.lane[lane], &x.v[slot<N>(lane, 0)]);
  }

  template <class T, int N>
  Tile<acc_t<T>, N, N> gather(const T* p, const Tile<int, N, N>& idx, int64_t n, acc_t<T> other) const {
    Tile<acc_t<T>, N, N> r;
    for (int lane = 0; lane < TH; ++lane)
      Access::template gather<T, N>(lane, p, &idx.v[slot<N>(lane, 0)], n, other, &r.v[slot<N>(lane, 0)]);
    return r;
  }

  template <class T, class U, int N>
  void store(T* p, const Tile<U, N, N>& x, int64_t n) const {
    for (int lane = 0; lane < TH; ++lane) Access::template store<T, U, N>(lane, p, &x.v[slot<N>(lane, 0)], n);
  }

  /// A packed tile stored as bf16: its bits as loaded (`other` rounded at or past x.n), as the
  /// CUDA executor stores one.
  template <int N>
  void store(bf16* p, const Packed<N, N, EmulatedCtx>& x, int64_t n) const {
    for (int lane = 0; lane < TH; ++lane) {
      const LanePacked part{x.words + slot<N>(lane, 0) / 2, x.n, x.other};
      Access::template store_packed<N>(lane, p, part, n);
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
  using Access = ThreadAccess<TH, Run>;

  template <int N>
  static constexpr int slot(int lane, int i) {
    return lane * Layout<N, TH, Run>::kPer + i;
  }

  // One lane's part of a packed tile, as ThreadAccess::store_packed reads a thread's Packed.
  struct LanePacked {
    const uint32_t* words;
    int64_t n;
    float other;
    uint16_t bits(int k) const { return static_cast<uint16_t>(words[k / 2] >> (k % 2 * 16)); }
  };

  // Lane `lane`'s words of a packed tile (its kPer elements, two to a word).
  template <int N>
  static uint32_t* words_of(uint32_t* words, int lane) {
    return words + slot<N>(lane, 0) / 2;
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
