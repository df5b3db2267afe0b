// A step captured once and replayed (runners/step_graph.h).
#include "runners/step_graph.h"

#include <stdexcept>

#include "kernels/device_runtime.h"
#include "kernels/memory.h"

namespace bench {

namespace {

/// ctx.capturing and a CaptureScope while it lives (a read-back names itself instead of breaking
/// the capture).
struct Capturing {
  explicit Capturing(RunContext& c) : ctx(c) { ctx.capturing = true; }
  ~Capturing() { ctx.capturing = false; }
  Capturing(const Capturing&) = delete;
  Capturing& operator=(const Capturing&) = delete;
  RunContext& ctx;
  const kernels::CaptureScope scope;
};

}  // namespace

#if BENCH_HAVE_CUDA
struct StepReplay::Graph {
  explicit Graph(void* stream) : graph(stream) {}
  kernels::cuda::StepGraph graph;
};
#else
struct StepReplay::Graph {};
#endif

bool graphs_possible(const tile::Exec& exec) {
  return exec.backend == tile::Backend::kCuda || exec.backend == tile::Backend::kGuarded;
}

StepReplay::StepReplay(RunContext& ctx, std::function<void()>& enqueue) : ctx_(ctx), enqueue_(enqueue) {
#if BENCH_HAVE_CUDA
  if (ctx.exec.backend == tile::Backend::kCuda) {
    graph_ = std::make_unique<Graph>(ctx.exec.stream);
    const Capturing on(ctx_);
    graph_->graph.capture(enqueue_);
  }
#endif
}

StepReplay::~StepReplay() = default;

void StepReplay::launch() {
#if BENCH_HAVE_CUDA
  if (graph_) {
    graph_->graph.launch();
    return;
  }
#endif
  const Capturing on(ctx_);
  enqueue_();
}

size_t StepReplay::nodes() const {
#if BENCH_HAVE_CUDA
  if (graph_) return graph_->graph.nodes();
#endif
  return 0;
}

CapturedStep capture_step(RunContext& ctx, std::function<void()>& enqueue) {
  CapturedStep out;
  try {
    out.replay = std::make_unique<StepReplay>(ctx, enqueue);
    out.replay->launch();
    kernels::synchronize(ctx.exec);
  } catch (const std::exception& e) {
    out.replay.reset();
    out.why_not = e.what();
  }
  return out;
}

}  // namespace bench
