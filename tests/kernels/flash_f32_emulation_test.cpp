// The float32 flash attention kernels of kernels/cuda/flash_attention_f32_kernels.cuh — the very
// source the CUDA build compiles — run on the CPU by the warp emulator of warp_emulator.h (every
// CUDA thread a fiber, __syncthreads a barrier, the warps reordered between barriers so that a
// missing one fails). Forward (out, log-sum-exp, row max) and backward (dQ, dK, dV) are checked
// against the float64 references of kernels/attention.h at float32's precision: the kernels
// compute in float32 throughout (no bf16 or TF32 rounding), so the tolerances are a few hundred
// float32 ulps of the results, where one wrong mask bit, tile bound or formula costs orders of
// magnitude more. (Speed and the hardware's own float4 loads and shuffles are for
// tests/cuda/cuda_check.cu.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention.h"
#include "attention_flash_f32.h"
#include "cuda/flash_attention_f32_backward_kernels.cuh"
#include "cuda/flash_attention_f32_kernels.cuh"
#include "warp_emulator.h"

namespace bench::kernels {
namespace flash_f32_emulation_test {
namespace {

using emulator::EmulatedThread;
using emulator::launch;
using flash32::kBlock;
using flash32::kThreads;

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(gen);
  return v;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// Whether every element is within tol * (1 + |ref|) of the reference (NaN fails); the first that
/// is not, and the largest error seen.
::testing::AssertionResult close(const std::vector<double>& ref, const std::vector<double>& got, double tol) {
  if (ref.size() != got.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::abs(got[i] - ref[i]) <= tol * (1 + std::abs(ref[i]))))
      return ::testing::AssertionFailure()
             << "at " << i << ": " << got[i] << " vs " << ref[i] << " (tolerance " << tol << " (1 + |ref|))";
  return ::testing::AssertionSuccess();
}

struct Flash32Case {
  std::string name;
  AttentionArgs args;
};

void PrintTo(const Flash32Case& c, std::ostream* os) { *os << c.name; }

class Flash32Emulation : public ::testing::TestWithParam<Flash32Case> {};

/// Emulated forward: out, row max and log-sum-exp (NaN where unwritten).
template <int D>
void forward(const AttentionArgs& a, const std::vector<float>& qkv, std::vector<float>& out,
             std::vector<float>& row_max, std::vector<float>& lse) {
  out.assign(static_cast<size_t>(a.batch * a.seq * a.n_heads * D), NAN);
  row_max.assign(static_cast<size_t>(a.batch * a.n_heads * a.seq), NAN);
  lse.assign(row_max.size(), NAN);
  const flash32::Params p = flash32::params_of(a);
  launch((a.seq + kBlock - 1) / kBlock, a.batch * a.n_heads, kThreads, flash32::forward_smem_bytes<D>(),
         [&](EmulatedThread& th) {
           if (a.dropout > 0)
             flash32::forward<D, true>(th, p, qkv.data(), out.data(), row_max.data(), lse.data());
           else
             flash32::forward<D, false>(th, p, qkv.data(), out.data(), row_max.data(), lse.data());
         });
}

/// Emulated backward, its three launches: dqkv (NaN where unwritten).
template <int D>
std::vector<float> backward(const AttentionArgs& a, const std::vector<float>& qkv, const std::vector<float>& out,
                            const std::vector<float>& lse, const std::vector<float>& dout) {
  const flash32::Params p = flash32::params_of(a);
  const int64_t rows = a.batch * a.n_heads * a.seq;
  std::vector<float> dvec(static_cast<size_t>(rows), NAN), dqkv(qkv.size(), NAN);
  launch((rows + flash32::kWarps - 1) / flash32::kWarps, 1, kThreads, 0, [&](EmulatedThread& th) {
    flash32::backward_prep<D>(th, out.data(), dout.data(), dvec.data(), a.seq, p.n_h, rows);
  });
  const int64_t tiles = (a.seq + kBlock - 1) / kBlock;
  launch(tiles, a.batch * a.n_kv_heads, kThreads, flash32::backward_dkdv_smem_bytes<D>(), [&](EmulatedThread& th) {
    if (a.dropout > 0)
      flash32::backward_dkdv<D, true>(th, p, qkv.data(), dout.data(), lse.data(), dvec.data(), dqkv.data());
    else
      flash32::backward_dkdv<D, false>(th, p, qkv.data(), dout.data(), lse.data(), dvec.data(), dqkv.data());
  });
  launch(tiles, a.batch * a.n_heads, kThreads, flash32::backward_dq_smem_bytes<D>(), [&](EmulatedThread& th) {
    if (a.dropout > 0)
      flash32::backward_dq<D, true>(th, p, qkv.data(), dout.data(), lse.data(), dvec.data(), dqkv.data());
    else
      flash32::backward_dq<D, false>(th, p, qkv.data(), dout.data(), lse.data(), dvec.data(), dqkv.data());
  });
  return dqkv;
}

template <int D>
void check_forward(const AttentionArgs& a) {
  const auto qkv = random_floats(static_cast<size_t>(a.batch * a.seq * (a.n_heads + 2 * a.n_kv_heads) * D), 31);
  std::vector<float> out, row_max, lse;
  forward<D>(a, qkv, out, row_max, lse);
  std::vector<double> out_ref, max_ref;
  attention_forward_reference(a, widen(qkv), out_ref, &max_ref);
  EXPECT_TRUE(close(out_ref, widen(out), 2e-6)) << "output";
  EXPECT_TRUE(close(max_ref, widen(row_max), 1e-6)) << "max logit";
  EXPECT_TRUE(close(attention_lse_reference(a, widen(qkv)), widen(lse), 1e-6)) << "log-sum-exp";
}

template <int D>
void check_backward(const AttentionArgs& a) {
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * D;
  const auto qkv = random_floats(static_cast<size_t>(a.batch * a.seq * width), 33);
  const auto dout = random_floats(static_cast<size_t>(a.batch * a.seq * a.n_heads * D), 34);
  std::vector<float> out, row_max, lse;
  forward<D>(a, qkv, out, row_max, lse);
  const std::vector<float> dqkv = backward<D>(a, qkv, out, lse, dout);
  std::vector<double> ref;
  attention_backward_reference(a, widen(qkv), widen(dout), ref);
  EXPECT_TRUE(close(ref, widen(dqkv), 1e-5)) << "dqkv";
}

TEST_P(Flash32Emulation, ForwardMatchesFloat64Reference) {
  const AttentionArgs& a = GetParam().args;
  if (a.d_head == 64)
    check_forward<64>(a);
  else
    check_forward<128>(a);
}

TEST_P(Flash32Emulation, BackwardMatchesFloat64Reference) {
  const AttentionArgs& a = GetParam().args;
  if (a.d_head == 64)
    check_backward<64>(a);
  else
    check_backward<128>(a);
}

std::vector<Flash32Case> cases() {
  std::vector<Flash32Case> c;
  // Causal: block 1 of queries has an interior tile (keys 0..63, no mask) and the diagonal.
  c.push_back({"mha_t140_dh64", {1, 140, 2, 2, 64, 0.125}});
  AttentionArgs a{1, 130, 4, 2, 64, 0.125};
  a.window = 40;
  c.push_back({"gqa_4of2_t130_window40", a});
  a = {1, 20, 2, 1, 64, 0.5};
  a.causal = false;
  a.softcap = 5;
  c.push_back({"mqa_noncausal_t20_softcap5", a});
  a = {1, 65, 2, 1, 128, 1.0 / std::sqrt(128.0)};
  a.softcap = 30;
  c.push_back({"mqa_t65_dh128_softcap30", a});
  // Interior tiles and edge tiles in one block row, several K/V tiles, two sequences.
  a = {2, 150, 1, 1, 64, 0.125};
  a.causal = false;
  c.push_back({"mha_noncausal_t150_b2", a});
  a = {1, 200, 1, 1, 128, 1.0 / std::sqrt(128.0)};
  a.window = 100;
  c.push_back({"mha_t200_dh128_window100", a});
  // A window without causal masking: every query sees the fixed band of the last 30 keys (the
  // first key tile holds none of them; the dK/dV blocks of keys 0..63 see no query at all).
  a = {1, 100, 2, 1, 64, 0.125};
  a.causal = false;
  a.window = 30;
  c.push_back({"mqa_noncausal_t100_window30", a});
  a = {1, 90, 4, 2, 64, 0.125};
  a.dropout = 0.2;
  a.dropout_seed = 77;
  c.push_back({"gqa_t90_dropout", a});
  // Dropout at d_head 128 (kNC 8), not causal, with a soft-cap and a window: dS's dropout mask
  // beside the soft-cap's derivative (the one case above alone failed when dS dropped the mask).
  a = {1, 100, 2, 1, 128, 1.0 / std::sqrt(128.0)};
  a.causal = false;
  a.softcap = 20;
  a.window = 30;
  a.dropout = 0.3;
  a.dropout_seed = 91;
  c.push_back({"mqa_noncausal_t100_dh128_softcap20_window30_dropout", a});
  // Windows whose limits fall on the 64-key tiles' edges (docs/flash-forward.md, "The mask's
  // limits on the tiles' edges"): each catches a mask one key off that every case above passes.
  // Causal, 127 over T 128: query tile 64's last row sees tile 0 from key 1 on (a tile taken for
  // interior one key early). Causal, 2 over T 160: query 64 sees key 63 of the tile before, the
  // first query's key tiles and the last key's query tiles both end there (one short skips it).
  // Not causal, a band of the last 128 keys of T 129 (key 0 hidden: tile 0 is not interior) and of
  // the last 37 of T 100 (key 63, the first tile's last, is the band's first: tile 0 is needed).
  a = {1, 128, 2, 1, 64, 0.125};
  a.window = 127;
  c.push_back({"mqa_t128_window127", a});
  a = {1, 160, 4, 2, 64, 0.125};
  a.window = 2;
  c.push_back({"gqa_4of2_t160_window2", a});
  a = {1, 129, 1, 1, 64, 0.125};
  a.causal = false;
  a.window = 128;
  c.push_back({"mha_noncausal_t129_window128", a});
  a = {1, 100, 1, 1, 64, 0.125};
  a.causal = false;
  a.window = 37;
  c.push_back({"mha_noncausal_t100_window37", a});
  return c;
}

INSTANTIATE_TEST_SUITE_P(All, Flash32Emulation, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Flash32Case>& i) { return i.param.name; });

/// No atomics: the backward's dqkv is the same bits on a second run (the emulator runs the warps
/// in another order the second time round, as a GPU may).
TEST(Flash32Emulation, BackwardIsDeterministic) {
  AttentionArgs a{1, 100, 4, 2, 64, 0.125};
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * 64;
  const auto qkv = random_floats(static_cast<size_t>(a.seq * width), 35);
  const auto dout = random_floats(static_cast<size_t>(a.seq * a.n_heads * 64), 36);
  std::vector<float> out, row_max, lse;
  forward<64>(a, qkv, out, row_max, lse);
  const std::vector<float> first = backward<64>(a, qkv, out, lse, dout);
  const std::vector<float> second = backward<64>(a, qkv, out, lse, dout);
  EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(float)));
}

/// What the kernels refuse, they name (so that `core = "auto"` falls through to the fused core and
/// `core = "flash"` says why), and off CUDA the launchers throw rather than run.
TEST(Flash32Limits, RefusalsNameTheReason) {
  AttentionArgs a{2, 100, 4, 2, 64, 0.125};
  EXPECT_EQ(attention_flash_f32_unsupported(a), "");
  a.d_head = 128;
  a.causal = false;
  a.window = 10;
  a.softcap = 5;
  a.dropout = 0.5;
  EXPECT_EQ(attention_flash_f32_unsupported(a), "");
  a.d_head = 96;
  EXPECT_NE(attention_flash_f32_unsupported(a).find("d_head = 96"), std::string::npos);
  a = {2, 100, 4, 3, 64, 0.125};
  EXPECT_NE(attention_flash_f32_unsupported(a).find("n_heads a multiple of n_kv_heads"), std::string::npos);
  a = {2, 100, 4, 2, 64, 0.125};
  a.dropout = 1;
  EXPECT_NE(attention_flash_f32_unsupported(a).find("dropout"), std::string::npos);
  a.dropout = 0;
  a.batch = 16384;  // 65,536 (batch, head) pairs: one past CUDA's grid y
  EXPECT_NE(attention_flash_f32_unsupported(a).find("65536 (batch, head) pairs"), std::string::npos);
  a.batch = 16383;
  EXPECT_EQ(attention_flash_f32_unsupported(a), "");
  a.batch = 2;
  // The log-sum-exp's 800 floats, D from the next multiple of 64 (832, 256-byte aligned) on.
  EXPECT_EQ(attention_flash_f32_state_size(a), 832 + 800);
  std::vector<float> qkv(static_cast<size_t>(2 * 100 * 8 * 64)), out(static_cast<size_t>(2 * 100 * 4 * 64)),
      state(static_cast<size_t>(attention_flash_f32_state_size(a)));
  EXPECT_ANY_THROW(
      attention_flash_f32_forward(tile::Exec{tile::Backend::kCpu}, a, qkv.data(), out.data(), nullptr, state.data()));
}

}  // namespace
}  // namespace flash_f32_emulation_test
}  // namespace bench::kernels
