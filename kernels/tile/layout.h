// defines: bench::tile::Layout, threads_for_tile
//
// The element-to-thread mapping of the CUDA executor. It lives in plain C++ so that the
// emulated-block executor (kernels/tile/emulated_executor.h) runs exactly this mapping on the
// CPU, lane by lane, and CI tests the GPU indexing without a GPU.
#pragma once

#include "defs.h"

namespace bench::tile {

/// Threads per block for a program whose widest tile has `n` elements: each thread owns at
/// least 4 consecutive elements (one 16-byte float load), between one warp and 256 threads.
BENCH_HD constexpr int threads_for_tile(int n) { return n >= 1024 ? 256 : (n >= 128 ? n / 4 : (n >= 32 ? 32 : n)); }

/// How a tile of N elements is spread over TH threads: thread `lane` owns kPer elements, in
/// runs of kVec consecutive elements (one vector access), runs of neighbouring threads adjacent
/// in memory so that a warp's accesses coalesce.
template <int N, int TH>
struct Layout {
  static_assert(TH > 0 && N % TH == 0, "tile size must be a multiple of the thread count");
  static constexpr int kPer = N / TH;
  static constexpr int kVec = kPer % 4 == 0 ? 4 : (kPer % 2 == 0 ? 2 : 1);
  /// Index within the tile of the i-th element held by thread `lane`.
  BENCH_HD static constexpr int element(int lane, int i) { return (i / kVec) * (TH * kVec) + lane * kVec + (i % kVec); }
};

}  // namespace bench::tile
