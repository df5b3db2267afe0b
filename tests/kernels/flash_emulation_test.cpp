// The flash attention kernels of kernels/cuda/flash_attention_kernels.cuh and
// flash_attention_backward_kernels.cuh — the very source the CUDA build compiles — run on the CPU
// by the warp emulator of warp_emulator.h (every CUDA thread a fiber, the warp-wide operations
// decoded with the fragment layouts of the PTX ISA, a missing barrier caught by reordering the
// warps). Forward and backward are checked against the float64 references of kernels/attention.h,
// so a wrong fragment index, mask or tile bound fails here, in CI, without a GPU. (Speed and the
// hardware's own mma are for tests/cuda/cuda_check.cu.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attention.h"
#include "cuda/flash_attention_backward_kernels.cuh"
#include "cuda/flash_attention_kernels.cuh"
#include "cuda/flash_attention_wgmma_backward_kernels.cuh"
#include "cuda/flash_attention_wgmma_kernels.cuh"
#include "cuda/tma_map.h"
#include "warp_emulator.h"

namespace bench::kernels {
namespace flash_emulation_test {
namespace {

using flash::kThreads;

using emulator::EmulatedThread;
using emulator::launch;

std::vector<uint16_t> random_bf16(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = tile::float_to_bf16(nd(gen)).bits;
  return v;
}

std::vector<double> widen(const std::vector<uint16_t>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = tile::bf16_to_float(tile::bf16{v[i]});
  return r;
}

/// Whether every element is within atol + rtol |ref| of the reference (NaN fails); the first that is not.
::testing::AssertionResult close(const std::vector<double>& ref, const std::vector<double>& got, double atol,
                                 double rtol) {
  if (ref.size() != got.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::abs(got[i] - ref[i]) <= atol + rtol * std::abs(ref[i])))
      return ::testing::AssertionFailure() << "at " << i << ": " << got[i] << " vs " << ref[i];
  return ::testing::AssertionSuccess();
}

/// A (query, key) pair of a case whose logit the inputs make the row's largest by far, where the
/// mask hides it: a mask that let it in moves that query's output and gradients by about its
/// probability (most of the row's), where with logits about 0 one pair of a long window adds about
/// 1 / window, inside the tolerance. Query -1: none.
struct HotPair {
  int64_t query = -1, key = -1;
};

/// Every query head's row `hot.query` of q becomes half its kv head's row `hot.key` of k (each
/// sequence of the batch): a logit of about d_head / 2 times the scale (4 at d 64 and scale 1/8,
/// 5.7 at d 128), against about 0.5 with the row's other keys.
void make_pair_hot(std::vector<uint16_t>& qkv, const AttentionArgs& a, int d, HotPair hot) {
  if (hot.query < 0) return;
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * d, group = a.n_heads / a.n_kv_heads;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.n_heads; ++h)
      for (int64_t i = 0; i < d; ++i) {
        const uint16_t k = qkv[static_cast<size_t>((b * a.seq + hot.key) * width + (a.n_heads + h / group) * d + i)];
        qkv[static_cast<size_t>((b * a.seq + hot.query) * width + h * d + i)] =
            tile::float_to_bf16(0.5f * tile::bf16_to_float(tile::bf16{k})).bits;
      }
}

struct FlashCase {
  FlashCase(std::string n, const AttentionArgs& a, bool negative = false, HotPair h = {})
      : name(std::move(n)), args(a), negative_logits(negative), hot(h) {}
  std::string name;
  AttentionArgs args;
  bool negative_logits;  // the forward's inputs through make_logits_negative
  HotPair hot;           // the inputs (forward and backward) through make_pair_hot
};

void PrintTo(const FlashCase& c, std::ostream* os) { *os << c.name; }

class FlashEmulation : public ::testing::TestWithParam<FlashCase> {};

/// Emulated forward: out (bf16 bits), row max and log-sum-exp.
template <int D>
void forward(const AttentionArgs& a, const std::vector<uint16_t>& qkv, std::vector<uint16_t>& out,
             std::vector<float>& row_max, std::vector<float>& lse) {
  out.assign(static_cast<size_t>(a.batch * a.seq * a.n_heads * D), 0xffff);  // NaN: unwritten fails
  row_max.assign(static_cast<size_t>(a.batch * a.n_heads * a.seq), NAN);
  lse.assign(row_max.size(), NAN);
  const int n_h = static_cast<int>(a.n_heads), n_kv = static_cast<int>(a.n_kv_heads);
  const auto body = [&]<bool kDropout>(EmulatedThread& th) {
    flash::flash_forward<D, kDropout>(th, qkv.data(), out.data(), row_max.data(), lse.data(), a.seq, n_h, n_kv,
                                      static_cast<float>(a.scale), static_cast<float>(a.softcap), a.window, a.causal,
                                      static_cast<float>(a.dropout), a.dropout_seed);
  };
  int64_t grid_x = 0, grid_y = 0;
  flash::forward_grid(a.seq, a.batch * a.n_heads, a.causal, grid_x, grid_y);
  launch(grid_x, grid_y, flash::kFwdThreads, flash::forward_smem_bytes<D>(), [&](EmulatedThread& th) {
    if (a.dropout > 0)
      body.template operator()<true>(th);
    else
      body.template operator()<false>(th);
  });
}

/// Emulated forward on wgmma (flash_attention_wgmma_kernels.cuh): the same outputs; kWs the
/// warp-specialized variant, kTma its TMA loads (through the tensor map arguments the GPU launch
/// encodes: tma::flash_tensor_map); kN the key tile (64, or the warp-specialized launch's 128).
template <int D, bool kWs, bool kTma = false, int kN = flash::kBlockN>
void forward_wgmma(const AttentionArgs& a, const std::vector<uint16_t>& qkv, std::vector<uint16_t>& out,
                   std::vector<float>& row_max, std::vector<float>& lse) {
  out.assign(static_cast<size_t>(a.batch * a.seq * a.n_heads * D), 0xffff);
  row_max.assign(static_cast<size_t>(a.batch * a.n_heads * a.seq), NAN);
  lse.assign(row_max.size(), NAN);
  const int n_h = static_cast<int>(a.n_heads), n_kv = static_cast<int>(a.n_kv_heads);
  const tma::TensorMapArgs map = tma::flash_tensor_map(qkv.data(), a.batch, a.seq, n_h, n_kv, D);
  const auto body = [&]<bool kDropout>(EmulatedThread& th) {
    flash::flash_forward_wgmma<D, kDropout, kWs, kTma, kN>(
        th, qkv.data(), out.data(), row_max.data(), lse.data(), a.seq, n_h, n_kv, static_cast<float>(a.scale),
        static_cast<float>(a.softcap), a.window, a.causal, static_cast<float>(a.dropout), a.dropout_seed, &map);
  };
  int64_t grid_x = 0, grid_y = 0;
  flash::forward_grid(a.seq, a.batch * a.n_heads, a.causal, grid_x, grid_y);
  launch(grid_x, grid_y, flash::wgmma_forward_threads<kWs>(), flash::wgmma_forward_smem_bytes<D, kWs, kTma, kN>(),
         [&](EmulatedThread& th) {
           if (a.dropout > 0)
             body.template operator()<true>(th);
           else
             body.template operator()<false>(th);
         });
}

/// Q's elements made non-negative and K's non-positive (V as drawn): every logit q.k scale is
/// -scale sum |q_i| |k_i|, about -0.64 d_head scale (-5 at d 64, -7 at d 128, a spread under 1).
/// A key past the sequence's end is a zero row (its copy fills zeros), so its logit 0 is then the
/// largest of the row: a mask that let it in would report a row max of 0 and add exp(0 - m) >> the
/// row's own sum, where with logits about 0 it adds a few per cent at most, inside the tolerance.
void make_logits_negative(std::vector<uint16_t>& qkv, const AttentionArgs& a, int d) {
  const size_t width = static_cast<size_t>((a.n_heads + 2 * a.n_kv_heads) * d),
               q_end = static_cast<size_t>(a.n_heads * d), k_end = static_cast<size_t>((a.n_heads + a.n_kv_heads) * d);
  for (size_t i = 0; i < qkv.size(); ++i) {
    const size_t col = i % width;
    if (col < q_end)
      qkv[i] &= 0x7fffu;  // bf16's sign bit cleared
    else if (col < k_end)
      qkv[i] |= 0x8000u;
  }
}

template <int D, bool kWgmma = false, bool kWs = false, bool kTma = false, int kN = flash::kBlockN>
void check_forward(const AttentionArgs& a, bool negative_logits = false, HotPair hot = {}) {
  auto qkv = random_bf16(static_cast<size_t>(a.batch * a.seq * (a.n_heads + 2 * a.n_kv_heads) * D), 31);
  if (negative_logits) make_logits_negative(qkv, a, D);
  make_pair_hot(qkv, a, D, hot);
  std::vector<uint16_t> out;
  std::vector<float> row_max, lse;
  if constexpr (kWgmma)
    forward_wgmma<D, kWs, kTma, kN>(a, qkv, out, row_max, lse);
  else
    forward<D>(a, qkv, out, row_max, lse);
  std::vector<double> out_ref, max_ref;
  attention_forward_reference(a, widen(qkv), out_ref, &max_ref);
  EXPECT_TRUE(close(out_ref, widen(out), 2e-2, 2e-2)) << "output";
  EXPECT_TRUE(close(max_ref, std::vector<double>(row_max.begin(), row_max.end()), 1e-4, 1e-4)) << "max logit";
  // The log-sum-exp, which the backward reads: against float64 (the emulated backwards read the
  // mma.sync forward's, so the wgmma forwards' is checked here alone).
  EXPECT_TRUE(close(attention_lse_reference(a, widen(qkv)), std::vector<double>(lse.begin(), lse.end()), 1e-4, 1e-4))
      << "log-sum-exp";
  // lse >= max, and exp(max - lse) is the largest probability: at most 1.
  for (size_t i = 0; i < lse.size(); ++i) ASSERT_TRUE(lse[i] >= row_max[i] - 1e-5f) << i;
}

/// The backward (prep, main, dQ) after the mma.sync forward, its main kernel the mma.sync one or
/// (kWgmma) the wgmma one of flash_attention_wgmma_backward_kernels.cuh (dQ by bulk reductions
/// with a.flash_backward_bulk_dq, Q and dO by TMA with a.flash_backward_tma: through the tensor
/// map arguments the GPU launch encodes; warp-specialized, by TMA, with a.flash_backward_ws), on
/// the grid of flash::backward_grid in
/// a.flash_backward_heaviest_first's order, against float64; dqkv into `got` where given. dq_accum
/// has a tile of rows beyond its end, which no bulk reduction may reach (a row past the sequence's
/// end not skipped).
template <int D, bool kWgmma = false>
void check_backward(const AttentionArgs& a, std::vector<uint16_t>* got = nullptr, HotPair hot = {}) {
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * D;
  auto qkv = random_bf16(static_cast<size_t>(a.batch * a.seq * width), 33);
  make_pair_hot(qkv, a, D, hot);
  const auto dout = random_bf16(static_cast<size_t>(a.batch * a.seq * a.n_heads * D), 34);
  std::vector<uint16_t> out;
  std::vector<float> row_max, lse;
  forward<D>(a, qkv, out, row_max, lse);
  const int n_h = static_cast<int>(a.n_heads), n_kv = static_cast<int>(a.n_kv_heads);
  const int64_t rows = a.batch * a.n_heads * a.seq;
  std::vector<float> dvec(static_cast<size_t>(rows), NAN), dq_accum(static_cast<size_t>((rows + 64) * D), NAN);
  std::vector<uint16_t> dqkv(qkv.size(), 0xffff);
  launch((rows + flash::kWarps - 1) / flash::kWarps, 1, kThreads, 0, [&](EmulatedThread& th) {
    flash::flash_backward_prep<D>(th, out.data(), dout.data(), dvec.data(), dq_accum.data(), a.seq, n_h, rows);
  });
  int64_t grid_x = 0, grid_y = 0;
  const bool heaviest_first =
      flash::backward_grid(a.seq, a.batch * a.n_kv_heads, a.causal, a.flash_backward_heaviest_first, grid_x, grid_y);
  const tma::TensorMapArgs q_map = tma::flash_tensor_map(qkv.data(), a.batch, a.seq, n_h, n_kv, D),
                           do_map = tma::flash_tensor_map(dout.data(), a.batch, a.seq, n_h, 0, D);
  const auto body = [&]<bool kDropout>(EmulatedThread& th) {
    const auto run = [&](auto kernel) {
      kernel(th, qkv.data(), dout.data(), lse.data(), dvec.data(), dq_accum.data(), dqkv.data(), a.seq, n_h, n_kv,
             static_cast<float>(a.scale), static_cast<float>(a.softcap), a.window, a.causal,
             static_cast<float>(a.dropout), a.dropout_seed, heaviest_first);
    };
    if constexpr (kWgmma) {
      const auto wgmma = [&]<bool kBulkDq, bool kTma, bool kWs = false>() {
        flash::flash_backward_wgmma<D, kDropout, kBulkDq, kTma, kWs>(
            th, qkv.data(), dout.data(), lse.data(), dvec.data(), dq_accum.data(), dqkv.data(), a.seq, n_h, n_kv,
            static_cast<float>(a.scale), static_cast<float>(a.softcap), a.window, a.causal,
            static_cast<float>(a.dropout), a.dropout_seed, heaviest_first, &q_map, &do_map);
      };
      if (a.flash_backward_ws)
        a.flash_backward_bulk_dq ? wgmma.template operator()<true, true, true>()
                                 : wgmma.template operator()<false, true, true>();
      else if (a.flash_backward_tma)
        a.flash_backward_bulk_dq ? wgmma.template operator()<true, true>() : wgmma.template operator()<false, true>();
      else
        a.flash_backward_bulk_dq ? wgmma.template operator()<true, false>() : wgmma.template operator()<false, false>();
    } else
      run(flash::flash_backward<D, kDropout, EmulatedThread>);
  };
  emulator::BulkLog bulk_log;
  const auto wgmma_smem = [&]<bool kTma, bool kWs = false>() {
    return a.flash_backward_bulk_dq ? flash::wgmma_backward_smem_bytes<D, true, kTma, kWs>()
                                    : flash::wgmma_backward_smem_bytes<D, false, kTma, kWs>();
  };
  const bool ws = kWgmma && a.flash_backward_ws;
  const size_t smem = !kWgmma                ? flash::backward_smem_bytes<D>()
                      : ws                   ? wgmma_smem.template operator()<true, true>()
                      : a.flash_backward_tma ? wgmma_smem.template operator()<true>()
                                             : wgmma_smem.template operator()<false>();
  launch(grid_x, grid_y, ws ? flash::wgmma_backward_threads<true>() : flash::kBwdThreads, smem,
         [&](EmulatedThread& th) {
           if (a.dropout > 0)
             body.template operator()<true>(th);
           else
             body.template operator()<false>(th);
         });
  EXPECT_EQ(bulk_log.records.empty(), !(kWgmma && a.flash_backward_bulk_dq));
  for (const emulator::BulkRecord& r : bulk_log.records)
    ASSERT_LE(r.dst + r.floats, dq_accum.data() + rows * D) << "a bulk reduction past dq_accum's end";
  const int64_t pairs = rows * D / 2;
  launch((pairs + 255) / 256, 1, 256, 0, [&](EmulatedThread& th) {
    flash::flash_backward_dq<D>(th, dq_accum.data(), dqkv.data(), a.seq, n_h, n_kv, pairs);
  });
  std::vector<double> ref;
  attention_backward_reference(a, widen(qkv), widen(dout), ref);
  double scale = 0;
  for (const double v : ref) scale = std::max(scale, std::abs(v));
  EXPECT_TRUE(close(ref, widen(dqkv), 2e-2 * scale, 3e-2)) << "dqkv (largest |ref| " << scale << ")";
  if (got != nullptr) *got = dqkv;
}

TEST_P(FlashEmulation, ForwardMatchesFloat64Reference) {
  const AttentionArgs& a = GetParam().args;
  if (a.d_head == 64)
    check_forward<64>(a, GetParam().negative_logits, GetParam().hot);
  else
    check_forward<128>(a, GetParam().negative_logits, GetParam().hot);
}

TEST_P(FlashEmulation, ForwardWgmmaMatchesFloat64Reference) {
  const AttentionArgs& a = GetParam().args;
  if (a.d_head == 64)
    check_forward<64, true, false>(a, GetParam().negative_logits, GetParam().hot);
  else
    check_forward<128, true, false>(a, GetParam().negative_logits, GetParam().hot);
}

// The warp-specialized variant: a producer warpgroup under full/empty mbarriers, the consumers'
// ping-pong by named barriers (the emulator runs the waiters of each release first); at key tiles
// of 128 and of 64.
template <int kN, bool kTma>
void check_ws(const AttentionArgs& a, bool negative_logits = false, HotPair hot = {}) {
  if (a.d_head == 64)
    check_forward<64, true, true, kTma, kN>(a, negative_logits, hot);
  else
    check_forward<128, true, true, kTma, kN>(a, negative_logits, hot);
}

/// The warp-specialized kernel that flash_attention_wgmma_forward launches for case c's args with
/// flash_forward_key_tile = `requested`: the key tile of flash::wgmma_forward_key_tile, the
/// launcher's own choice.
template <bool kTma>
void check_launched(const FlashCase& c, int requested) {
  const int kn = flash::wgmma_forward_key_tile(requested, true);
  ASSERT_TRUE(kn == 64 || kn == 128) << "the launcher builds no key tile of " << requested;
  if (kn == 64)
    check_ws<64, kTma>(c.args, c.negative_logits, c.hot);
  else
    check_ws<128, kTma>(c.args, c.negative_logits, c.hot);
}

// The choice of flash_attention_wgmma_forward's key tile (flash::wgmma_forward_key_tile), which the
// tests below run the kernels through: every tile it gives one the parameterized tests run.
TEST(FlashEmulationKeyTile, LauncherChoosesBuiltTiles) {
  EXPECT_EQ(flash::wgmma_forward_key_tile(0, true), 128);
  EXPECT_EQ(flash::wgmma_forward_key_tile(64, true), 64);
  EXPECT_EQ(flash::wgmma_forward_key_tile(128, true), 128);
  EXPECT_EQ(flash::wgmma_forward_key_tile(0, false), 64);
  EXPECT_EQ(flash::wgmma_forward_key_tile(64, false), 64);
  EXPECT_EQ(flash::wgmma_forward_key_tile(128, false), 0);
  for (const bool ws : {false, true})
    for (const int other : {-64, 16, 32, 96, 256}) EXPECT_EQ(flash::wgmma_forward_key_tile(other, ws), 0) << other;
}

TEST_P(FlashEmulation, ForwardWgmmaWarpSpecializedMatchesFloat64Reference) { check_launched<false>(GetParam(), 128); }

TEST_P(FlashEmulation, ForwardWgmmaWarpSpecializedKeys64MatchesFloat64Reference) {
  check_launched<false>(GetParam(), 64);
}

// The warp-specialized variant with TMA loads: one producer thread issues the boxes under
// expect_tx, the tiles 128-byte swizzled (the emulator's TMA poisons each destination until the
// phase that counts its bytes completes, and zero-fills the rows past the sequence's end).
TEST_P(FlashEmulation, ForwardWgmmaTmaMatchesFloat64Reference) { check_launched<true>(GetParam(), 128); }

TEST_P(FlashEmulation, ForwardWgmmaTmaKeys64MatchesFloat64Reference) { check_launched<true>(GetParam(), 64); }

// The backward in both orders of its main kernel's blocks (flash::backward_grid): by head, and,
// causal, heaviest first across heads (the case's name ends in _heaviest_first).
class FlashEmulationBwd : public ::testing::TestWithParam<FlashCase> {};

TEST_P(FlashEmulationBwd, BackwardMatchesFloat64Reference) {
  const AttentionArgs& a = GetParam().args;
  if (a.d_head == 64)
    check_backward<64>(a, nullptr, GetParam().hot);
  else
    check_backward<128>(a, nullptr, GetParam().hot);
}

// The wgmma backward, with Q and dO by cp.async and then by TMA (one thread issues a tile's boxes
// under its stage's mbarrier; the emulator's TMA poisons each destination until the phase that
// counts its bytes completes, and zero-fills the rows past the sequence's end). Both against the
// float64 reference, and the TMA kernel's dqkv bit-equal to the cp.async one's: the same products
// in the same order, only the operands' layout differs (the emulator runs the blocks and their
// atomic additions in the same order both times). Then the warp-specialized kernel (a producer
// warpgroup's TMA loads and its stats warp's lse and D into a ring of three stages under full /
// empty mbarriers, the consumers' barriers named ones over their 256 threads; with dropout at d
// 128 the keep and mask bits computed once a tile before the element step), against float64 and
// bit-equal to the others too.
void check_wgmma_backward_both_loads(AttentionArgs a, HotPair hot = {}) {
  const auto check =
      [&]<int D>() {
        std::vector<uint16_t> copied, loaded;
        a.flash_backward_tma = false;
        check_backward<D, true>(a, &copied, hot);
        a.flash_backward_tma = true;
        check_backward<D, true>(a, &loaded, hot);
        EXPECT_TRUE(loaded == copied) << "dqkv of the TMA kernel differs from the cp.async one's, bulk dq "
                                      << a.flash_backward_bulk_dq;
        std::vector<uint16_t> specialized;
        a.flash_backward_ws = true;
        check_backward<D, true>(a, &specialized, hot);
        a.flash_backward_ws = false;
        EXPECT_TRUE(specialized == copied)
            << "dqkv of the warp-specialized kernel differs from the cp.async one's, bulk dq "
            << a.flash_backward_bulk_dq;
      };
  if (a.d_head == 64)
    check.template operator()<64>();
  else
    check.template operator()<128>();
}

TEST_P(FlashEmulationBwd, BackwardWgmmaMatchesFloat64Reference) {
  check_wgmma_backward_both_loads(GetParam().args, GetParam().hot);
}

// The wgmma backward with dQ summed by bulk reductions of staged rows (cp.reduce.async.bulk), the
// emulator checking the staging's fence, its reuse after wait_group.read and the final wait.
TEST_P(FlashEmulationBwd, BackwardWgmmaBulkDqMatchesFloat64Reference) {
  AttentionArgs a = GetParam().args;
  a.flash_backward_bulk_dq = true;
  check_wgmma_backward_both_loads(a, GetParam().hot);
}

// Sequences long enough that the K/V ring of three stages turns several times in one block (9 and
// 6 key tiles): the warp-specialized variant's empty barriers, which none of the cases above waits
// on more than once, and its phase parities past the first turn; the variant in step beside it.
TEST(FlashEmulationLong, ForwardWgmmaBothVariantsMatchFloat64Reference) {
  AttentionArgs a{1, 520, 2, 1, 64, 0.125};
  check_forward<64, true, true>(a);
  check_forward<64, true, true, true>(a);
  check_forward<64, true, false>(a);
  check_ws<flash::kWsBlockN, false>(a);
  check_ws<flash::kWsBlockN, true>(a);
  a = {1, 330, 1, 1, 128, 1.0 / std::sqrt(128.0)};
  a.causal = false;
  a.dropout = 0.1;
  a.dropout_seed = 9;
  check_forward<128, true, true>(a);
  check_forward<128, true, true, true>(a);
  check_forward<128, true, false>(a);
  // Key tiles of 128: 7 tiles in the last query block (the ring of three stages turns twice).
  a = {1, 840, 1, 1, 128, 1.0 / std::sqrt(128.0)};
  check_ws<flash::kWsBlockN, false>(a);
  check_ws<flash::kWsBlockN, true>(a);
}

std::vector<FlashCase> cases() {
  std::vector<FlashCase> c;
  c.push_back({"mha_t70_dh64", {1, 70, 2, 2, 64, 0.125}});
  AttentionArgs a{1, 130, 4, 2, 64, 0.125};
  a.window = 40;
  c.push_back({"gqa_4of2_t130_window40", a});
  a = {1, 20, 2, 1, 64, 0.5};
  a.causal = false;
  a.softcap = 5;
  c.push_back({"mqa_noncausal_t20_softcap5", a});
  // A negative scale: the forward then scales before the row max (max(c s) = c min(s) for c < 0).
  a = {1, 20, 2, 1, 64, -0.5};
  c.push_back({"mqa_t20_negative_scale", a});
  a = {1, 65, 2, 1, 128, 1.0 / std::sqrt(128.0)};
  a.softcap = 30;
  c.push_back({"mqa_t65_dh128_softcap30", a});
  // Interior tiles (no mask) and edge tiles in one block row, several stages of the K/V double
  // buffer, a window whose edge falls inside tiles.
  a = {2, 150, 1, 1, 64, 0.125};
  a.causal = false;
  c.push_back({"mha_noncausal_t150_b2", a});
  // With dropout: the only causal case with a window whose dropout runs at d 128, where the
  // warp-specialized backward computes the mask's bits apart from the element step (element_bits):
  // bits computed without the window, or without the query's parity, fail here.
  a = {1, 200, 1, 1, 128, 1.0 / std::sqrt(128.0)};
  a.window = 100;
  a.dropout = 0.1;
  a.dropout_seed = 13;
  c.push_back({"mha_t200_dh128_window100_dropout", a});
  a = {1, 90, 4, 2, 64, 0.125};
  a.dropout = 0.2;
  a.dropout_seed = 77;
  c.push_back({"gqa_t90_dropout", a});
  // A window of 2: each query sees its own key and the one before, so the pairs at the edges of
  // the backward's 16-key slabs (key 63 against the tile of queries 64.., key 64 = T - 1 against
  // query 64) carry half of their keys' gradients, beyond the tolerance if a slab were skipped.
  a = {1, 65, 2, 2, 64, 0.125};
  a.window = 2;
  c.push_back({"mha_t65_window2", a});
  // Dropout with a soft-cap and a window at d_head 64: the wgmma backward computes dropout's keep
  // with P^T while dP^T's products run there (at d 128 after them, as mqa_t130_dh128_softcap2_dropout).
  a = {1, 100, 2, 2, 64, 0.125};
  a.window = 30;
  a.softcap = 15;
  a.dropout = 0.1;
  a.dropout_seed = 5;
  c.push_back({"mha_t100_dh64_softcap15_window30_dropout", a});
  // Non-causal with a soft-cap over whole 64-query tiles: the backward's interior slabs (no mask)
  // with the soft-cap, which the causal and shorter soft-capped cases never reach.
  a = {1, 64, 1, 1, 64, 0.125};
  a.causal = false;
  a.softcap = 10;
  c.push_back({"mha_noncausal_t64_softcap10", a});
  // The forward's 128-query blocks (two m16 tiles a warp, causal blocks in reverse order): a
  // sequence shorter than one block (warp 1 partly, warps 2 and 3 wholly past its end), a last
  // block of 2 rows under a window of 66 (warps that skip a tile the window or the sequence's end
  // hides from all their rows, and a window edge one key inside a tile: row 128 sees key 63), and
  // dropout with the soft-cap at d_head 128 across a partial block.
  a = {1, 40, 2, 2, 128, 1.0 / std::sqrt(128.0)};
  c.push_back({"mha_t40_dh128", a});
  a = {1, 130, 2, 1, 128, 1.0 / std::sqrt(128.0)};
  a.window = 66;
  c.push_back({"mqa_t130_dh128_window66", a});
  // A cap of 2 against logits of about 1: tanh's derivative 1 - c^2 well below 1, so a backward
  // that drops it fails here (at caps of 12 and more it is within the tolerance of 1).
  a = {1, 130, 2, 1, 128, 1.0 / std::sqrt(128.0)};
  a.softcap = 2;
  a.dropout = 0.1;
  a.dropout_seed = 5;
  c.push_back({"mqa_t130_dh128_softcap2_dropout", a});
  // Key tiles of 128 (the warp-specialized forward's): one partial tile of 100 keys (the last 36
  // past the sequence, the causal diagonal inside its first 64 for warpgroup 0 and past 64 for
  // warpgroup 1); a second tile of one key (T 129); GQA with a last tile of 72 keys (partial past
  // its first half) and dropout; a window whose edges fall in a tile's second half (row 200 sees
  // keys from 111, row 256 from 167) and in its first, soft-capped.
  a = {1, 100, 2, 2, 128, 1.0 / std::sqrt(128.0)};
  c.push_back({"mha_t100_dh128", a});
  a = {1, 129, 2, 1, 64, 0.125};
  c.push_back({"mqa_t129_dh64", a});
  a = {1, 200, 4, 2, 128, 1.0 / std::sqrt(128.0)};
  a.causal = false;
  a.dropout = 0.15;
  a.dropout_seed = 21;
  c.push_back({"gqa_4of2_noncausal_t200_dh128_dropout", a});
  a = {1, 260, 2, 1, 64, 0.125};
  a.window = 90;
  a.softcap = 12;
  c.push_back({"mqa_t260_window90_softcap12", a});
  // Windows whose limits fall on the tiles' edges (scripts/mutants.py's mutants of them
  // passed every case above; docs/flash-forward.md, "The mask's limits on the tiles' edges"). A
  // window of 127 over T 128: the last row of a warpgroup's 64 queries (of a warp's 32) sees its
  // first tile's keys from the second on, the backward's 16-key slabs' alike, and T - 1 hides key
  // 0 from the last query alone: a tile or slab taken for interior one key early, or a window of
  // T - 1 taken for none, fails here, with that pair (query 127, key 0) made hot (make_pair_hot).
  // A window of 2 over T 160: query 128, the first of its tile, is the last to see key 127, so the
  // backward's walk of queries one short loses half of that key's gradients.
  a = {1, 128, 2, 1, 128, 1.0 / std::sqrt(128.0)};
  a.window = 127;
  a.dropout = 0.1;
  a.dropout_seed = 17;
  c.push_back({"mqa_t128_dh128_window127_dropout", a, false, {127, 0}});
  a = {1, 160, 4, 2, 64, 0.125};
  a.window = 2;
  c.push_back({"gqa_4of2_t160_window2", a});
  // The sequence's end bound (key kl of the last tile visible iff kl < T - n0), one key late fails
  // only these: not causal (a causal row never sees the key past T, whatever the bound) and every
  // logit strongly negative (make_logits_negative), so that the key past T, a zero row, would be
  // the row's largest logit (0). T past a multiple of both key tiles: a last tile of 6 keys at 64
  // and of 70 at 128 (T 70), of 8 at 64 and 72 at 128 (T 200, with dropout: the other kernels).
  a = {1, 70, 2, 1, 64, 0.125};
  a.causal = false;
  c.push_back({"mqa_noncausal_t70_negative_logits", a, true});
  a = {1, 200, 1, 1, 128, 1.0 / std::sqrt(128.0)};
  a.causal = false;
  a.dropout = 0.1;
  a.dropout_seed = 3;
  c.push_back({"mha_noncausal_t200_dh128_dropout_negative_logits", a, true});
  return c;
}

/// cases() by head, and the causal ones again heaviest first (not causal, the order is by head
/// whatever is asked: backward_grid); not the negative_logits cases, whose inputs only the forward
/// takes (the backward's own end bounds one key or query late change no output: the rows past T
/// are zeros there, and every product a masked-in pair adds to is with one, docs/flash-forward.md,
/// "The sequence's end bound, tested").
std::vector<FlashCase> backward_cases() {
  std::vector<FlashCase> c;
  for (const FlashCase& f : cases())
    if (!f.negative_logits) c.push_back(f);
  for (const FlashCase& f : cases())
    if (f.args.causal) {
      FlashCase h = f;
      h.name += "_heaviest_first";
      h.args.flash_backward_heaviest_first = true;
      c.push_back(h);
    }
  return c;
}

INSTANTIATE_TEST_SUITE_P(All, FlashEmulation, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<FlashCase>& i) { return i.param.name; });
INSTANTIATE_TEST_SUITE_P(All, FlashEmulationBwd, ::testing::ValuesIn(backward_cases()),
                         [](const ::testing::TestParamInfo<FlashCase>& i) { return i.param.name; });

}  // namespace
}  // namespace flash_emulation_test
}  // namespace bench::kernels
