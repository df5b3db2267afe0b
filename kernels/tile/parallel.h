// defines: bench::tile::parallel_for, in_parallel_for, set_num_threads, num_threads
//
// The one place where the CPU side of the project goes parallel (OpenMP inside parallel.cpp),
// so that plugins and headers never need OpenMP flags.
#pragma once

#include <cstdint>

namespace bench::tile {

/// Callback over a half-open range of indices [begin, end).
using RangeFn = void (*)(void* arg, int64_t begin, int64_t end);

/// Split [0, n) into contiguous, statically assigned chunks over the worker threads and call
/// `fn` on each. The split depends only on n and the thread count, so results are reproducible.
/// Called from inside a parallel region it runs serially on the calling thread.
void parallel_for(int64_t n, RangeFn fn, void* arg);

/// Convenience wrapper for any callable `f(begin, end)`.
template <class F>
void parallel_for(int64_t n, F&& f) {
  parallel_for(
      n, [](void* a, int64_t b, int64_t e) { (*static_cast<F*>(a))(b, e); }, static_cast<void*>(&f));
}

/// Whether the calling thread is running a range of some parallel_for now (any thread of its
/// team, the calling one included, or the serial path).
bool in_parallel_for();

/// Number of CPU worker threads used by parallel_for (and by the CPU GEMM); on first use the
/// default team is decided (tile/threads.h).
int num_threads();
/// Set the worker thread count (<= 0 restores the default: one per usable CPU); tile::set_team
/// with the reason for the record is what the harness calls.
void set_num_threads(int n);

}  // namespace bench::tile
