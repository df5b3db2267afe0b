// The per-kernel profile (runners/profile.h): on the CPU its rows add up to the profiled step,
// name the component, slot and pass each kernel ran in, count the GEMMs' FLOPs exactly (closed
// forms), and place a norm on the memory side and a large GEMM on the compute side of the ridge
// of the measured ceilings.
#include "runners/profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "kernels/gemm.h"
#include "kernels/memory.h"
#include "kernels/norm.h"
#include "model/model.h"
#include "runners/device.h"
#include "runners/registry.h"
#include "support/toml_case.h"

namespace bench {
namespace profile_test {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

constexpr const char* kModel =
    "[model]\nd_model = 64\nn_heads = 2\nn_layers = 2\nseq_len = 32\nbatch_size = 4\n"
    "norm = \"rmsnorm\"\nnorm_position = \"pre\"\nffn = \"swiglu\"\nposition = \"rope\"\n";

TEST(Profile, RowsAddUpToTheStepAndNameTheirComponents) {
  const std::string toml = std::string(kModel) +
                           "[throughput]\nmodes = [\"forward\", \"train_step\"]\nrepetitions = 2\nmin_time = 0.01\n"
                           "warmup_time = 0\nmax_time = 0\nprofile_steps = 3\n";
  const Case c = test::cases_of(toml).at(0);
  const ResolvedCase rc = test::resolve(c);
  DeviceInfo device;
  device.copy_gbps = 10;
  device.peak_gflops = 100;
  Progress progress(true);
  RunnerEnv env{test::builtin_registry(), device, progress, "", nullptr, "", ""};
  const CaseResult r = run_case(runner_of(c), c, rc, env);
  ASSERT_EQ(r.status, "completed") << r.error;
  EXPECT_EQ(r.metric("roof_gbps"), 10.0);
  EXPECT_EQ(r.metric("roof_gflops"), 100.0);

  // The FFN's width, from the model itself.
  const Model model(rc.model, test::builtin_registry(), 1);
  const int64_t hidden = model.components(Slot::kFfn).at(0).second->accounting().ffn_hidden;
  ASSERT_GT(hidden, 0);
  const double rows = 4.0 * 32, d = 64;

  for (const std::string mode : {"forward", "train_step"}) {
    const auto step = r.metric("profile_step_ms/" + mode);
    ASSERT_TRUE(step) << mode;
    double all = 0, kernels = 0, ffn_gemm_flops = 0;
    int norm_forward = 0, norm_backward = 0, adamw = 0;
    for (const ProfileRow& p : r.profile) {
      if (p.mode != mode) continue;
      EXPECT_GE(p.ms, 0) << p.kernel;
      all += p.ms;
      if (p.kernel == "(host)") {
        EXPECT_EQ(p.calls, 0);
        EXPECT_TRUE(std::isnan(p.bytes));
        continue;
      }
      EXPECT_GT(p.calls, 0) << p.kernel;
      kernels += p.ms;
      if (p.slot == "norm" && p.component == "rmsnorm") {
        if (p.pass == "forward" && starts_with(p.kernel, "NormForward")) ++norm_forward;
        if (p.pass == "backward" && starts_with(p.kernel, "NormBackward")) ++norm_backward;
      }
      if (p.slot == "ffn" && p.component == "swiglu" && p.pass == "forward" && starts_with(p.kernel, "gemm "))
        ffn_gemm_flops += p.flops;
      if (p.slot == "optimizer" && p.pass == "optimizer" && p.kernel.find("AdamW") != std::string::npos) ++adamw;
    }
    // Means over the 3 profiled steps: the rows, "(host)" included, add up to the step (up to
    // the moment between the last component's end and the clock's last read in each step), and
    // most of it is kernels.
    EXPECT_NEAR(all, *step, 0.01 * *step + 0.01) << mode;
    EXPECT_GT(kernels, 0.5 * *step) << mode;
    EXPECT_LE(kernels, all) << mode;
    // The two norms of each pre-norm block and the final norm, each in its own scope.
    EXPECT_EQ(norm_forward, 2 * 2 + 1) << mode;
    EXPECT_EQ(norm_backward, mode == "train_step" ? 2 * 2 + 1 : 0) << mode;
    // SwiGLU's three matrices, 2 rows d hidden FLOPs each, per layer, in the forward.
    EXPECT_DOUBLE_EQ(ffn_gemm_flops, 2 * 3 * 2.0 * rows * d * static_cast<double>(hidden)) << mode;
    EXPECT_EQ(adamw > 0, mode == "train_step") << mode;
  }
}

TEST(Profile, ANormIsMemoryBoundAndALargeGemmComputeBound) {
  const DeviceInfo device = describe_cpu("test");
  ASSERT_GT(device.copy_gbps, 0);
  ASSERT_GT(device.peak_gflops, 0);
  const double ridge = device.peak_gflops / device.copy_gbps;  // FLOP per byte

  const int64_t rows = 2048, cols = 1024, n = 1024;
  std::vector<float> x(static_cast<size_t>(rows * cols)), w(static_cast<size_t>(cols), 1.f), y(x.size()),
      rstd(static_cast<size_t>(rows));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.01f - 0.4f;  // not zeros
  std::vector<float> a(static_cast<size_t>(n * n)), b(a.size()), c(a.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = static_cast<float>(i % 89) * 0.01f - 0.3f;
  const tile::Exec exec = kernels::exec_for(kernels::Memory::kHost);
  const StepProfile p = profile_step(
      exec, "test",
      [&] {
        kernels::norm_forward<float>(exec, false, x.data(), w.data(), nullptr, y.data(), nullptr, rstd.data(), rows,
                                     cols, 1e-5);
        kernels::gemm<float>(exec, false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
      },
      3);
  const ProfileRow* norm = nullptr;
  const ProfileRow* gemm = nullptr;
  for (const ProfileRow& r : p.rows) {
    if (starts_with(r.kernel, "NormForward")) norm = &r;
    if (r.kernel == "gemm NN") gemm = &r;
  }
  ASSERT_TRUE(norm != nullptr && gemm != nullptr);
  // The GEMM's declared traffic in closed form: 2 n^3 FLOPs, three n x n float matrices.
  EXPECT_DOUBLE_EQ(gemm->flops, 2.0 * n * n * n);
  EXPECT_DOUBLE_EQ(gemm->bytes, 3.0 * n * n * 4);
  ASSERT_FALSE(std::isnan(norm->bytes));
  // x read and y written at least: 8 bytes per element; a few FLOPs per element.
  EXPECT_GE(norm->bytes, 8.0 * rows * cols);
  EXPECT_GT(norm->flops, 0);
  const double norm_intensity = norm->flops / norm->bytes, gemm_intensity = gemm->flops / gemm->bytes;
  EXPECT_LT(norm_intensity, ridge) << "ridge " << ridge << " FLOP/byte";
  EXPECT_GT(gemm_intensity, ridge) << "ridge " << ridge << " FLOP/byte";
  EXPECT_EQ(norm->slot, "model");
  EXPECT_EQ(norm->pass, "step");
  EXPECT_EQ(norm->calls, 1);
  EXPECT_GT(gemm->ms, 0);
  EXPECT_THROW(profile_step(
                   exec, "test", [] {}, 0),
               Error);
}

}  // namespace
}  // namespace profile_test
}  // namespace bench
