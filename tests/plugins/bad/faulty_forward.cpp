// Registers fine and sets up fine; its norms fail in forward, each its own way: by throwing, by
// dereferencing a null pointer (SIGSEGV) and by calling abort() (SIGABRT). throws_in_forward is
// used by tests/cli/robustness_test.cpp (a failed case); the crashing two are for a test of case
// isolation (`bench run --isolate`, not built yet). reads_back_in_forward is a norm that works
// (the identity) but reads its output back to the host in every forward, which a CUDA-graph
// capture forbids: tests/cli/cli_test.cpp's fallback of the throughput runner's cuda_graph;
// reads_back_when_probing does so only in a step that gathers layer probes (a stability run's
// logging steps): tests/cli/stability_graph_test.cpp's fallback of one kind of step.
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "bench/bench.h"

namespace {

enum class Fault { kThrow, kSegfault, kAbort };

template <Fault F>
class FaultyNorm final : public bench::Sublayer {
 public:
  explicit FaultyNorm(const bench::Params&) {}
  void forward(const bench::Tensor&, bench::Tensor&, bench::RunContext&) override {
    if constexpr (F == Fault::kThrow) {
      throw std::runtime_error("forward of throws_in_forward failed on purpose");
    } else if constexpr (F == Fault::kSegfault) {
      // Both volatile: GCC drops a plain store through a (volatile-read) null pointer.
      volatile int* volatile p = nullptr;
      *p = 42;
    } else {
      std::abort();
    }
  }
  void backward(const bench::Tensor&, bench::Tensor&, bench::RunContext&) override {}
};

/// y = x, and y read back to the host (a probe would do this): fine, except under capture.
class ReadsBackNorm final : public bench::Sublayer {
 public:
  explicit ReadsBackNorm(const bench::Params&) {}
  void forward(const bench::Tensor& x, bench::Tensor& y, bench::RunContext&) override {
    bench::ops::copy(x, y);
    std::vector<char> storage;
    (void)bench::ops::on_host(y, storage);
  }
  void backward(const bench::Tensor& dy, bench::Tensor& dx, bench::RunContext&) override { bench::ops::copy(dy, dx); }
};

/// y = x, read back to the host only in a step that gathers the layer probes (ctx.layer_probes: a
/// stability run's logging steps), as a probe that is not capturable would: the logging step
/// cannot be captured, the plain step can (tests/cli/stability_graph_test.cpp).
class ReadsBackWhenProbingNorm final : public bench::Sublayer {
 public:
  explicit ReadsBackWhenProbingNorm(const bench::Params&) {}
  void forward(const bench::Tensor& x, bench::Tensor& y, bench::RunContext& ctx) override {
    bench::ops::copy(x, y);
    if (!ctx.layer_probes) return;
    std::vector<char> storage;
    (void)bench::ops::on_host(y, storage);
  }
  void backward(const bench::Tensor& dy, bench::Tensor& dx, bench::RunContext&) override { bench::ops::copy(dy, dx); }
};

}  // namespace

BENCH_PLUGIN("faulty_forward", "0.1", "test plugin: norms whose forward throws, segfaults or aborts") {
  registrar.add(bench::make_info<FaultyNorm<Fault::kThrow>>(bench::Slot::kNorm, "throws_in_forward",
                                                            "forward throws std::runtime_error", {}));
  registrar.add(bench::make_info<FaultyNorm<Fault::kSegfault>>(bench::Slot::kNorm, "segfaults_in_forward",
                                                               "forward dereferences a null pointer", {}));
  registrar.add(bench::make_info<FaultyNorm<Fault::kAbort>>(bench::Slot::kNorm, "aborts_in_forward",
                                                            "forward calls abort()", {}));
  registrar.add(bench::make_info<ReadsBackNorm>(bench::Slot::kNorm, "reads_back_in_forward",
                                                "the identity, read back to the host in every forward", {}));
  registrar.add(bench::make_info<ReadsBackWhenProbingNorm>(
      bench::Slot::kNorm, "reads_back_when_probing", "the identity, read back to the host when probing layers", {}));
}
