// Tests of kernels/attention_tiled.h on the host targets (cpu, guarded): forward (out, row max,
// log-sum-exp) and backward against the float64 references of kernels/attention.h in double
// (to 1e-11) and float, for every variant (MHA, GQA, MQA, sliding window with and without causal
// masking, soft-cap, probability dropout, all together, T not a multiple of the 64-row tiles);
// the same numbers as the materializing path to rounding; bitwise equality across thread counts;
// the refusals (bf16, CUDA/emulated targets, bad shapes). DISABLED_Timing and
// DISABLED_PeakMemory* measure the table of docs/attention-cores.md ("Tiled attention on the CPU").
#include "attention_tiled.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "attention_test_util.h"
#include "kernel_test_util.h"
#include "tile/parallel.h"

namespace bench::kernels {
namespace attention_tiled_test {
namespace {

using namespace testing;         // NOLINT: the kernel test helpers
using namespace test_attention;  // NOLINT: the attention tests' helpers

struct TiledCase {
  std::string name;
  AttentionArgs args;
};
void PrintTo(const TiledCase& c, std::ostream* os) { *os << c.name; }

/// make_args with this file's dropout seed.
AttentionArgs tiled_args(int64_t b, int64_t t, int64_t h, int64_t hkv, int64_t dh, double softcap = 0,
                         int64_t window = 0, bool causal = true, double dropout = 0) {
  AttentionArgs a = make_args(b, t, h, hkv, dh, softcap, window, causal, dropout);
  a.dropout_seed = 0xf1a5;
  return a;
}

template <class T>
struct TiledRun {
  std::vector<T> out, lse, row_max, dqkv;
};

/// Forward and (with dout) backward of the tiled path on a host target, outputs poisoned.
template <class T>
TiledRun<T> run_tiled(const Exec& exec, const AttentionArgs& a, const std::vector<T>& qkv, const std::vector<T>* dout) {
  const T poison = std::nan("");
  TiledRun<T> r;
  r.out.assign(static_cast<size_t>(out_size(a)), poison);
  r.lse.assign(static_cast<size_t>(attention_tiled_state_size(a)), poison);
  r.row_max.assign(r.lse.size(), poison);
  attention_tiled_forward<T>(exec, a, qkv.data(), r.out.data(), r.lse.data(), r.row_max.data());
  if (dout != nullptr) {
    r.dqkv.assign(qkv.size(), poison);
    attention_tiled_backward<T>(exec, a, qkv.data(), r.out.data(), r.lse.data(), dout->data(), r.dqkv.data());
  }
  return r;
}

const std::vector<Exec>& host_execs() {
  static const std::vector<Exec> e = {Exec{tile::Backend::kCpu}, Exec{tile::Backend::kGuarded}};
  return e;
}

class AttentionTiledTest : public ::testing::TestWithParam<TiledCase> {};

TEST_P(AttentionTiledTest, MatchesFloat64ReferenceInDouble) {
  const AttentionArgs& a = GetParam().args;
  const auto qkv = random_vector(static_cast<size_t>(qkv_size(a)), 21, 1.5);
  const auto dout = random_vector(static_cast<size_t>(out_size(a)), 22);
  std::vector<double> ref_out, ref_max, ref_dqkv;
  attention_forward_reference(a, qkv, ref_out, &ref_max);
  attention_backward_reference(a, qkv, dout, ref_dqkv);
  const auto ref_lse = attention_lse_reference(a, qkv);
  for (const Exec& exec : host_execs()) {
    SCOPED_TRACE(tile::target_name(exec));
    // Guarded memory is the caller's to provide on that target; host vectors are readable on both.
    const auto r = run_tiled<double>(exec, a, qkv, &dout);
    EXPECT_TRUE(all_near(r.out, ref_out, 1e-12, 1e-11));
    EXPECT_TRUE(all_near(r.row_max, ref_max, 1e-12, 1e-12));
    EXPECT_TRUE(all_near(r.lse, ref_lse, 1e-12, 1e-11));
    EXPECT_TRUE(all_near(r.dqkv, ref_dqkv, 1e-12, 1e-10));
    RecordProperty("max_abs_diff_dqkv", std::to_string(max_abs_diff(r.dqkv, ref_dqkv)));
  }
}

TEST_P(AttentionTiledTest, MatchesFloat64ReferenceInFloat) {
  const AttentionArgs& a = GetParam().args;
  const auto qkvf = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 23, 1.5));
  const auto doutf = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 24));
  std::vector<double> ref_out, ref_max, ref_dqkv;  // of the float-rounded inputs
  attention_forward_reference(a, to_double(qkvf), ref_out, &ref_max);
  attention_backward_reference(a, to_double(qkvf), to_double(doutf), ref_dqkv);
  const auto r = run_tiled<float>(Exec{}, a, qkvf, &doutf);
  EXPECT_TRUE(all_near(to_double(r.out), ref_out, 2e-6, 1e-5));
  EXPECT_TRUE(all_near(to_double(r.row_max), ref_max, 2e-6, 1e-5));
  EXPECT_TRUE(all_near(to_double(r.lse), attention_lse_reference(a, to_double(qkvf)), 2e-6, 1e-5));
  EXPECT_TRUE(all_near(to_double(r.dqkv), ref_dqkv, 2e-5, 1e-4));
  RecordProperty("max_abs_diff_dqkv", std::to_string(max_abs_diff(to_double(r.dqkv), ref_dqkv)));
}

// The materializing path on the same inputs: the two agree to float rounding (not bit for bit:
// the summation order differs), and the row max, which both compute the same way, exactly.
TEST_P(AttentionTiledTest, AgreesWithMaterializingPath) {
  const AttentionArgs& a = GetParam().args;
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 25, 1.5));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 26));
  std::vector<float> out(static_cast<size_t>(out_size(a))), probs(static_cast<size_t>(attention_probs_size(a)));
  std::vector<float> row_max(static_cast<size_t>(attention_tiled_state_size(a))), dqkv(qkv.size());
  std::vector<float> ws(static_cast<size_t>(attention_workspace_size<float>(Exec{}, a)));
  attention_forward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), row_max.data(), ws.data());
  attention_backward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), dout.data(), dqkv.data(), ws.data());
  const auto r = run_tiled<float>(Exec{}, a, qkv, &dout);
  EXPECT_TRUE(all_near(to_double(r.out), to_double(out), 2e-6, 1e-5));
  EXPECT_TRUE(all_near(to_double(r.dqkv), to_double(dqkv), 2e-5, 1e-4));
  EXPECT_TRUE(all_near(to_double(r.row_max), to_double(row_max), 1e-6, 1e-6));
}

const std::vector<TiledCase>& tiled_cases() {
  static const std::vector<TiledCase> c = {
      {"mha", tiled_args(2, 150, 2, 2, 16)},  // three query blocks, the last partial; two key tiles
      {"gqa", tiled_args(1, 130, 4, 2, 8)},
      {"mqa", tiled_args(1, 70, 3, 1, 8)},
      {"window", tiled_args(1, 200, 2, 2, 8, 0, 37)},  // tiles wholly outside some rows' band
      {"window_not_causal", tiled_args(1, 100, 2, 1, 8, 0, 20, false)},
      {"not_causal", tiled_args(2, 300, 2, 2, 8, 0, 0, false)},  // three key tiles, the last partial
      {"softcap", tiled_args(1, 140, 2, 2, 16, 2.0)},            // logits of 1.5^2 * 16 / 4 reach the cap
      {"dropout", tiled_args(2, 140, 2, 1, 8, 0, 0, true, 0.2)},
      {"everything", tiled_args(2, 160, 4, 2, 8, 3.0, 90, true, 0.1)},
      {"one_token", tiled_args(3, 1, 2, 1, 4, 1.0, 0, true, 0.5)},
  };
  return c;
}

INSTANTIATE_TEST_SUITE_P(Variants, AttentionTiledTest, ::testing::ValuesIn(tiled_cases()),
                         [](const ::testing::TestParamInfo<TiledCase>& i) { return i.param.name; });

// Dropout acts: the rate changes the output, the seed changes the mask (so the references above
// check the mask itself, not an all-ones one).
TEST(AttentionTiled, DropoutMaskMatters) {
  AttentionArgs a = tiled_args(1, 80, 2, 2, 8, 0, 0, true, 0.3);
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 27));
  const auto r1 = run_tiled<float>(Exec{}, a, qkv, nullptr);
  a.dropout_seed += 1;
  const auto r2 = run_tiled<float>(Exec{}, a, qkv, nullptr);
  EXPECT_GT(max_abs_diff(to_double(r1.out), to_double(r2.out)), 1e-3);
  EXPECT_EQ(r1.lse, r2.lse);  // the log-sum-exp is of the undropped probabilities
}

// Each task's result is computed on one thread in a fixed order: the same bits for 1 and 2 threads.
TEST(AttentionTiled, BitwiseAcrossThreadCounts) {
  const AttentionArgs a = tiled_args(2, 200, 4, 2, 16, 4.0, 100, true, 0.1);
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 28));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 29));
  const int before = tile::num_threads();
  tile::set_num_threads(1);
  const auto one = run_tiled<float>(Exec{}, a, qkv, &dout);
  tile::set_num_threads(2);
  const auto two = run_tiled<float>(Exec{}, a, qkv, &dout);
  tile::set_num_threads(before);
  EXPECT_EQ(one.out, two.out);
  EXPECT_EQ(one.lse, two.lse);
  EXPECT_EQ(one.dqkv, two.dqkv);
}

TEST(AttentionTiled, Refusals) {
  EXPECT_EQ(attention_tiled_unsupported<float>(Exec{}), "");
  EXPECT_EQ(attention_tiled_unsupported<double>(Exec{tile::Backend::kGuarded}), "");
  EXPECT_NE(attention_tiled_unsupported<tile::bf16>(Exec{}), "");
  EXPECT_NE(attention_tiled_unsupported<float>(Exec{tile::Backend::kEmulated}), "");
  EXPECT_NE(attention_tiled_unsupported<float>(Exec{tile::Backend::kCuda}), "");
  const AttentionArgs a = tiled_args(1, 8, 2, 2, 4);
  std::vector<float> x(static_cast<size_t>(qkv_size(a))), o(static_cast<size_t>(out_size(a))), l(16);
  EXPECT_THROW(attention_tiled_forward<float>(Exec{tile::Backend::kEmulated}, a, x.data(), o.data(), l.data(), nullptr),
               std::invalid_argument);
  std::vector<tile::bf16> xb(x.size()), ob(o.size());
  EXPECT_THROW(attention_tiled_forward<tile::bf16>(Exec{}, a, xb.data(), ob.data(), l.data(), nullptr),
               std::invalid_argument);
  AttentionArgs bad = a;
  bad.n_kv_heads = 3;
  EXPECT_THROW(attention_tiled_forward<float>(Exec{}, bad, x.data(), o.data(), l.data(), nullptr),
               std::invalid_argument);
  bad = a;
  bad.dropout = 1;
  EXPECT_THROW(attention_tiled_forward<float>(Exec{}, bad, x.data(), o.data(), l.data(), nullptr),
               std::invalid_argument);
}

// The rule of kernel = "auto" on the CPU: tiled once the probabilities pass 64 MiB per layer.
TEST(AttentionTiled, AutoRule) {
  EXPECT_FALSE(attention_tiled_preferred(tiled_args(8, 256, 4, 4, 64), 4));        // 8 MiB
  EXPECT_FALSE(attention_tiled_preferred(tiled_args(1, 2048, 4, 4, 64), 4));       // 64 MiB: not above
  EXPECT_TRUE(attention_tiled_preferred(tiled_args(1, 4096, 4, 4, 64), 4));        // 256 MiB
  EXPECT_TRUE(attention_tiled_preferred(tiled_args(1, 2048, 4, 4, 64, 30.0), 4));  // scores kept too: 128 MiB
}

// --- measurements for docs/attention-cores.md (not run by default) ----------------------------

/// B=1, H=4, dh=64, causal, float, one thread: forward and forward+backward medians of both paths
/// at T = 256, 1024, 4096, and the bytes each keeps between forward and backward.
// Run with: kernels_test --gtest_also_run_disabled_tests --gtest_filter='AttentionTiledTiming.*'
TEST(AttentionTiledTiming, DISABLED_Timing) {
  const int before = tile::num_threads();
  tile::set_num_threads(1);
  for (int64_t t : {256, 1024, 4096}) {
    const AttentionArgs a = tiled_args(1, t, 4, 4, 64);
    const int reps = t >= 4096 ? 5 : t >= 1024 ? 21 : 101;
    const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 30));
    const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 31));
    std::vector<float> out(static_cast<size_t>(out_size(a))), dqkv(qkv.size());
    std::vector<float> row_max(static_cast<size_t>(attention_tiled_state_size(a)));
    {
      std::vector<float> probs(static_cast<size_t>(attention_probs_size(a)));
      std::vector<float> ws(static_cast<size_t>(attention_workspace_size<float>(Exec{}, a)));
      const auto f = [&] {
        attention_forward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), row_max.data(), ws.data());
      };
      const auto fwd = time_ms(reps, f);
      const auto fb = time_ms(reps, [&] {
        f();
        attention_backward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), dout.data(), dqkv.data(), ws.data());
      });
      std::printf(
          "materializing T=%ld: forward %.2f ms (best %.2f), forward+backward %.2f ms (best %.2f), kept %.1f MiB\n",
          static_cast<long>(t), fwd.first, fwd.second, fb.first, fb.second,
          static_cast<double>((probs.size() + ws.size()) * sizeof(float)) / (1 << 20));
    }
    std::vector<float> lse(static_cast<size_t>(attention_tiled_state_size(a)));
    const auto f = [&] {
      attention_tiled_forward<float>(Exec{}, a, qkv.data(), out.data(), lse.data(), row_max.data());
    };
    const auto fwd = time_ms(reps, f);
    const auto fb = time_ms(reps, [&] {
      f();
      attention_tiled_backward<float>(Exec{}, a, qkv.data(), out.data(), lse.data(), dout.data(), dqkv.data());
    });
    std::printf(
        "tiled         T=%ld: forward %.2f ms (best %.2f), forward+backward %.2f ms (best %.2f), kept %.3f MiB\n",
        static_cast<long>(t), fwd.first, fwd.second, fb.first, fb.second,
        static_cast<double>(lse.size() * sizeof(float)) / (1 << 20));
  }
  tile::set_num_threads(before);
}

/// Peak resident memory of the process, MiB.
double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024;
}

/// One forward+backward at B=1, H=4, dh=64, T = `t` on one path, then the peak RSS: one process
/// per path and T (a gtest filter each), so that each peak is its own.
void peak_memory(int64_t t, bool tiled) {
  const double base = peak_rss_mib();
  const AttentionArgs a = tiled_args(1, t, 4, 4, 64);
  const auto qkv = to_storage<float>(random_vector(static_cast<size_t>(qkv_size(a)), 32));
  const auto dout = to_storage<float>(random_vector(static_cast<size_t>(out_size(a)), 33));
  std::vector<float> out(static_cast<size_t>(out_size(a))), dqkv(qkv.size());
  const double inputs = peak_rss_mib();
  if (tiled) {
    std::vector<float> lse(static_cast<size_t>(attention_tiled_state_size(a))), rm(lse.size());
    attention_tiled_forward<float>(Exec{}, a, qkv.data(), out.data(), lse.data(), rm.data());
    attention_tiled_backward<float>(Exec{}, a, qkv.data(), out.data(), lse.data(), dout.data(), dqkv.data());
  } else {
    std::vector<float> probs(static_cast<size_t>(attention_probs_size(a))), rm(static_cast<size_t>(a.seq * 4));
    std::vector<float> ws(static_cast<size_t>(attention_workspace_size<float>(Exec{}, a)));
    attention_forward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), rm.data(), ws.data());
    attention_backward<float>(Exec{}, a, qkv.data(), out.data(), probs.data(), dout.data(), dqkv.data(), ws.data());
  }
  std::printf(
      "%s T=%ld: peak RSS %.1f MiB (process before %.1f, with inputs and outputs %.1f): attention adds %.1f MiB\n",
      tiled ? "tiled" : "materializing", static_cast<long>(t), peak_rss_mib(), base, inputs, peak_rss_mib() - inputs);
}

TEST(AttentionTiledTiming, DISABLED_PeakMemoryMaterializing256) { peak_memory(256, false); }
TEST(AttentionTiledTiming, DISABLED_PeakMemoryMaterializing1024) { peak_memory(1024, false); }
TEST(AttentionTiledTiming, DISABLED_PeakMemoryMaterializing4096) { peak_memory(4096, false); }
TEST(AttentionTiledTiming, DISABLED_PeakMemoryTiled256) { peak_memory(256, true); }
TEST(AttentionTiledTiming, DISABLED_PeakMemoryTiled1024) { peak_memory(1024, true); }
TEST(AttentionTiledTiming, DISABLED_PeakMemoryTiled4096) { peak_memory(4096, true); }

}  // namespace
}  // namespace attention_tiled_test
}  // namespace bench::kernels
