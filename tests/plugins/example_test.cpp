// plugins/example/relu2_ffn.cpp, built in tree unchanged as any plugin is (tests/CMakeLists.txt):
// its own tile programs run on the CPU, emulated-block and guarded executors, where a model with
// it computes what the built-in MLP with ReLU^2 computes from the same weights; in a CUDA build
// its CUDA pass compiled and registered the CUDA builds of those programs. And a kernel that a
// component's target cannot run is an error naming the component, the kernel and the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "bench/ops.h"
#include "kernels/memory.h"
#include "model/model.h"
#include "runners/registry.h"
#include "support/toml_case.h"
#include "support/train_step.h"

namespace bench {
namespace example_test {
namespace {

/// The built-in plugins, the in-tree relu2 example and the unsupported-kernel fixture.
Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    reg->load_defaults();
    reg->load_directory(BENCH_BINARY_DIR "/test_plugins/relu2", true);
    reg->load_directory(BENCH_BINARY_DIR "/test_plugins/unsupported_kernel", true);
    return reg;
  }();
  return *r;
}

ResolvedCase resolve(const std::string& ffn, const std::string& device, const std::string& dtype = "float32") {
  const std::string toml =
      "[model]\nd_model = 32\nn_layers = 2\nn_heads = 2\nseq_len = 16\nbatch_size = 4\n"
      "dtype = \"" +
      dtype + "\"\nffn = " + ffn +
      "\n[data]\ntype = \"synthetic\"\n"
      "reference_tokens = 2048\n[stability]\n";
  const ExperimentFile f = read_experiment(test::write_temp("relu2_" + device + ".toml", toml), runner_sections());
  return resolve_case(expand_cases(f, registry(), device).at(0), registry(), runner_sections());
}

/// Loss and grad norm of one training step of `m` on `backend` (batch 1).
std::pair<double, double> step(Model& m, const ResolvedCase& rc, tile::Backend backend) {
  return test::loss_and_grad_norm(m, test::batch_of(rc, 1), backend);
}

/// relu2's w1/w2 into the MLP's w_in/w_out (and every other parameter by name).
void copy_weights(const Model& from, Model& to) {
  std::vector<char> staging;
  for (const Param* p : from.params()) {
    std::string name = p->name;
    for (const auto& [a, b] : {std::pair<std::string, std::string>{".ffn.w1", ".ffn.w_in"}, {".ffn.w2", ".ffn.w_out"}})
      if (const size_t at = name.find(a); at != std::string::npos) name.replace(at, a.size(), b);
    Param* q = to.find_param(name);
    ASSERT_NE(q, nullptr) << name;
    ASSERT_EQ(q->shape, p->shape) << name;
    Tensor dst = q->value;
    ops::copy(p->value, dst);
  }
}

TEST(ExamplePlugin, Relu2RunsOnEveryHostExecutorAsTheBuiltinMlpWithRelu2) {
  for (const std::string dtype : {"float32", "float64"}) {
    SCOPED_TRACE(dtype);
    const ResolvedCase rc = resolve("\"relu2\"", "cpu", dtype);
    const ResolvedCase mlp = resolve("{ type = \"mlp\", activation = \"relu2\" }", "cpu", dtype);
    Model a(rc.model, registry(), 7), b(mlp.model, registry(), 7);
    copy_weights(a, b);
    const auto cpu = step(a, rc, tile::Backend::kCpu);
    const auto ref = step(b, mlp, tile::Backend::kCpu);
    const double tol = dtype == "float32" ? 1e-6 : 1e-13;
    EXPECT_NEAR(cpu.first, ref.first, tol * ref.first);
    EXPECT_NEAR(cpu.second, ref.second, 10 * tol * ref.second);
    // The emulated device: a model set up for it (its attention composes as a device's).
    ResolvedCase on_emulated = rc;
    on_emulated.model.backend = tile::Backend::kEmulated;
    Model e(on_emulated.model, registry(), 7);
    const auto emulated = step(e, on_emulated, tile::Backend::kEmulated);
    EXPECT_NEAR(emulated.first, cpu.first, 1e-5 * cpu.first);
    EXPECT_NEAR(emulated.second, cpu.second, 1e-4 * cpu.second);
  }
  // The guarded device: the model's memory faults on host access outside kernels and copies; the
  // plugin's programs run as kernels, and give the CPU's numbers bit for bit.
  const ResolvedCase cpu = resolve("\"relu2\"", "cpu");
  ResolvedCase guarded = cpu;
  guarded.model.backend = tile::Backend::kGuarded;
  Model a(cpu.model, registry(), 3), g(guarded.model, registry(), 3);
  EXPECT_EQ(g.memory(), kernels::Memory::kGuarded);
  EXPECT_EQ(step(g, guarded, tile::Backend::kGuarded), step(a, cpu, tile::Backend::kCpu));
}

// The CUDA pass of the plugin compiled its programs for CUDA and its CUDA library registered
// them when the plugin loaded: float and bf16 (float64 has no CUDA path), forward and backward.
TEST(ExamplePlugin, Relu2HasItsCudaBuildsWhereBenchHasCuda) {
  (void)registry();  // the plugin loaded
  if (!kernels::cuda_built()) GTEST_SKIP() << "this build has no CUDA backend: the plugin has no CUDA pass";
  const auto programs = tile::cuda_programs("libbench_relu2_example.so");
  EXPECT_EQ(programs,
            (std::vector<std::string>{"relu2::Relu2Backward<bench::tile::bf16>", "relu2::Relu2Backward<float>",
                                      "relu2::Relu2Forward<bench::tile::bf16>", "relu2::Relu2Forward<float>"}));
}

TEST(ExamplePlugin, AnUnsupportedKernelNamesTheComponentTheKernelAndTheDevice) {
  const ResolvedCase rc = resolve("\"refuses\"", "cpu");
  Model m(rc.model, registry(), 1);
  const auto b = test::batch_of(rc, 0);
  RunContext ctx;
  try {
    m.forward(b.in.data(), b.tg.data(), ctx);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ffn 'refuses' at blocks.0.ffn (and 1 more of its plugin), plugin "), std::string::npos)
        << what;
    EXPECT_NE(what.find("libbad_unsupported_kernel.so: kernel demo::Scale<float> cannot run on cpu: "),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace example_test
}  // namespace bench
