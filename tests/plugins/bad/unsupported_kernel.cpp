// A plugin whose FFN meets a kernel its target cannot run: forward throws the tile::Unsupported
// that tile::launch throws for a program with no build for the target (a plugin built without
// CUDA, run on a GPU), with this library as the program's module. For
// tests/plugins/example_test.cpp: the model names the component, the kernel and the device.
#include "bench/bench.h"

namespace {

class Refuses final : public bench::Sublayer {
 public:
  explicit Refuses(const bench::Params&) {}
  void forward(const bench::Tensor&, bench::Tensor&, bench::RunContext& ctx) override {
    throw bench::tile::Unsupported("demo::Scale<float>", bench::tile::target_name(ctx.exec),
                                   "libbad_unsupported_kernel.so was built without CUDA",
                                   "libbad_unsupported_kernel.so");
  }
  void backward(const bench::Tensor&, bench::Tensor&, bench::RunContext&) override {}
};

}  // namespace

BENCH_PLUGIN("unsupported_kernel", "0.1", "test plugin: an FFN whose kernel its target cannot run") {
  registrar.add(bench::make_info<Refuses>(bench::Slot::kFfn, "refuses", "forward meets an unsupported kernel", {}));
}
