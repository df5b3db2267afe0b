// The MFU's second denominator: kernels::GemmRecorder sees every gemm(exec, ...) of its thread
// (nesting, other threads not), time_gemm_calls counts the FLOPs and shapes of the recorded calls
// exactly (closed forms) on the CPU and the guarded device, and the throughput runner reports
// MFU against the model's own GEMMs beside the square-GEMM MFU.
#include "runners/gemm_ceiling.h"

#include <gtest/gtest.h>

#include <thread>

#include "runners/registry.h"
#include "support/toml_case.h"

namespace bench {
namespace gemm_ceiling_test {
namespace {

using kernels::GemmCall;

void small_gemm(int64_t m, int64_t n, int64_t k, bool trans_b) {
  std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f),
      c(static_cast<size_t>(m * n));
  const tile::Exec exec = kernels::exec_for(kernels::Memory::kHost);
  kernels::gemm<float>(exec, false, trans_b, m, n, k, 1.f, a.data(), k, b.data(), trans_b ? k : n, 0.f, c.data(), n);
  EXPECT_FLOAT_EQ(c[0], 0.125f * static_cast<float>(k));  // it still ran
}

TEST(GemmRecorder, RecordsEveryGemmOfItsThreadAndNests) {
  kernels::GemmRecorder outer;
  small_gemm(4, 6, 8, true);
  {
    kernels::GemmRecorder inner;
    small_gemm(3, 5, 7, false);
    small_gemm(2, 2, 2, false);
    ASSERT_EQ(inner.calls().size(), 2u);
    const GemmCall& c = inner.calls()[0];
    EXPECT_EQ(c.m, 3);
    EXPECT_EQ(c.n, 5);
    EXPECT_EQ(c.k, 7);
    EXPECT_FALSE(c.trans_a);
    EXPECT_FALSE(c.trans_b);
    EXPECT_EQ(c.lda, 7);
    EXPECT_EQ(c.ldb, 5);
    EXPECT_EQ(c.ldc, 5);
    EXPECT_EQ(c.element_bytes, 4);
    EXPECT_FALSE(c.accumulate);
    EXPECT_DOUBLE_EQ(c.flops(), 2.0 * 3 * 5 * 7);
  }
  std::thread other([] { small_gemm(9, 9, 9, false); });  // another thread's GEMM is not ours
  other.join();
  small_gemm(1, 2, 3, false);
  ASSERT_EQ(outer.calls().size(), 2u);
  EXPECT_EQ(outer.calls()[0].m, 4);
  EXPECT_TRUE(outer.calls()[0].trans_b);
  EXPECT_EQ(outer.calls()[0].ldb, 8);
  EXPECT_EQ(outer.calls()[1].k, 3);
}

TEST(GemmCeiling, CountsTheCallsFlopsAndShapesOnEveryHostMemory) {
  const GemmCall fwd{false, true, 64, 96, 32, 32, 32, 96, 4, false};
  const GemmCall dw{true, false, 96, 32, 64, 96, 32, 32, 4, true};
  const GemmCall half{false, false, 48, 40, 24, 24, 40, 40, 2, false};
  const std::vector<GemmCall> calls = {fwd, fwd, dw, fwd, half};
  const double flops = 3 * 2.0 * 64 * 96 * 32 + 2.0 * 96 * 32 * 64 + 2.0 * 48 * 40 * 24;
  for (const kernels::Memory memory : {kernels::Memory::kHost, kernels::Memory::kGuarded}) {
    const GemmCeiling g = time_gemm_calls(calls, memory, 3);
    EXPECT_DOUBLE_EQ(g.flops, flops);
    EXPECT_EQ(g.calls, 5);
    EXPECT_EQ(g.shapes, 3);
    EXPECT_GT(g.min_ms, 0);
    EXPECT_LE(g.min_ms, g.median_ms);
    EXPECT_LE(g.median_ms, g.max_ms);
    EXPECT_DOUBLE_EQ(g.gflops_per_s, flops / (g.median_ms * 1e-3) * 1e-9);
  }
  // Timing the calls of a live recorder (the throughput runner's step) records nothing more into
  // it: the timing's own GEMMs are no step's.
  {
    kernels::GemmRecorder step;
    small_gemm(8, 8, 8, false);
    const GemmCeiling g = time_gemm_calls(step.calls(), kernels::Memory::kHost, 2);
    EXPECT_EQ(step.calls().size(), 1u);
    EXPECT_EQ(g.calls, 1);
  }
  EXPECT_THROW(time_gemm_calls({}, kernels::Memory::kHost, 3), Error);
  EXPECT_THROW(time_gemm_calls(calls, kernels::Memory::kHost, 0), Error);
}

TEST(GemmCeiling, TheThroughputRunnerReportsMfuAgainstTheModelsOwnGemms) {
  const std::string toml =
      "[model]\nd_model = 32\nn_heads = 2\nn_layers = 2\nseq_len = 16\nbatch_size = 2\n"
      "[throughput]\nmodes = [\"forward\", \"train_step\"]\nrepetitions = 2\nmin_time = 0.01\nwarmup_time = 0\n"
      "max_time = 0\n";
  const Case c = test::cases_of(toml).at(0);
  const ResolvedCase rc = test::resolve(c);
  DeviceInfo device;
  device.peak_gflops = 1.0;  // a square-GEMM peak, so that `mfu` is set too
  Progress progress(true);
  RunnerEnv env{test::builtin_registry(), device, progress, "", nullptr, "", ""};
  const CaseResult r = run_case(runner_of(c), c, rc, env);
  ASSERT_EQ(r.status, "completed") << r.error;
  const auto ceiling = r.metric("gemm_ceiling_gflops");
  const auto calls = r.metric("gemm_ceiling_calls");
  ASSERT_TRUE(ceiling && calls);
  EXPECT_GT(*ceiling, 0);
  // Every linear layer's forward GEMM and its two backward GEMMs at least: 4 per layer and the head.
  EXPECT_GE(*calls, 3.0 * (4 * 2 + 1));
  ASSERT_EQ(r.timings.size(), 2u);
  for (const Timing& t : r.timings) {
    const auto mfu = r.metric("mfu_model_gemms/" + t.mode);
    ASSERT_TRUE(mfu) << t.mode;
    EXPECT_DOUBLE_EQ(*mfu, t.gflops_per_s / *ceiling);
    ASSERT_TRUE(t.mfu.has_value());
    EXPECT_DOUBLE_EQ(*t.mfu, t.gflops_per_s / device.peak_gflops);
  }
}

}  // namespace
}  // namespace gemm_ceiling_test
}  // namespace bench
