// Registers an attention core under a name the built-in attention plugin already uses.
#include "bench/bench.h"

namespace {
class Twin final : public bench::AttentionCore {
 public:
  void setup(bench::SetupContext&, const bench::kernels::AttentionArgs&) override {}
  void forward(bench::RunContext&, const bench::kernels::AttentionArgs&, const bench::Tensor&, bench::Tensor&,
               void*) override {}
  void backward(bench::RunContext&, const bench::kernels::AttentionArgs&, const bench::Tensor&, const bench::Tensor&,
                const bench::Tensor&, bench::Tensor&) override {}
};
std::string runs(const bench::AttentionCoreQuery&) { return ""; }
bool no(const bench::AttentionCoreQuery&) { return false; }

BENCH_ATTENTION_CORE(Twin, "materializing", "an impostor", runs, no, nullptr)
}  // namespace

BENCH_PLUGIN("duplicate_core", "0.1", "test plugin: a second attention core 'materializing'") {}
