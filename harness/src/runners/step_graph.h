// defines: bench::StepReplay, graphs_possible, CapturedStep, capture_step — a step captured once and
// replayed (CUDA graphs), in one place for every runner
//
// On a GPU the step is a kernels::cuda::StepGraph; on the guarded device an emulation runs the
// step again at each replay under the rules of capture (RunContext::capturing and a
// kernels::CaptureScope: no tokens copied, nothing read back, nothing allocated), so that CI runs
// the path, replays included, without a GPU. The CPU never captures. What a step must satisfy to
// be captured is in docs/gpu-path.md ("CUDA graphs").
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "bench/interfaces.h"

namespace bench {

/// Whether steps on exec's target can be captured: CUDA, and the guarded device (emulated).
bool graphs_possible(const tile::Exec& exec);

/// A step captured once and then replayed. Capturing runs nothing (on a GPU the stream records;
/// the emulation records the callable); the step's work happens at each launch().
class StepReplay {
 public:
  /// Captures what `enqueue` puts on ctx's stream. `enqueue` must outlive this object. Throws
  /// (std::runtime_error from the CUDA capture, std::logic_error from a CaptureScope) with what
  /// broke the capture.
  StepReplay(RunContext& ctx, std::function<void()>& enqueue);
  ~StepReplay();
  StepReplay(const StepReplay&) = delete;
  StepReplay& operator=(const StepReplay&) = delete;
  /// Enqueue one replay (does not wait). In the emulation the step runs here, under the rules of
  /// capture: a read-back throws std::logic_error naming itself.
  void launch();
  /// Kernel and memset/memcpy nodes of the CUDA graph; 0 for the emulation.
  size_t nodes() const;

 private:
  struct Graph;  // the CUDA graph (runners/step_graph.cpp)
  RunContext& ctx_;
  std::function<void()>& enqueue_;
  std::unique_ptr<Graph> graph_;  // null in the emulation
};

/// A step's capture as a runner wants it: the replay, or why there is none.
struct CapturedStep {
  std::unique_ptr<StepReplay> replay;
  std::string why_not;  ///< what broke the capture (or its first replay); empty when captured
};

/// Capture `enqueue` and replay it once, waiting for it, so that what breaks a capture shows here
/// and not in the middle of a timing (the emulation's first replay is where a read-back shows).
/// The caller has run the step uncaptured first (it stages the tokens and makes the plans and
/// workspaces the capture reuses). A failure leaves the stream usable: the caller can go on
/// with the uncaptured step.
CapturedStep capture_step(RunContext& ctx, std::function<void()>& enqueue);

}  // namespace bench
