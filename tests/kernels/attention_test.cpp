// Tests of kernels/attention.h on every target (kernel_test_util.h): forward against the float64
// per-head reference (MHA, GQA, MQA, sliding window, soft-cap, probability dropout, several query
// blocks), backward against central differences in double, float against double, GQA against MHA with repeated kv
// heads, dropout's closed forms (P stored undropped, the mask of the global index, the expectation), bitwise equality
// of results across thread counts (the GEMM runs single-threaded inside the parallel tasks), the entropy and row-max
// probes recomputed from qkv, and the cuDNN baseline's host side (which variants it takes; its launchers' refusals off
// CUDA). DISABLED_Timing measures the CPU speed reported in docs/kernels.md.
#include "attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gemm.h"
#include "kernel_test_util.h"
#include "support/launch_counter.h"
#include "tile/parallel.h"
#include "tile/profile.h"

namespace bench::kernels {
namespace {

using test::LaunchCounter;

using namespace testing;  // NOLINT: the kernel test helpers
using tile::Backend;

struct AttentionCase {
  std::string name;
  AttentionArgs args;
  Target target;
};
void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

AttentionArgs make_args(int64_t b, int64_t t, int64_t h, int64_t hkv, int64_t dh, double softcap = 0,
                        int64_t window = 0, bool causal = true, double dropout = 0) {
  AttentionArgs a{b, t, h, hkv, dh, 1.0 / std::sqrt(static_cast<double>(dh))};
  a.softcap = softcap;
  a.window = window;
  a.causal = causal;
  a.dropout = dropout;
  a.dropout_seed = 0x5eed;
  return a;
}

int64_t qkv_size(const AttentionArgs& a) { return a.batch * a.seq * (a.n_heads + 2 * a.n_kv_heads) * a.d_head; }
int64_t out_size(const AttentionArgs& a) { return a.batch * a.seq * a.n_heads * a.d_head; }

/// Forward and backward of one configuration in storage type T.
template <class T>
struct AttentionRun {
  std::vector<T> out, probs, dqkv;
  std::vector<acc_t<T>> row_max;
};

/// The forward (and, with dout, the backward) on target t, every buffer in its memory, the
/// outputs poisoned; the results copied back.
template <class T>
AttentionRun<T> run(const Target& t, const AttentionArgs& a, const std::vector<T>& qkv, const std::vector<T>* dout) {
  const T poison = tile::from_acc<T>(77);
  Dev<T> gqkv(t, qkv), out(t, std::vector<T>(static_cast<size_t>(out_size(a)), poison));
  Dev<T> probs(t, std::vector<T>(static_cast<size_t>(attention_probs_size(a)), poison));
  Dev<T> ws(t, std::vector<T>(static_cast<size_t>(attention_workspace_size<T>(t.exec(), a)), poison));
  Dev<acc_t<T>> row_max(t, std::vector<acc_t<T>>(static_cast<size_t>(a.batch * a.n_heads * a.seq), acc_t<T>(0)));
  const Exec exec = t.exec();
  attention_forward<T>(exec, a, gqkv.get(), out.get(), probs.get(), row_max.get(), ws.get());
  AttentionRun<T> r;
  if (dout != nullptr) {
    Dev<T> gdout(t, *dout), dqkv(t, std::vector<T>(qkv.size(), poison));
    attention_backward<T>(exec, a, gqkv.get(), out.get(), probs.get(), gdout.get(), dqkv.get(), ws.get());
    r.dqkv = dqkv.host();
  }
  r.out = out.host();
  r.probs = probs.host();
  r.row_max = row_max.host();
  return r;
}

/// The forward on host vectors with a host executor (the finite differences: many small runs).
AttentionRun<double> run_host(const Exec& exec, const AttentionArgs& a, const std::vector<double>& qkv) {
  AttentionRun<double> r;
  r.out.assign(static_cast<size_t>(out_size(a)), 77.0);
  r.probs.assign(static_cast<size_t>(attention_probs_size(a)), 77.0);
  r.row_max.assign(static_cast<size_t>(a.batch * a.n_heads * a.seq), 0.0);
  std::vector<double> ws(static_cast<size_t>(attention_workspace_size<double>(exec, a)), 77.0);
  attention_forward<double>(exec, a, qkv.data(), r.out.data(), r.probs.data(), r.row_max.data(), ws.data());
  return r;
}

class AttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionTest, ForwardMatchesFloat64Reference) {
  const auto& [name, a, t] = GetParam();
  const auto qkv = random_vector(static_cast<size_t>(qkv_size(a)), 1, 1.5);
  const auto qkvf = to_storage<float>(qkv);
  const auto rf = run<float>(t, a, qkvf, nullptr);
  std::vector<double> reff, reff_max;  // of the float-rounded inputs
  attention_forward_reference(a, to_double(qkvf), reff, &reff_max);
  EXPECT_TRUE(all_near(to_double(rf.out), reff, 2e-6, 1e-5));
  EXPECT_TRUE(all_near(to_double(rf.row_max), reff_max, 2e-6, 1e-5));

  // probs: rows sum to one over the visible keys, exact zeros elsewhere (in double where the
  // target runs it).
  const auto probs = t.float64() ? run<double>(t, a, qkv, nullptr).probs : to_double(rf.probs);
  const double tol = t.float64() ? 1e-12 : 1e-5;
  const int64_t T = a.seq;
  for (int64_t bh = 0; bh < a.batch * a.n_heads; ++bh)
    for (int64_t q = 0; q < T; ++q) {
      const int64_t hi = a.causal ? q + 1 : T, lo = a.window > 0 ? std::max<int64_t>(0, hi - a.window) : 0;
      double sum = 0;
      for (int64_t j = 0; j < T; ++j) {
        const double p = probs[(bh * T + q) * T + j];
        if (j < lo || j >= hi) {
          ASSERT_EQ(p, 0.0) << "masked prob at row " << q << " col " << j;
        }
        sum += p;
      }
      ASSERT_NEAR(sum, 1.0, tol) << "row " << q;
    }
  if (!t.float64()) return;
  std::vector<double> ref, ref_max;
  attention_forward_reference(a, qkv, ref, &ref_max);
  const auto rd = run<double>(t, a, qkv, nullptr);
  EXPECT_TRUE(all_near(rd.out, ref, 1e-13, 1e-12));
  EXPECT_TRUE(all_near(rd.row_max, ref_max, 1e-13, 1e-12));
}

TEST_P(AttentionTest, BackwardMatchesFiniteDifferences) {
  const auto& [name, a0, t] = GetParam();
  SKIP_UNLESS_FINITE_DIFFERENCES(t);
  SKIP_FINITE_DIFFERENCES_OFF_CPU(t, "BackwardMatchesFloat64Reference, on the cpu target too");
  if (a0.d_head >= 64) GTEST_SKIP() << "the wide heads are covered by the reference tests";
  AttentionArgs a = a0;
  a.batch = 1;  // one sequence: finite differences cost a forward per sample
  const Exec exec = t.exec();
  const auto qkv = random_vector(static_cast<size_t>(qkv_size(a)), 2);
  const auto w = random_vector(static_cast<size_t>(out_size(a)), 3);  // L = sum(out * w)
  auto loss = [&](const std::vector<double>& x) {
    const auto r = run_host(exec, a, x);
    double l = 0;
    for (size_t i = 0; i < r.out.size(); ++i) l += r.out[i] * w[i];
    return l;
  };
  const auto rd = run<double>(t, a, qkv, &w);
  {
    // The many small forwards of the differences run serially: a parallel region each would
    // cost more than the work (results do not depend on the thread count; tested below).
    ThreadCountGuard serial(1);
    for (size_t i : sample_indices(qkv.size(), 90)) {
      const double fd = central_difference(loss, qkv, i, 1e-5);
      ASSERT_NEAR(rd.dqkv[i], fd, 1e-7 + 1e-6 * std::abs(fd)) << "at " << i;
    }
  }
}

// The float backward on this target against the float64 backward (on the CPU executor, itself
// checked by finite differences above).
TEST_P(AttentionTest, FloatBackwardMatchesFloat64Backward) {
  const auto& [name, a, t] = GetParam();
  const auto qkv = to_double(to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 2)));
  const auto w = to_double(to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 3)));
  const auto rd = run<double>(targets().front(), a, qkv, &w);
  const auto wf = to_storage<float>(w);
  const auto rf = run<float>(t, a, to_storage<float>(qkv), &wf);
  EXPECT_TRUE(all_near(to_double(rf.dqkv), rd.dqkv, 2e-5, 1e-4));
}

/// |got - ref| / |ref| in the L2 norm over all elements.
double relative_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  double e = 0, r = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    e += (got[i] - ref[i]) * (got[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return std::sqrt(e / r);
}

// bf16 storage (the bf16 model's CPU path): inputs exact in bf16, products exact, sums in float,
// but the scores S, P, dP/dS and the outputs stored in bf16 (relative 2^-9 each; an error of
// |S| 2^-9 in a logit is one of as much in its probability). Against the float64 reference of
// the same bf16 inputs, as a whole (relative L2): measured at most 0.7% forward, 0.8% backward
// over these cases. Small elements of dQKV are off by more than their size, so no per-element
// bound would say anything.
TEST_P(AttentionTest, Bf16MatchesFloat64Reference) {
  const auto& [name, a, t] = GetParam();
  const auto qkv = to_storage<tile::bf16>(random_vector(static_cast<size_t>(qkv_size(a)), 6, 1.5));
  const auto dout = to_storage<tile::bf16>(random_vector(static_cast<size_t>(out_size(a)), 7));
  std::vector<double> ref, ref_max, dref;
  attention_forward_reference(a, to_double(qkv), ref, &ref_max);
  attention_backward_reference(a, to_double(qkv), to_double(dout), dref);
  const auto r = run<tile::bf16>(t, a, qkv, &dout);
  const double e_out = relative_l2(to_double(r.out), ref), e_d = relative_l2(to_double(r.dqkv), dref);
  std::printf("  bf16 relative L2 error: out %.4f, dqkv %.4f\n", e_out, e_d);
  EXPECT_LT(e_out, 0.015);
  EXPECT_LT(e_d, 0.03);
  EXPECT_TRUE(all_near(to_double(r.row_max), ref_max, 1e-6, 1.0 / 256));  // the max of bf16 scores
}

// The entropy recomputed from qkv (what the flash path's probe uses) against the float64
// reference and against the entropy summed over the probabilities the forward stores.
TEST_P(AttentionTest, EntropyMatchesFloat64ReferenceAndTheStoredProbabilities) {
  const auto& [name, a, t] = GetParam();
  const Exec exec = t.exec();
  const auto qkv = random_vector(static_cast<size_t>(qkv_size(a)), 8, 1.5);
  std::vector<double> ref;
  attention_entropy_reference(a, qkv, ref);
  const size_t rows = ref.size();
  const auto qkvf = to_storage<float>(qkv);
  const Dev<float> gqkvf(t, qkvf);
  Dev<float> ef(t, std::vector<float>(rows, -1.0f));
  attention_entropy<float>(exec, a, gqkvf.get(), ef.get());
  std::vector<double> reff;
  attention_entropy_reference(a, to_double(qkvf), reff);
  EXPECT_TRUE(all_near(to_double(ef.host()), reff, 2e-5, 1e-4));
  const Dev<tile::bf16> qkvb(t, to_storage<tile::bf16>(qkv));
  Dev<float> eb(t, std::vector<float>(rows, -1.0f));
  attention_entropy<tile::bf16>(exec, a, qkvb.get(), eb.get());
  std::vector<double> refb;  // of the bf16 inputs: only the float sums differ
  attention_entropy_reference(a, to_double(to_storage<tile::bf16>(qkv)), refb);
  EXPECT_TRUE(all_near(to_double(eb.host()), refb, 2e-5, 1e-4));
  // The sum of the entropies is that of the stored probabilities (then scores): in double where
  // the target runs it.
  std::vector<double> ed, probs;
  double rel = 1e-9;
  if (t.float64()) {
    Dev<double> gqkv(t, qkv), ged(t, std::vector<double>(rows, -1.0));
    attention_entropy<double>(exec, a, gqkv.get(), ged.get());
    ed = ged.host();
    EXPECT_TRUE(all_near(ed, ref, 1e-12, 1e-12));
    probs = run<double>(t, a, qkv, nullptr).probs;
  } else {
    ed = to_double(ef.host());
    probs = to_double(run<float>(t, a, qkvf, nullptr).probs);
    rel = 1e-5;
  }
  double stored = 0;
  for (size_t i = 0; i < rows * static_cast<size_t>(a.seq); ++i)
    if (probs[i] > 0) stored -= probs[i] * std::log(probs[i]);
  double total = 0;
  for (double e : ed) total += e;
  EXPECT_NEAR(total, stored, rel * stored);
}

// The row max recomputed from qkv (the max-logit probe of the cuDNN baseline) against the float64
// reference's, in double, float and bf16 storage (each against the reference of its own inputs).
TEST_P(AttentionTest, RowMaxMatchesFloat64Reference) {
  const auto& [name, a, t] = GetParam();
  const Exec exec = t.exec();
  const auto qkv = random_vector(static_cast<size_t>(qkv_size(a)), 9, 1.5);
  std::vector<double> out, ref;
  attention_forward_reference(a, qkv, out, &ref);
  if (t.float64()) {
    Dev<double> gqkv(t, qkv), md(t, std::vector<double>(ref.size(), -1.0));
    attention_row_max<double>(exec, a, gqkv.get(), md.get());
    EXPECT_TRUE(all_near(md.host(), ref, 1e-12, 1e-12));
  }
  const auto qkvf = to_storage<float>(qkv);
  Dev<float> gqkvf(t, qkvf), mf(t, std::vector<float>(ref.size(), -1.0f));
  attention_row_max<float>(exec, a, gqkvf.get(), mf.get());
  attention_forward_reference(a, to_double(qkvf), out, &ref);
  EXPECT_TRUE(all_near(to_double(mf.host()), ref, 2e-6, 1e-5));
  const auto qkvb = to_storage<tile::bf16>(qkv);
  Dev<tile::bf16> gqkvb(t, qkvb);
  Dev<float> mb(t, std::vector<float>(ref.size(), -1.0f));
  attention_row_max<tile::bf16>(exec, a, gqkvb.get(), mb.get());
  attention_forward_reference(a, to_double(qkvb), out, &ref);
  EXPECT_TRUE(all_near(to_double(mb.host()), ref, 2e-5, 1e-4));  // bf16 inputs, float sums
}

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

// The float64 backward reference (what the CUDA flash backward is checked against) against the
// kernel, itself checked by finite differences above: in double where the target runs it, in
// float elsewhere. On the emulated target this is what checks the float64 backward: equal to the
// reference within 1e-10 here, as the cpu target's is, whose finite differences are checked.
TEST_P(AttentionTest, BackwardMatchesFloat64Reference) {
  const auto& [name, a, t] = GetParam();
  const auto qkv = to_double(to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 4, 1.5)));
  const auto dout = to_double(to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 5)));
  std::vector<double> ref;
  attention_backward_reference(a, qkv, dout, ref);
  if (t.float64()) {
    EXPECT_TRUE(all_near(run<double>(t, a, qkv, &dout).dqkv, ref, 1e-12, 1e-10));
  } else {
    const auto doutf = to_storage<float>(dout);
    EXPECT_TRUE(all_near(to_double(run<float>(t, a, to_storage<float>(qkv), &doutf).dqkv), ref, 2e-5, 1e-4));
  }
}

/// GroupedEqualsRepeatedKvHeads in storage type T: the tolerance of its sums.
template <class T>
void grouped_equals_repeated(const Target& t, const AttentionArgs& a, double tol) {
  const auto qkv = to_double(to_storage<T>(random_vector(static_cast<size_t>(qkv_size(a)), 4)));
  const auto dout = to_double(to_storage<T>(random_vector(static_cast<size_t>(out_size(a)), 5)));
  // The same model as MHA: kv head g copied to the `group` query heads that share it.
  AttentionArgs m = a;
  m.n_kv_heads = a.n_heads;
  const int64_t H = a.n_heads, Hkv = a.n_kv_heads, dh = a.d_head, group = H / Hkv;
  const int64_t wg = (H + 2 * Hkv) * dh, wm = 3 * H * dh, rows = a.batch * a.seq;
  std::vector<double> qkv_m(static_cast<size_t>(rows * wm));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(&qkv[r * wg], H * dh, &qkv_m[r * wm]);
    for (int64_t h = 0; h < H; ++h) {
      std::copy_n(&qkv[r * wg + (H + h / group) * dh], dh, &qkv_m[r * wm + (H + h) * dh]);
      std::copy_n(&qkv[r * wg + (H + Hkv + h / group) * dh], dh, &qkv_m[r * wm + (2 * H + h) * dh]);
    }
  }
  const auto dout_t = to_storage<T>(dout);
  const auto rg = run<T>(t, a, to_storage<T>(qkv), &dout_t);
  const auto rm = run<T>(t, m, to_storage<T>(qkv_m), &dout_t);
  const auto gd = to_double(rg.dqkv), md = to_double(rm.dqkv);
  EXPECT_TRUE(all_near(to_double(rg.out), to_double(rm.out), tol, 10 * tol));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < H * dh; ++i) ASSERT_NEAR(gd[r * wg + i], md[r * wm + i], tol) << "dq";
    for (int64_t g = 0; g < Hkv; ++g)
      for (int64_t d = 0; d < dh; ++d) {
        double dk = 0, dv = 0;
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          dk += md[r * wm + (H + h) * dh + d];
          dv += md[r * wm + (2 * H + h) * dh + d];
        }
        ASSERT_NEAR(gd[r * wg + (H + g) * dh + d], dk, tol) << "dk";
        ASSERT_NEAR(gd[r * wg + (H + Hkv + g) * dh + d], dv, tol) << "dv";
      }
  }
}

TEST_P(AttentionTest, GroupedEqualsRepeatedKvHeads) {
  const auto& [name, a, t] = GetParam();
  if (a.n_kv_heads == a.n_heads) GTEST_SKIP() << "already multi-head";
  if (t.float64()) {
    grouped_equals_repeated<double>(t, a, 1e-13);
  } else {
    grouped_equals_repeated<float>(t, a, 2e-5);
  }
}

std::vector<AttentionCase> cases() {
  std::vector<AttentionCase> out;
  for (const Target& be : targets()) {
    const std::string suffix = "_" + be.name;
    for (int64_t hkv : {4, 2, 1}) {
      const std::string kind = hkv == 4 ? "mha" : (hkv == 2 ? "gqa" : "mqa");
      out.push_back({kind + "_t5" + suffix, make_args(2, 5, 4, hkv, 8), be});
      out.push_back({kind + "_t70" + suffix, make_args(2, 70, 4, hkv, 4), be});  // two query blocks
    }
    out.push_back({"gqa_t130_softcap" + suffix, make_args(2, 130, 4, 2, 8, 1.5), be});
    out.push_back({"mqa_t130_window20" + suffix, make_args(1, 130, 4, 1, 4, 0, 20), be});
    out.push_back({"gqa_t100_window70_softcap" + suffix, make_args(1, 100, 4, 2, 4, 2.0, 70), be});
    out.push_back({"mha_t70_noncausal" + suffix, make_args(1, 70, 2, 2, 4, 0, 0, false), be});
    out.push_back({"mha_t5_dropout" + suffix, make_args(2, 5, 4, 4, 8, 0, 0, true, 0.3), be});
    out.push_back({"gqa_t70_dropout" + suffix, make_args(2, 70, 4, 2, 4, 0, 0, true, 0.1), be});
    out.push_back({"mqa_t130_window20_softcap_dropout" + suffix, make_args(1, 130, 4, 1, 4, 1.5, 20, true, 0.5), be});
    // d_head 64, T long enough for the flash state: bf16 on CUDA takes the flash kernels here
    // (attention_uses_flash), every other target and type the materializing path.
    out.push_back({"gqa_t160_d64_window100" + suffix, make_args(1, 160, 2, 1, 64, 0, 100), be});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Targets, AttentionTest, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return tp.param.name; });

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

/// Median and best wall time in ms of `reps` calls of f after one warm-up call.
template <class F>
std::pair<double, double> time_ms(int reps, F&& f) {
  f();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
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
}  // namespace bench::kernels
