// Tests of kernels/attention.h's values on every target (kernel_test_util.h): forward against the
// float64 per-head reference (MHA, GQA, MQA, sliding window, soft-cap, probability dropout, several
// query blocks), backward against central differences in double, float against double, bf16
// storage against float64, GQA against MHA with repeated kv heads, and the entropy and row-max
// probes recomputed from qkv. The rest (the cuDNN baseline's host side, dropout's closed forms,
// thread counts, launch counts, timing) is in attention_properties_test.cpp.
#include "attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "attention_test_util.h"
#include "kernel_test_util.h"

namespace bench::kernels {
namespace attention_test {
namespace {

using namespace test_attention;  // NOLINT: the attention tests' helpers

struct AttentionCase {
  std::string name;
  AttentionArgs args;
  Target target;
};
void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

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

// A captured step reads its step from device memory (args.dropout_step_at; the seed is then the
// site's dropout_site_seed): the materializing path draws that step's mask, the same bits as the
// step's seed given directly, in the probabilities, the output and the gradient, on every target.
TEST(Attention, TheStepReadFromMemoryDrawsThatStepsMask) {
  const AttentionArgs a = make_args(2, 19, 4, 2, 8, 0, 0, true, 0.3);
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 61));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 62));
  for (const Target& tg : targets()) {
    SCOPED_TRACE(tg.name);
    expect_step_read_from_memory(
        tg, a, 99, 5, [&](const AttentionArgs& s) { return run<float>(tg, s, qkv, &dout); },
        [](const AttentionRun<float>& got, const AttentionRun<float>& want) {
          EXPECT_EQ(got.probs, want.probs);
          EXPECT_EQ(got.out, want.out);
          EXPECT_EQ(got.dqkv, want.dqkv);
        });
  }
}

// Rows of probabilities wider than the widest host tile (1,100 keys > 1,024): the dropout rows
// loop over chunks of columns, and each chunk's mask is that of its own columns (the global
// index), not a repeat of the first chunk's; forward and backward against float64 on every target.
TEST(Attention, DropoutOfRowsWiderThanATileMatchesFloat64) {
  const AttentionArgs a = make_args(1, 1100, 1, 1, 4, 0, 0, true, 0.2);
  static_assert(1100 > tile::kHostMaxTile);
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 63, 1.5));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 64));
  std::vector<double> ref_out, ref_dqkv;
  attention_forward_reference(a, to_double(qkv), ref_out, nullptr);
  attention_backward_reference(a, to_double(qkv), to_double(dout), ref_dqkv);
  for (const Target& tg : targets()) {
    SCOPED_TRACE(tg.name);
    const auto r = run<float>(tg, a, qkv, &dout);
    EXPECT_TRUE(all_near(to_double(r.out), ref_out, 2e-6, 1e-5));
    EXPECT_TRUE(all_near(to_double(r.dqkv), ref_dqkv, 3e-5, 1e-4));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, AttentionTest, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return tp.param.name; });

}  // namespace
}  // namespace attention_test
}  // namespace bench::kernels
