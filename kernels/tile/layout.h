// defines: bench::tile::Layout, threads_for_tile, run_of, min_blocks_of, kRun16
//
// The element-to-thread mapping of the CUDA executor. It lives in plain C++ so that the
// emulated-block executor (kernels/tile/emulated_executor.h) runs exactly this mapping on the
// CPU, lane by lane, and CI tests the GPU indexing without a GPU.
#pragma once

#include "defs.h"

namespace bench::tile {

/// Elements of T in 16 bytes (4 float, 8 bf16, 2 double): the run a program over T storage
/// declares as `static constexpr int kRun = tile::kRun16<T>;`, so that each thread moves its
/// elements with 16-byte accesses whatever the dtype.
template <class T>
inline constexpr int kRun16 = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

/// The run length of Program: its `kRun` when it declares one, else 4.
template <class Program>
constexpr int run_of() {
  if constexpr (requires { Program::kRun; }) {
    return Program::kRun;
  } else {
    return 4;
  }
}

/// The blocks of Program that the CUDA build is compiled to fit on one SM at once: its
/// `kMinBlocks` when it declares one, else 1 (__launch_bounds__'s minimum blocks: ptxas then keeps
/// the kernel within 65,536 / (kMinBlocks x threads) registers a thread, rounded down to 8).
template <class Program>
constexpr int min_blocks_of() {
  if constexpr (requires { Program::kMinBlocks; }) {
    return Program::kMinBlocks;
  } else {
    return 1;
  }
}

/// Threads per block for a program whose widest tile has `n` elements and whose runs are `run`
/// elements long: one run per thread (n / run), between one warp and 256 threads; a tile of
/// fewer than 32 elements gets one thread per element. A thread then owns at least `run`
/// consecutive elements when n >= 32 run (a 1024-wide tile: 256 threads for float, 128 for
/// bf16), and tiles of 3 * 2^k elements (768) keep every thread busy (192 or 96 threads).
BENCH_HD constexpr int threads_for_tile(int n, int run = 4) {
  if (n < 32) return n;
  const int t = n / run;
  return t < 32 ? 32 : (t > 256 ? 256 : t);
}

/// How a tile of N elements is spread over TH threads: thread `lane` owns kPer elements, in
/// runs of kVec consecutive elements (one vector access of up to 16 bytes, or several), runs of
/// neighbouring threads adjacent in memory so that a warp's accesses coalesce. kVec is the
/// largest power of two up to `Run` that divides kPer.
template <int N, int TH, int Run = 4>
struct Layout {
  static_assert(TH > 0 && N % TH == 0, "tile size must be a multiple of the thread count");
  static_assert(Run > 0 && (Run & (Run - 1)) == 0, "the run length is a power of two");
  static constexpr int kPer = N / TH;
  static constexpr int kVec = [] {
    int v = Run;
    while (kPer % v != 0) v /= 2;
    return v;
  }();
  /// Index within the tile of the i-th element held by thread `lane`.
  BENCH_HD static constexpr int element(int lane, int i) { return (i / kVec) * (TH * kVec) + lane * kVec + (i % kVec); }
};

}  // namespace bench::tile
