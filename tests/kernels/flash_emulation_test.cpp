// The flash attention kernels of kernels/cuda/flash_attention_kernels.cuh — the very source the
// CUDA build compiles — run on the CPU by a warp emulator: every CUDA thread of a block is a fiber
// of one OS thread (support/fibers.h), __syncthreads is a barrier of the block, and the warp-wide
// operations (shuffles and mma.sync.m16n8k16) exchange the lanes' registers through memory and
// decode them with the fragment layouts of the PTX ISA. Between two __syncthreads one warp at a
// time does all its work, the warps in a new order each time (a fixed pseudo-random one), so a
// missing barrier lets a warp read shared memory before or after another's write and fails.
// Forward and backward are checked against the float64 references of kernels/attention.h, so a
// wrong fragment index, mask or tile bound fails here, in CI, without a GPU. (Speed and the
// hardware's own mma are for tests/cuda/cuda_check.cu.)
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention.h"
#include "cuda/flash_attention_kernels.cuh"
#include "support/fibers.h"

namespace bench::kernels {
namespace {

using flash::kBlockM;
using flash::kBlockN;
using flash::kThreads;

using test::FiberTeam;

/// One thread block being emulated: its fibers, its shared memory, its barrier, and per warp the
/// slots the lanes exchange registers through.
class Block {
 public:
  Block(int threads, size_t shared_bytes)
      : team_(threads, 32), shared_(shared_bytes, 0), barrier_(team_, threads, true) {
    for (int w = 0; w < (threads + 31) / 32; ++w) warps_.emplace_back(team_);
  }

  struct Warp {
    explicit Warp(FiberTeam& team) : barrier(team, 32) {}
    FiberTeam::Barrier barrier;
    float value[32] = {};
    uint32_t a[32][4] = {};
    uint32_t b[32][2] = {};
    const uint16_t* row[32] = {};
  };

  FiberTeam& team() { return team_; }
  uint8_t* shared() { return shared_.data(); }
  FiberTeam::Barrier& barrier() { return barrier_; }
  Warp& warp(int tid) { return warps_[static_cast<size_t>(tid / 32)]; }

 private:
  FiberTeam team_;
  std::vector<uint8_t> shared_;  // operator new aligns it to 16 bytes, as the 16-byte copies need
  FiberTeam::Barrier barrier_;
  std::vector<Warp> warps_;
};

float bf16_at(uint32_t reg, int half) {
  return tile::bf16_to_float(tile::bf16{static_cast<uint16_t>(reg >> (16 * half))});
}

/// A CUDA thread on the CPU: the Thread of flash_attention_kernels.cuh.
class EmulatedThread {
 public:
  EmulatedThread(Block& block, int tid, int bx, int by, int block_dim)
      : block_(block), tid_(tid), bx_(bx), by_(by), dim_(block_dim) {}
  int tid() const { return tid_; }
  int block_x() const { return bx_; }
  int block_y() const { return by_; }
  int block_dim() const { return dim_; }
  void sync() const { block_.barrier().arrive_and_wait(); }
  float shfl_xor(float v, int mask) const {
    Block::Warp& w = block_.warp(tid_);
    const int lane = tid_ % 32;
    w.value[lane] = v;
    w.barrier.arrive_and_wait();
    const float r = w.value[lane ^ mask];
    w.barrier.arrive_and_wait();
    return r;
  }
  /// d += A B for this lane's part of D (16 x 8), A (16 x 16) and B (16 x 8) held by the warp's
  /// lanes: A(row, k) is in lane (row % 8) * 4 + (k % 8) / 2, register row / 8 + 2 (k / 8), half
  /// k % 2; B(k, n) in lane n * 4 + (k % 8) / 2, register k / 8, half k % 2; this lane's d[r] is
  /// D(lane / 4 + 8 (r / 2), 2 (lane % 4) + r % 2).
  void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) const {
    Block::Warp& w = block_.warp(tid_);
    const int lane = tid_ % 32;
    std::memcpy(w.a[lane], a, sizeof a);
    w.b[lane][0] = b0;
    w.b[lane][1] = b1;
    w.barrier.arrive_and_wait();
    for (int r = 0; r < 4; ++r) {
      const int row = lane / 4 + 8 * (r / 2), col = 2 * (lane % 4) + r % 2;
      float sum = 0.f;
      for (int k = 0; k < 16; ++k)
        sum += bf16_at(w.a[(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)], k % 2) *
               bf16_at(w.b[col * 4 + (k % 8) / 2][k / 8], k % 2);
      d[r] += sum;
    }
    w.barrier.arrive_and_wait();
  }
  /// ldmatrix.x4: row r of matrix m is at the address lane 8 m + r gave; this lane receives,
  /// of each matrix, row lane / 4, columns 2 (lane % 4) and the next (.trans: the transpose's).
  void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row) const { ldmatrix(r, row, false); }
  void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* row) const { ldmatrix(r, row, true); }
  /// cp.async as early and as late as the hardware may land it, by turns (a thread's groups
  /// alternate, and neighbouring threads start apart): a group lands when it is committed, or only
  /// when cp_async_wait lets no more than `pending` newer groups stay in flight. So a read of a
  /// tile before its wait sees stale data, and a copy into a stage that another warp still reads
  /// (its __syncthreads missing) overwrites it under that warp: either fails the test.
  void cp_async_16(void* dst, const void* src, bool valid) { open_.push_back({dst, src, valid}); }
  void cp_async_commit() {
    groups_.push_back(std::move(open_));
    open_.clear();
    // Landed now, it stays in the queue empty: it still counts as in flight until its wait.
    if ((commits_++ + tid_) % 2 == 0) land(groups_.back());
  }
  void cp_async_wait(int pending) {
    while (static_cast<int>(groups_.size()) > pending) {
      land(groups_.front());
      groups_.erase(groups_.begin());
    }
  }
  float exp(float x) const { return std::exp(x); }
  float exp2(float x) const { return std::exp2(x); }
  void atomic_add(float* p, float v) const { std::atomic_ref<float>(*p).fetch_add(v); }
  uint8_t* shared() const { return block_.shared(); }

 private:
  struct Copy {
    void* dst;
    const void* src;
    bool valid;
  };

  static void land(std::vector<Copy>& group) {
    for (const Copy& c : group) {
      if (c.valid)
        std::memcpy(c.dst, c.src, 16);
      else
        std::memset(c.dst, 0, 16);
    }
    group.clear();
  }

  void ldmatrix(uint32_t (&r)[4], const uint16_t* row, bool trans) const {
    Block::Warp& w = block_.warp(tid_);
    const int lane = tid_ % 32;
    w.row[lane] = row;
    w.barrier.arrive_and_wait();
    for (int m = 0; m < 4; ++m) {
      uint16_t lo = 0, hi = 0;
      if (trans) {
        lo = w.row[8 * m + 2 * (lane % 4)][lane / 4];
        hi = w.row[8 * m + 2 * (lane % 4) + 1][lane / 4];
      } else {
        lo = w.row[8 * m + lane / 4][2 * (lane % 4)];
        hi = w.row[8 * m + lane / 4][2 * (lane % 4) + 1];
      }
      r[m] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    }
    w.barrier.arrive_and_wait();
  }

  Block& block_;
  int tid_, bx_, by_, dim_;
  std::vector<Copy> open_;
  std::vector<std::vector<Copy>> groups_;
  int commits_ = 0;
};

/// Runs `kernel(thread)` for every thread of a grid_x x grid_y grid of `threads`-thread blocks,
/// one block at a time, on `threads` fibers that take the blocks in turn (a block ends with a
/// barrier, so that no thread starts the next while another still works in this one).
template <class Kernel>
void launch(int64_t grid_x, int64_t grid_y, int threads, size_t shared_bytes, const Kernel& kernel) {
  Block block(threads, shared_bytes);
  block.team().run([&](int t) {
    for (int64_t by = 0; by < grid_y; ++by)
      for (int64_t bx = 0; bx < grid_x; ++bx) {
        EmulatedThread th(block, t, static_cast<int>(bx), static_cast<int>(by), threads);
        kernel(th);
        block.barrier().arrive_and_wait();
      }
  });
}

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

struct FlashCase {
  std::string name;
  AttentionArgs args;
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
  launch((a.seq + kBlockM - 1) / kBlockM, a.batch * a.n_heads, kThreads, flash::forward_smem_bytes<D>(),
         [&](EmulatedThread& th) {
           if (a.dropout > 0)
             body.template operator()<true>(th);
           else
             body.template operator()<false>(th);
         });
}

template <int D>
void check_forward(const AttentionArgs& a) {
  const auto qkv = random_bf16(static_cast<size_t>(a.batch * a.seq * (a.n_heads + 2 * a.n_kv_heads) * D), 31);
  std::vector<uint16_t> out;
  std::vector<float> row_max, lse;
  forward<D>(a, qkv, out, row_max, lse);
  std::vector<double> out_ref, max_ref;
  attention_forward_reference(a, widen(qkv), out_ref, &max_ref);
  EXPECT_TRUE(close(out_ref, widen(out), 2e-2, 2e-2)) << "output";
  EXPECT_TRUE(close(max_ref, std::vector<double>(row_max.begin(), row_max.end()), 1e-4, 1e-4)) << "max logit";
  // lse >= max, and exp(max - lse) is the largest probability: at most 1.
  for (size_t i = 0; i < lse.size(); ++i) ASSERT_TRUE(lse[i] >= row_max[i] - 1e-5f) << i;
}

template <int D>
void check_backward(const AttentionArgs& a) {
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * D;
  const auto qkv = random_bf16(static_cast<size_t>(a.batch * a.seq * width), 33);
  const auto dout = random_bf16(static_cast<size_t>(a.batch * a.seq * a.n_heads * D), 34);
  std::vector<uint16_t> out;
  std::vector<float> row_max, lse;
  forward<D>(a, qkv, out, row_max, lse);
  const int n_h = static_cast<int>(a.n_heads), n_kv = static_cast<int>(a.n_kv_heads);
  const int64_t rows = a.batch * a.n_heads * a.seq;
  std::vector<float> dvec(static_cast<size_t>(rows), NAN), dq_accum(static_cast<size_t>(rows * D), NAN);
  std::vector<uint16_t> dqkv(qkv.size(), 0xffff);
  launch((rows + flash::kWarps - 1) / flash::kWarps, 1, kThreads, 0, [&](EmulatedThread& th) {
    flash::flash_backward_prep<D>(th, out.data(), dout.data(), dvec.data(), dq_accum.data(), a.seq, n_h, rows);
  });
  const auto body = [&]<bool kDropout>(EmulatedThread& th) {
    flash::flash_backward<D, kDropout>(th, qkv.data(), dout.data(), lse.data(), dvec.data(), dq_accum.data(),
                                       dqkv.data(), a.seq, n_h, n_kv, static_cast<float>(a.scale),
                                       static_cast<float>(a.softcap), a.window, a.causal, static_cast<float>(a.dropout),
                                       a.dropout_seed);
  };
  launch((a.seq + kBlockN - 1) / kBlockN, a.batch * a.n_kv_heads, kThreads, flash::backward_smem_bytes<D>(),
         [&](EmulatedThread& th) {
           if (a.dropout > 0)
             body.template operator()<true>(th);
           else
             body.template operator()<false>(th);
         });
  const int64_t pairs = rows * D / 2;
  launch((pairs + 255) / 256, 1, 256, 0, [&](EmulatedThread& th) {
    flash::flash_backward_dq<D>(th, dq_accum.data(), dqkv.data(), a.seq, n_h, n_kv, pairs);
  });
  std::vector<double> ref;
  attention_backward_reference(a, widen(qkv), widen(dout), ref);
  double scale = 0;
  for (const double v : ref) scale = std::max(scale, std::abs(v));
  EXPECT_TRUE(close(ref, widen(dqkv), 2e-2 * scale, 3e-2)) << "dqkv (largest |ref| " << scale << ")";
}

TEST_P(FlashEmulation, ForwardMatchesFloat64Reference) {
  const AttentionArgs& a = GetParam().args;
  if (a.d_head == 64)
    check_forward<64>(a);
  else
    check_forward<128>(a);
}

TEST_P(FlashEmulation, BackwardMatchesFloat64Reference) {
  const AttentionArgs& a = GetParam().args;
  if (a.d_head == 64)
    check_backward<64>(a);
  else
    check_backward<128>(a);
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
  a = {1, 65, 2, 1, 128, 1.0 / std::sqrt(128.0)};
  a.softcap = 30;
  c.push_back({"mqa_t65_dh128_softcap30", a});
  // Interior tiles (no mask) and edge tiles in one block row, several stages of the K/V double
  // buffer, a window whose edge falls inside tiles.
  a = {2, 150, 1, 1, 64, 0.125};
  a.causal = false;
  c.push_back({"mha_noncausal_t150_b2", a});
  a = {1, 200, 1, 1, 128, 1.0 / std::sqrt(128.0)};
  a.window = 100;
  c.push_back({"mha_t200_dh128_window100", a});
  a = {1, 90, 4, 2, 64, 0.125};
  a.dropout = 0.2;
  a.dropout_seed = 77;
  c.push_back({"gqa_t90_dropout", a});
  return c;
}

INSTANTIATE_TEST_SUITE_P(All, FlashEmulation, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<FlashCase>& i) { return i.param.name; });

}  // namespace
}  // namespace bench::kernels
