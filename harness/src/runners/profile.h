// defines: bench::StepProfile, profile_step — the per-kernel profile of one throughput mode
//
// Runs a mode's step in separate, untimed repetitions under a tile::LaunchObserver (every
// outermost tile::launch, GEMM and composed launcher: kernels/tile/profile.h) and a
// ComponentListener (every call into a component: model/component_calls.h), and returns one
// ProfileRow per (component, pass, kernel) of one step (docs/results.md, "The profile").
//
// Times: on the host, a steady clock around each kernel; on CUDA, events recorded on the
// kernel's stream before and after it, read once the step has synchronized. A component's time
// outside its kernels and its children is its "(host)" row on the host; on CUDA, where the host
// only enqueues, the step's time outside every kernel is one "(between kernels)" row instead. On
// the host the rows add up to the profiled step's time by construction; what the profile adds to
// a step is the clock reads and the bookkeeping (a few microseconds per kernel).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/tile/exec.h"
#include "store/record.h"

namespace bench {

struct StepProfile {
  std::vector<ProfileRow> rows;  ///< of one step, in the order first seen
  double step_ms = 0;            ///< the profiled step's time (mean over the steps)
};

/// Runs `enqueue` (one step of `mode` on exec's target), and waits for the target, once to warm up
/// and then `steps` times under the profile; each row's ms is its mean over those steps, and so
/// is step_ms: means add up (on the host the rows of every step add up to that step), where
/// medians would not (under load, preemptions land on a few random kernels of each step, which
/// each row's median drops and the step's keeps).
/// Throws bench::Error when steps < 1.
StepProfile profile_step(const tile::Exec& exec, const std::string& mode, const std::function<void()>& enqueue,
                         int steps);

}  // namespace bench
