// Tests of kernels/attention.h beyond its values (attention_test.cpp checks those on every
// target): the cuDNN baseline's host side (which variants it takes; its launchers' refusals off
// CUDA), which path keeps the probabilities, the flash grids' bounds, a window covering the
// sequence, dropout's closed forms (P stored undropped, the mask of the global index, the
// expectation), bitwise equality of results across thread counts (the GEMM runs single-threaded
// inside the parallel tasks), the device's launch count, the shape check. DISABLED_Timing
// measures the CPU speed reported in docs/attention-cores.md ("CPU attention").
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attention.h"
#include "attention_test_util.h"
#include "gemm.h"
#include "kernel_test_util.h"
#include "support/launch_counter.h"
#include "tile/parallel.h"
#include "tile/profile.h"

namespace bench::kernels {
namespace attention_properties_test {
namespace {

using namespace test_attention;  // NOLINT: the attention tests' helpers
using test::LaunchCounter;
using tile::Backend;

// The variants the cuDNN baseline covers, and its reason for each it does not (no cuDNN here).
TEST(AttentionCudnn, NamesTheVariantsItCannotRun) {
  EXPECT_EQ(attention_cudnn_unsupported(make_args(2, 256, 8, 2, 64)), "");                // GQA, causal
  EXPECT_EQ(attention_cudnn_unsupported(make_args(2, 300, 8, 1, 128, 0, 100)), "");       // MQA, window
  EXPECT_EQ(attention_cudnn_unsupported(make_args(1, 100, 4, 4, 256, 0, 0, false)), "");  // MHA, not causal
  const auto says = [](const AttentionArgs& a, const std::string& what) {
    const std::string why = attention_cudnn_unsupported(a);
    EXPECT_NE(why.find(what), std::string::npos) << "got: " << why;
  };
  says(make_args(1, 64, 4, 4, 64, 30.0), "soft-capping (softcap = 30)");
  says(make_args(1, 64, 4, 4, 64, 0, 0, true, 0.1), "dropout on the probabilities (rate 0.1)");
  says(make_args(1, 64, 4, 4, 36), "d_head = 36 is not a multiple of 8");
  says(make_args(1, 64, 4, 4, 512), "d_head = 512 is above 256");
  says(make_args(1, 64, 4, 4, 64, 0, 16, false), "a sliding window needs causal masking");
  says(make_args(1, 64, 4, 3, 64), "the shape is inconsistent");
  AttentionArgs m = make_args(1, 64, 4, 4, 64);
  m.materialize = true;
  says(m, "materialize");
  EXPECT_EQ(attention_cudnn_stats_size(make_args(2, 64, 4, 2, 64)), 2 * 4 * 64);
}

// The cuDNN launchers refuse another backend, another type and an uncovered variant before they
// touch anything; a build without CUDA has no cuDNN.
TEST(AttentionCudnn, RefusesOtherBackendsTypesAndVariants) {
  const AttentionArgs a = make_args(1, 16, 2, 2, 8);
  std::vector<tile::bf16> x(static_cast<size_t>(qkv_size(a))), o(static_cast<size_t>(out_size(a)));
  std::vector<float> xf(x.size()), of(o.size()), stats(static_cast<size_t>(attention_cudnn_stats_size(a)));
  const Exec cuda{Backend::kCuda};
  EXPECT_THROW(attention_cudnn_forward<tile::bf16>(Exec{}, a, x.data(), o.data(), stats.data()), tile::Unsupported);
  EXPECT_THROW(attention_cudnn_forward<float>(cuda, a, xf.data(), of.data(), stats.data()), tile::Unsupported);
  EXPECT_THROW(attention_cudnn_backward<tile::bf16>(Exec{}, a, x.data(), o.data(), stats.data(), o.data(), x.data()),
               tile::Unsupported);
  const AttentionArgs capped = make_args(1, 16, 2, 2, 8, 5.0);
  try {
    attention_cudnn_forward<tile::bf16>(cuda, capped, x.data(), o.data(), stats.data());
    ADD_FAILURE() << "accepted a soft-cap";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("soft-capping"), std::string::npos) << e.what();
  }
  if (!cuda_built()) {
    std::string why;
    EXPECT_FALSE(attention_cudnn_available(&why));
    EXPECT_EQ(why, "this build has no CUDA");
    EXPECT_THROW(attention_cudnn_forward<tile::bf16>(cuda, a, x.data(), o.data(), stats.data()), tile::Unsupported);
  }
}

// attention_cudnn_runs, the causal attention's kernel = "auto" choice, answers from the target
// (the CPU, float32, a build without CUDA), then the variant, without running anything.
TEST(AttentionCudnn, RunsAnswersFromTheTargetTheTypeAndTheVariant) {
  const AttentionArgs a = make_args(2, 256, 4, 2, 64);
  const Exec cuda{Backend::kCuda};
  std::string why;
  EXPECT_FALSE(attention_cudnn_runs<tile::bf16>(Exec{Backend::kCpu}, a, &why));
  EXPECT_EQ(why, "it runs on CUDA only");
  EXPECT_FALSE(attention_cudnn_runs<tile::bf16>(Exec{Backend::kGuarded}, a, &why));
  EXPECT_FALSE(attention_cudnn_runs<float>(cuda, a, nullptr));
  if (!cuda_built()) {
    EXPECT_FALSE(attention_cudnn_runs<tile::bf16>(cuda, a, &why));
    EXPECT_NE(why.find("no CUDA backend"), std::string::npos) << why;
  } else if (attention_cudnn_available(nullptr)) {
    // A cuDNN that loads: the variant decides (a soft-cap, dropout), then the version.
    EXPECT_FALSE(attention_cudnn_runs<tile::bf16>(cuda, make_args(2, 256, 4, 2, 64, 5.0), &why));
    EXPECT_NE(why.find("soft-capping"), std::string::npos) << why;
    AttentionArgs dropped = a;
    dropped.dropout = 0.1;
    EXPECT_FALSE(attention_cudnn_runs<tile::bf16>(cuda, dropped, &why));
    EXPECT_NE(why.find("dropout"), std::string::npos) << why;
  }
}

// Which path keeps the probabilities: only CUDA in bf16 at d_head 64/128 with room for the
// flash state (the predicate the causal attention sizes its buffer by; no kernel runs here).
TEST(AttentionFlash, KeepsProbabilitiesOffTheFlashPathOnly) {
  const Exec cuda{Backend::kCuda}, cpu{Backend::kCpu};
  AttentionArgs a = make_args(2, 256, 4, 2, 64);
  EXPECT_FALSE(attention_keeps_probs<tile::bf16>(cuda, a));
  EXPECT_LE(attention_flash_state_size(a), attention_probs_size(a));
  EXPECT_TRUE(attention_keeps_probs<float>(cuda, a));
  EXPECT_TRUE(attention_keeps_probs<tile::bf16>(cpu, a));
  EXPECT_TRUE(attention_keeps_probs<tile::bf16>(Exec{Backend::kGuarded}, a));
  a.materialize = true;
  EXPECT_TRUE(attention_keeps_probs<tile::bf16>(cuda, a));
  EXPECT_TRUE(attention_keeps_probs<tile::bf16>(cuda, make_args(2, 256, 4, 2, 32)));  // d_head 32
  EXPECT_TRUE(attention_keeps_probs<tile::bf16>(cuda, make_args(2, 64, 4, 2, 64)));   // T too short
  EXPECT_FALSE(attention_keeps_probs<tile::bf16>(cuda, make_args(1, 512, 2, 1, 128, 30.0, 100)));
  EXPECT_TRUE(attention_keeps_probs<tile::bf16>(cuda, make_args(1, 512, 2, 1, 128, 0, 100, false)));
  // The state: the log-sum-exp, then 256-byte aligned the backward's B H T (d_head + 1) floats.
  a = make_args(2, 256, 4, 2, 64);
  EXPECT_EQ(attention_flash_workspace_offset(a), 2 * 4 * 256);
  EXPECT_EQ(attention_flash_state_size(a), 2 * (2 * 4 * 256 + 2 * 4 * 256 * 65));
}

// The flash kernels' grids have at most 65535 rows (CUDA's grid y): the forward's are its blocks of
// 128 queries when causal, else the (batch, head) pairs; the backward's the (batch, kv head) pairs.
// Past them the bf16 path keeps the probabilities (the cuBLASLt path), so `auto` never launches a
// grid that throws.
TEST(AttentionFlash, StaysWithinCudasGridRows) {
  AttentionArgs a = make_args(16384, 256, 8, 2, 64);  // 131,072 (batch, head) pairs, 32,768 kv pairs
  EXPECT_TRUE(attention_uses_flash(a)) << "causal: the pairs are the forward grid's x";
  a.causal = false;
  EXPECT_FALSE(attention_uses_flash(a)) << "not causal: the pairs are the forward grid's y";
  a = make_args(16384, 256, 8, 8, 64);  // 131,072 kv pairs: the backward's grid
  EXPECT_FALSE(attention_uses_flash(a));
  a = make_args(8191, 256, 8, 8, 64);  // 65,528 kv pairs
  EXPECT_TRUE(attention_uses_flash(a));
  a = make_args(1, 65535 * 128 + 1, 1, 1, 64);  // 65,536 blocks of 128 queries
  EXPECT_FALSE(attention_uses_flash(a));
  a = make_args(1, 65535 * 128, 1, 1, 64);
  EXPECT_TRUE(attention_uses_flash(a));
}

TEST(AttentionWindow, WindowCoveringTheSequenceEqualsFullCausal) {
  const AttentionArgs full = make_args(2, 90, 4, 2, 8);
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(full)), 6));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(full)), 7));
  const auto r0 = run<float>(targets().front(), full, qkv, &dout);
  for (int64_t window : {90, 91, 500}) {
    AttentionArgs a = full;
    a.window = window;
    const auto r = run<float>(targets().front(), a, qkv, &dout);
    EXPECT_EQ(r.out, r0.out) << window;
    EXPECT_EQ(r.dqkv, r0.dqkv) << window;
  }
}

TEST(AttentionThreads, GemmInsideParallelTaskEqualsSerialGemm) {
  // dnnl_sgemm called from a parallel_for task must run on that thread alone (oneDNN does not
  // nest parallel regions): its result then equals a single-threaded call bit for bit.
  const int64_t m = 200, n = 300, k = 64;
  const auto a = to_storage<float>(random_vector(static_cast<size_t>(m * k), 8));
  const auto b = to_storage<float>(random_vector(static_cast<size_t>(k * n), 9));
  std::vector<float> serial(static_cast<size_t>(m * n));
  {
    ThreadCountGuard guard(1);
    gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, serial.data(), n);
  }
  std::vector<std::vector<float>> in_task(4, std::vector<float>(serial.size()));
  ThreadCountGuard guard(2);
  tile::parallel_for(4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      gemm<float>(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, in_task[t].data(), n);
  });
  for (const auto& c : in_task) EXPECT_EQ(c, serial);
}

TEST(AttentionDropout, ProbabilitiesStayUndroppedAndEvalEqualsNoDropout) {
  // probs holds P itself (the backward's softmax needs it); only O sees the mask. Rate 0 is
  // the plain attention whatever the seed.
  const AttentionArgs a0 = make_args(2, 100, 4, 2, 8, 2.0, 0, true, 0.0);
  AttentionArgs a = a0;
  a.dropout = 0.25;
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 20));
  const auto r0 = run<float>(targets().front(), a0, qkv, nullptr);
  const auto r = run<float>(targets().front(), a, qkv, nullptr);
  EXPECT_EQ(r.probs, r0.probs);
  EXPECT_EQ(r.row_max, r0.row_max);
  EXPECT_NE(r.out, r0.out);
  AttentionArgs other_seed = a0;
  other_seed.dropout_seed = 99;
  EXPECT_EQ(run<float>(targets().front(), other_seed, qkv, nullptr).out, r0.out);
  AttentionArgs next_step = a;
  next_step.dropout_seed = a.dropout_seed + 1;
  EXPECT_NE(run<float>(targets().front(), next_step, qkv, nullptr).out, r.out);
}

TEST(AttentionDropout, MaskIsTheDropoutKeepOfTheGlobalIndexAndKeepsTheExpectation) {
  // With V = one-hot columns, O[t, j] = P[t, j] M / (1 - p) for the first dh keys: read the
  // mask off the output and compare it with dropout_keep element by element; the kept fraction
  // is 1 - p and the mean of O over many seeds tends to P V.
  const int64_t n_t = 16, n_h = 2, dh = 16;
  const AttentionArgs a0 = make_args(2, n_t, n_h, 1, dh);
  AttentionArgs a = a0;
  a.dropout = 0.4;
  const int64_t w = (n_h + 2) * dh;
  auto qkv = random_vector(static_cast<size_t>(qkv_size(a)), 21);
  for (int64_t r = 0; r < 2 * n_t; ++r)
    for (int64_t d = 0; d < dh; ++d) qkv[r * w + (n_h + 1) * dh + d] = (r % n_t) == d ? 1.0 : 0.0;  // v_j = e_j
  const auto plain = run<double>(targets().front(), a0, qkv, nullptr);
  const auto dropped = run<double>(targets().front(), a, qkv, nullptr);
  int64_t kept = 0, total = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < n_h; ++h)
      for (int64_t t = 0; t < n_t; ++t)
        for (int64_t j = 0; j <= t; ++j) {
          const size_t i = static_cast<size_t>((b * n_t + t) * n_h * dh + h * dh + j);
          const bool keep = dropout_keep(a.dropout_seed, attention_prob_index(a, b, h, t, j), 0.4f);
          ASSERT_NEAR(dropped.out[i], keep ? plain.out[i] / 0.6 : 0.0, 1e-14) << b << " " << h << " " << t << " " << j;
          kept += keep ? 1 : 0;
          ++total;
        }
  // `total` (544) draws of a Bernoulli(0.6): within 5 sigma of the rate.
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(total), 0.6,
              5 * std::sqrt(0.24 / static_cast<double>(total)));
  std::vector<double> mean(plain.out.size(), 0.0);
  const int n_seeds = 400;
  for (int s = 0; s < n_seeds; ++s) {
    a.dropout_seed = static_cast<uint64_t>(1000 + s);
    const auto r = run<double>(targets().front(), a, qkv, nullptr);
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += r.out[i] / n_seeds;
  }
  // Each O element is P (M / 0.6) with std P sqrt(0.4 / 0.6) / sqrt(n): within 5 sigma.
  for (size_t i = 0; i < mean.size(); ++i)
    ASSERT_NEAR(mean[i], plain.out[i], 5 * std::abs(plain.out[i]) * std::sqrt(0.4 / 0.6 / n_seeds) + 1e-12) << i;
}

TEST(AttentionDropout, RejectsARateOutsideZeroOne) {
  for (double p : {-0.1, 1.0}) {
    const AttentionArgs a = make_args(1, 4, 2, 2, 8, 0, 0, true, p);
    std::vector<float> x(static_cast<size_t>(qkv_size(a))), o(static_cast<size_t>(out_size(a)));
    std::vector<float> pr(static_cast<size_t>(attention_probs_size(a))), ws(64 * 4 * 2);
    EXPECT_THROW(attention_forward<float>(Exec{}, a, x.data(), o.data(), pr.data(), nullptr, ws.data()),
                 std::invalid_argument);
  }
}

TEST(AttentionThreads, ResultsIndependentOfThreadCount) {
  for (double dropout : {0.0, 0.2}) {
    const AttentionArgs a = make_args(3, 150, 4, 2, 16, 3.0, 0, true, dropout);
    const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 10));
    const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 11));
    AttentionRun<float> one, two;
    {
      ThreadCountGuard guard(1);
      one = run<float>(targets().front(), a, qkv, &dout);
    }
    {
      ThreadCountGuard guard(2);
      two = run<float>(targets().front(), a, qkv, &dout);
    }
    EXPECT_EQ(one.out, two.out) << dropout;
    EXPECT_EQ(one.probs, two.probs) << dropout;
    EXPECT_EQ(one.row_max, two.row_max) << dropout;
    EXPECT_EQ(one.dqkv, two.dqkv) << dropout;
  }
}

// A device's composition (the emulated device issues CUDA's launches one for one): a fixed
// number of launches per call whatever the batch and the heads, GQA, soft-cap and dropout
// included: the head-major copy, S, the softmax, the dropout, O and the copy back forward; dout's
// copy (qkv's is the forward's), the dropout, dV, dP, the dropout, the softmax backward, dQ, dK
// and the copy back backward. The products are batched GEMMs, one each.
TEST(AttentionLaunches, DeviceLaunchesIndependentOfBatchAndHeads) {
  const Target emulated{Backend::kEmulated, "emulated"};
  for (double dropout : {0.0, 0.1})
    for (const auto& [b, h, hkv] : {std::tuple<int64_t, int64_t, int64_t>{1, 2, 2}, {3, 4, 2}, {2, 6, 1}, {4, 8, 8}}) {
      SCOPED_TRACE("dropout " + std::to_string(dropout) + " B " + std::to_string(b) + " H " + std::to_string(h) +
                   " Hkv " + std::to_string(hkv));
      const AttentionArgs a = make_args(b, 24, h, hkv, 8, 2.0, 0, true, dropout);
      const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 30));
      const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 31));
      Dev<float> gqkv(emulated, qkv), out(emulated, static_cast<size_t>(out_size(a)));
      Dev<float> probs(emulated, static_cast<size_t>(attention_probs_size(a)));
      Dev<float> ws(emulated, static_cast<size_t>(attention_workspace_size<float>(emulated.exec(), a)));
      Dev<float> gdout(emulated, dout), dqkv(emulated, qkv.size());
      const int drops = dropout > 0 ? 1 : 0;
      {
        LaunchCounter forward;
        attention_forward<float>(emulated.exec(), a, gqkv.get(), out.get(), probs.get(), nullptr, ws.get());
        EXPECT_EQ(forward.total, 5 + drops);
        EXPECT_EQ(std::count(forward.names.begin(), forward.names.end(), std::string("gemm NT batched")), 1);
        EXPECT_EQ(std::count(forward.names.begin(), forward.names.end(), std::string("gemm NN batched")), 1);
      }
      LaunchCounter backward;
      attention_backward<float>(emulated.exec(), a, gqkv.get(), out.get(), probs.get(), gdout.get(), dqkv.get(),
                                ws.get());
      EXPECT_EQ(backward.total, 7 + 2 * drops);
      EXPECT_EQ(std::count(backward.names.begin(), backward.names.end(), std::string("gemm TN batched")), 2);
      // The results of these very launches: the float64 reference.
      std::vector<double> ref, dref;
      attention_forward_reference(a, to_double(qkv), ref, nullptr);
      attention_backward_reference(a, to_double(qkv), to_double(dout), dref);
      EXPECT_TRUE(all_near(to_double(out.host()), ref, 2e-6, 1e-5));
      EXPECT_TRUE(all_near(to_double(dqkv.host()), dref, 2e-6, 1e-4));
    }
}

TEST(AttentionArgsCheck, RejectsHeadsNotDivisibleByKvHeads) {
  const AttentionArgs a = make_args(1, 4, 4, 3, 8);
  std::vector<float> x(static_cast<size_t>(qkv_size(a))), o(static_cast<size_t>(out_size(a))), p(64 * 4);
  EXPECT_THROW(attention_forward<float>(Exec{}, a, x.data(), o.data(), p.data(), nullptr, nullptr),
               std::invalid_argument);
}

// Run with: kernels_test --gtest_also_run_disabled_tests --gtest_filter='AttentionTiming.*'
TEST(AttentionTiming, DISABLED_Timing) {
  std::printf("threads %d, GEMM %s\n", tile::num_threads(), gemm_backend());
  for (auto [b, t, h, dh] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{16, 128, 4, 32}, {8, 256, 4, 64}}) {
    const AttentionArgs a = make_args(b, t, h, h, dh);
    const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 12));
    const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 13));
    std::vector<float> out(static_cast<size_t>(out_size(a))), probs(static_cast<size_t>(attention_probs_size(a)));
    std::vector<float> row_max(static_cast<size_t>(b * h * t)), dqkv(qkv.size());
    std::vector<float> ws(static_cast<size_t>(attention_workspace_size<float>(Exec{}, a)));
    const auto fwd = time_ms(101, [&] {
      attention_forward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), row_max.data(), ws.data());
    });
    const auto bwd = time_ms(101, [&] {
      attention_backward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), dout.data(), dqkv.data(), ws.data());
    });
    // Convention: 4*B*H*T^2*dh forward (QK^T and PV over the full T x T square, 2 FLOPs per
    // multiply-add, the causally masked half included), twice that backward.
    const double gflop = 4.0 * static_cast<double>(b * h * t * t * dh) * 1e-9;
    std::printf(
        "B=%ld T=%ld H=%ld dh=%ld: forward median %.3f ms (%.1f GFLOP/s) best %.3f ms (%.1f); "
        "backward median %.3f ms (%.1f GFLOP/s) best %.3f ms (%.1f)\n",
        static_cast<long>(b), static_cast<long>(t), static_cast<long>(h), static_cast<long>(dh), fwd.first,
        gflop / fwd.first * 1e3, fwd.second, gflop / fwd.second * 1e3, bwd.first, 2 * gflop / bwd.first * 1e3,
        bwd.second, 2 * gflop / bwd.second * 1e3);
  }
}

}  // namespace
}  // namespace attention_properties_test
}  // namespace bench::kernels
