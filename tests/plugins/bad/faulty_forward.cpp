// Registers fine and sets up fine; its norms fail in forward, each its own way: by throwing, by
// dereferencing a null pointer (SIGSEGV) and by calling abort() (SIGABRT). throws_in_forward is
// used by tests/cli/robustness_test.cpp (a failed case); the crashing two are for a test of case
// isolation (`bench run --isolate`, not built yet).
#include <cstdlib>
#include <stdexcept>

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

}  // namespace

BENCH_PLUGIN("faulty_forward", "0.1", "test plugin: norms whose forward throws, segfaults or aborts") {
  registrar.add(bench::make_info<FaultyNorm<Fault::kThrow>>(bench::Slot::kNorm, "throws_in_forward",
                                                            "forward throws std::runtime_error", {}));
  registrar.add(bench::make_info<FaultyNorm<Fault::kSegfault>>(bench::Slot::kNorm, "segfaults_in_forward",
                                                               "forward dereferences a null pointer", {}));
  registrar.add(bench::make_info<FaultyNorm<Fault::kAbort>>(bench::Slot::kNorm, "aborts_in_forward",
                                                            "forward calls abort()", {}));
}
