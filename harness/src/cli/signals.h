// defines: bench::cli::start_signal_thread, arm_stop, disarm_stop, SpawnSignals
//
// How `bench` receives SIGINT and SIGTERM. No thread of the process ever runs a signal handler:
// both signals are blocked in every thread (main blocks them before any other thread exists, and
// threads inherit the mask), and one thread takes them with sigwait.
//
// Why: Debian's oneDNN (2.6, used for the CPU GEMM) runs its JIT GEMM kernels with rsp pointing
// into a heap buffer; a signal handled while such a kernel runs writes its frame onto the heap
// and corrupts it (oneDNN issue #4845, fixed upstream in PR #4855, 2026). With a handler, Ctrl-C
// during training aborted the process ("corrupted size vs. prev_size") about once in thirty.
#pragma once

#include <spawn.h>

#include <atomic>

namespace bench::cli {

/// Blocks SIGINT and SIGTERM in the calling thread and starts the thread that receives them.
/// Call first in main(), before anything starts a thread. Until arm_stop, a signal ends the
/// process as if it were not blocked (the default action).
void start_signal_thread();

/// From now on the first SIGINT or SIGTERM sets `*stop` and stores the signal in `*which`; with
/// `second_ends` a second one ends the process at once (an impatient Ctrl-C), without it further
/// signals are only noted (a child that gets the same stop from its terminal and its parent).
void arm_stop(std::atomic<bool>* stop, std::atomic<int>* which, bool second_ends);

/// Back to the default: a signal ends the process.
void disarm_stop();

/// posix_spawn attributes that give a child the default disposition and an empty mask for
/// SIGINT and SIGTERM (a signal mask survives exec: without them `sbatch` or a child `bench`
/// would start deaf to Ctrl-C).
class SpawnSignals {
 public:
  SpawnSignals();
  ~SpawnSignals();
  SpawnSignals(const SpawnSignals&) = delete;
  SpawnSignals& operator=(const SpawnSignals&) = delete;
  const posix_spawnattr_t* get() const { return &attr_; }

 private:
  posix_spawnattr_t attr_{};
};

}  // namespace bench::cli
