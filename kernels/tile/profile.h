// defines: bench::tile::Traffic, traffic_bytes, LaunchObserver, KernelScope, observe_launches
//
// The hook of the per-kernel profile (docs/results.md, "The profile"): every tile::launch and
// every kernels::gemm opens a KernelScope, and while a LaunchObserver is installed on the calling
// thread the scope tells it when the kernel starts and ends and what it moves and computes. With
// no observer (every timed step) a scope costs one thread-local read.
//
// Only the outermost kernel of the observing thread is reported: a launch inside another
// KernelScope (a composed launcher that names itself, e.g. the CPU's materializing attention) or
// inside tile::parallel_for (independent tasks run concurrently around single-threaded launches)
// belongs to what encloses it, so the reported times never overlap and add up along the step.
#pragma once

#include <cstdint>

namespace bench::tile {

struct Exec;

/// What one kernel launch moves to and from memory and computes, as the kernel declares it (a
/// program's `traffic(grid)`, a GEMM's 2mnk). Negative: not declared (the profile shows no rate
/// and places no roofline mark).
///
/// bytes: every input element read once and every output element written once, as nvbench's
///   add_global_memory_reads/writes count them: unique bytes, not what caches serve (a value
///   re-read in a second pass counts once); an output that is read, modified and written
///   (y += x, in place) counts twice; a null optional pointer counts nothing; per-row scalars
///   (mean, rstd, a loss) count. What only the device knows (which gathered rows repeat, which
///   rows a target ignores) is counted as if every access were distinct.
/// flops: the arithmetic of the kernel's definition (its header's formulas), once per element
///   that takes part (masked or padded lanes do not), plus the scalar work per row (a mean's
///   division, a row's rsqrt): an add, subtract, multiply, divide, max, min or compare-and-select
///   1; an FMA 2; exp, log, tanh, erf(c), sqrt, rsqrt, pow 1 each; a sum of n values n adds.
///   Not counted: index and mask arithmetic, casts, integer hashing (dropout's mask), and what
///   an implementation recomputes (a second pass over a wide row, the exponentials of a gradient).
struct Traffic {
  double bytes = -1;
  double flops = -1;
};

/// Bytes of `count` elements of type E (for traffic declarations).
template <class E>
double traffic_bytes(double count) {
  return count * static_cast<double>(sizeof(E));
}

/// Told about each outermost kernel of the thread it is installed on (observe_launches). `name`
/// is a program's mangled type name (tile::launch), or a launcher's own label; it lives as long
/// as the process. `begin` and `end` come in pairs, on the calling thread, never nested, except
/// that a begin may have no end (KernelScope::discard: the kernel did not run after all).
class LaunchObserver {
 public:
  virtual ~LaunchObserver();
  virtual void begin(const Exec& exec, const char* name) = 0;
  virtual void end(const Exec& exec, const char* name, const Traffic& traffic) = 0;
};

/// Install `observer` on the calling thread (nullptr: none); returns the one it replaces.
LaunchObserver* observe_launches(LaunchObserver* observer);

namespace detail {
/// The calling thread's observer if a kernel it opens now is an outermost one (none open, not
/// inside parallel_for), and then marks one open; else nullptr.
LaunchObserver* claim_observer();
/// Closes what claim_observer opened.
void release_observer();
}  // namespace detail

/// One kernel, from construction to destruction, for the thread's LaunchObserver (if any).
class KernelScope {
 public:
  KernelScope(const Exec& exec, const char* name) : exec_(exec), name_(name), observer_(detail::claim_observer()) {
    if (observer_ != nullptr) observer_->begin(exec_, name_);
  }
  ~KernelScope() {
    if (observer_ != nullptr) {
      observer_->end(exec_, name_, traffic_);
      detail::release_observer();
    }
  }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
  /// Whether an observer is told about this kernel (compute traffic() only then).
  bool observed() const { return observer_ != nullptr; }
  /// The kernel did not run after all (a fused path that declined): nothing is reported for it
  /// (the observer saw its begin and sees no end).
  void discard() {
    if (observer_ != nullptr) detail::release_observer();
    observer_ = nullptr;
  }
  void set_traffic(const Traffic& t) { traffic_ = t; }

 private:
  const Exec& exec_;
  const char* name_;
  LaunchObserver* observer_;
  Traffic traffic_;
};

}  // namespace bench::tile
