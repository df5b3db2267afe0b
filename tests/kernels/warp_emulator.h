// defines: bench::kernels::emulator::Block, EmulatedThread, launch — a CPU warp emulator for the
//          CUDA kernels written as functions of a `Thread` (kernels/cuda/flash_attention_kernels.cuh,
//          kernels/cuda/flash_attention_f32_kernels.cuh, kernels/cuda/flash_attention_wgmma_kernels.cuh),
//          shared by their emulation tests
//
// Every CUDA thread of a block is a fiber of one OS thread (support/fibers.h), __syncthreads is a
// barrier of the block, and the warp-wide operations (shuffles, mma.sync.m16n8k16, ldmatrix)
// exchange the lanes' registers through memory and decode them with the fragment layouts of the
// PTX ISA. Between two __syncthreads one warp at a time does all its work, the warps in a new
// order each time (a fixed pseudo-random one), so a missing barrier lets a warp read shared
// memory before or after another's write and fails.
//
// Hopper's warpgroup MMA (wgmma.mma_async, 4 warps = 128 threads) is emulated in
// wgmma_emulator.h, which this header includes: EmulatedThread's wgmma_* members.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda/wgmma_layout.cuh"
#include "support/fibers.h"
#include "tile/defs.h"
#include "wgmma_emulator.h"

namespace bench::kernels::emulator {

using test::FiberTeam;

/// One thread block being emulated: its fibers, its shared memory, its barrier, and per warp the
/// slots the lanes exchange registers through, two of each: a warp-wide operation writes the slots
/// of its parity, waits for the warp, and reads them; the next operation uses the other parity, so
/// no second wait is needed before the slots are written again (a lane can write this parity's
/// slots again only two operations later, past a wait that every lane reaches after its reads).
class Block {
 public:
  Block(int threads, size_t shared_bytes)
      : team_(threads, 32), shared_(shared_bytes, 0), unfenced_(shared_bytes, 0), barrier_(team_, threads, true) {
    for (int w = 0; w < (threads + 31) / 32; ++w) warps_.emplace_back(team_);
    for (int g = 0; g < threads / 128; ++g) groups_.emplace_back(team_);
  }

  struct Warp {
    explicit Warp(FiberTeam& team) : barrier(team, 32) {}
    FiberTeam::Barrier barrier;
    float value[2][32] = {};
    uint32_t a[2][32][4] = {};
    uint32_t b[2][32][2] = {};
    const uint16_t* row[2][32] = {};
  };

  /// A warpgroup's slots for wgmma: the A fragments (when A is in registers) and descriptors.
  struct Group {
    explicit Group(FiberTeam& team) : barrier(team, 128) {}
    FiberTeam::Barrier barrier;
    uint32_t a[2][128][4] = {};
    uint64_t desc_a[2][128] = {}, desc_b[2][128] = {};
  };

  FiberTeam& team() { return team_; }
  uint8_t* shared() { return shared_.data(); }
  FiberTeam::Barrier& barrier() { return barrier_; }
  Warp& warp(int tid) { return warps_[static_cast<size_t>(tid / 32)]; }
  Group& group(int tid) { return groups_.at(static_cast<size_t>(tid / 128)); }
  size_t shared_bytes() const { return shared_.size(); }
  /// Per byte of shared memory: written by a cp.async (the generic proxy) that no
  /// fence.proxy.async of its thread has yet made visible to the async proxy (wgmma's reads).
  uint8_t* unfenced() { return unfenced_.data(); }
  /// The first wgmma violation of this launch (wgmma_emulator.h), "" while none.
  std::string& violation() { return violation_; }

 private:
  FiberTeam team_;
  std::vector<uint8_t> shared_;  // operator new aligns it to 16 bytes, as the 16-byte copies need
  std::vector<uint8_t> unfenced_;
  std::string violation_;
  FiberTeam::Barrier barrier_;
  std::vector<Warp> warps_;
  std::vector<Group> groups_;
};

inline float bf16_at(uint32_t reg, int half) {
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
    const int lane = tid_ % 32, p = parity();
    w.value[p][lane] = v;
    w.barrier.arrive_and_wait();
    return w.value[p][lane ^ mask];
  }
  /// d += A B for this lane's part of D (16 x 8), A (16 x 16) and B (16 x 8) held by the warp's
  /// lanes: A(row, k) is in lane (row % 8) * 4 + (k % 8) / 2, register row / 8 + 2 (k / 8), half
  /// k % 2; B(k, n) in lane n * 4 + (k % 8) / 2, register k / 8, half k % 2; this lane's d[r] is
  /// D(lane / 4 + 8 (r / 2), 2 (lane % 4) + r % 2).
  void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) const {
    Block::Warp& w = block_.warp(tid_);
    const int lane = tid_ % 32, p = parity();
    std::memcpy(w.a[p][lane], a, sizeof a);
    w.b[p][lane][0] = b0;
    w.b[p][lane][1] = b1;
    w.barrier.arrive_and_wait();
    for (int r = 0; r < 4; ++r) {
      const int row = lane / 4 + 8 * (r / 2), col = 2 * (lane % 4) + r % 2;
      float sum = 0.f;
      for (int k = 0; k < 16; ++k)
        sum += bf16_at(w.a[p][(row % 8) * 4 + (k % 8) / 2][row / 8 + 2 * (k / 8)], k % 2) *
               bf16_at(w.b[p][col * 4 + (k % 8) / 2][k / 8], k % 2);
      d[r] += sum;
    }
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
  /// p[0] += a and p[1] += b (red.global.add.v2.f32 on the GPU: two float atomics of one
  /// instruction, each atomic on its own).
  void atomic_add2(float* p, float a, float b) const {
    atomic_add(p, a);
    atomic_add(p + 1, b);
  }

  // --- Hopper: wgmma.mma_async of a warpgroup (wgmma_emulator.h describes what is checked) ---

  /// Shared-window address of p (cvta.to.shared): its offset in the block's shared memory.
  uint32_t smem_addr(const void* p) const {
    return static_cast<uint32_t>(static_cast<const uint8_t*>(p) - block_.shared());
  }
  /// fence.proxy.async.shared::cta: this thread's landed cp.async writes become visible to wgmma.
  void fence_proxy_async() {
    for (const auto& [at, bytes] : landed_) std::memset(block_.unfenced() + at, 0, bytes);
    landed_.clear();
  }
  /// st.shared.b16 at a shared-window address (smem_addr's): like a cp.async write, wgmma sees
  /// it only after this thread's fence.proxy.async (the generic proxy's write, the async proxy's
  /// read).
  void store_shared_b16(uint32_t address, uint16_t v) {
    const size_t at = address;
    if (at + sizeof v > block_.shared_bytes() || at % 2 != 0) {
      wgmma_error(block_.violation(), "st.shared: an address outside shared memory");
      return;
    }
    std::memcpy(block_.shared() + at, &v, sizeof v);
    std::memset(block_.unfenced() + at, 1, sizeof v);
    landed_.emplace_back(at, sizeof v);
  }
  /// The GPU's compiler barrier on registers a wgmma uses (flash_attention_wgmma.cu): nothing to do here.
  template <class R>
  void wgmma_hold(R& /*registers*/) const {}
  /// wgmma.fence.sync.aligned: the registers written since are ordered before the next wgmma.
  void wgmma_fence() { wgmma_.fenced = true; }
  /// wgmma.mma_async m64nNk16 f32 bf16 with A and B in shared memory (A K-major; B K-major, or
  /// N-major when kTransB): d = A B + (accumulate ? d : 0) for this thread's fragment of D.
  template <int N, int kTransB>
  void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
    wgmma_issue(d, N, nullptr, desc_a, desc_b, kTransB != 0, accumulate);
  }
  /// The same with A in registers (this thread's fragment: the m16n8k16 A layout of its warp's
  /// 16 rows).
  template <int N, int kTransB>
  void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, bool accumulate) {
    wgmma_issue(d, N, a, 0, desc_b, kTransB != 0, accumulate);
  }
  /// wgmma.commit_group: the wgmma issued since the last commit form a group.
  void wgmma_commit() { wgmma_commit_group(wgmma_); }
  /// wgmma.wait_group kPending: all but the kPending newest groups complete; only now do their
  /// results reach the accumulators.
  template <int kPending>
  void wgmma_wait() {
    wgmma_retire(wgmma_, kPending, block_.shared(), block_.shared_bytes(), block_.violation());
  }
  /// At the end of the kernel: nothing may be left in flight.
  void wgmma_finish() {
    if (!wgmma_.ops.empty())
      wgmma_error(block_.violation(), "wgmma: the kernel ended with wgmma in flight (no wait_group)");
    wgmma_.ops.clear();
  }

 private:
  struct Copy {
    void* dst;
    const void* src;
    bool valid;
  };

  void land(std::vector<Copy>& group) {
    for (const Copy& c : group) {
      if (c.valid)
        std::memcpy(c.dst, c.src, 16);
      else
        std::memset(c.dst, 0, 16);
      const auto at = static_cast<size_t>(static_cast<uint8_t*>(c.dst) - block_.shared());
      if (at < block_.shared_bytes()) {
        std::memset(block_.unfenced() + at, 1, 16);
        landed_.emplace_back(at, 16);
      }
    }
    group.clear();
  }

  void ldmatrix(uint32_t (&r)[4], const uint16_t* row, bool trans) const {
    Block::Warp& w = block_.warp(tid_);
    const int lane = tid_ % 32, p = parity();
    w.row[p][lane] = row;
    w.barrier.arrive_and_wait();
    const uint16_t* const* rows = w.row[p];
    for (int m = 0; m < 4; ++m) {
      uint16_t lo = 0, hi = 0;
      if (trans) {
        lo = rows[8 * m + 2 * (lane % 4)][lane / 4];
        hi = rows[8 * m + 2 * (lane % 4) + 1][lane / 4];
      } else {
        lo = rows[8 * m + lane / 4][2 * (lane % 4)];
        hi = rows[8 * m + lane / 4][2 * (lane % 4) + 1];
      }
      r[m] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    }
  }

  /// This warp operation's slot parity: every lane runs the same warp operations in the same
  /// order (they are warp-synchronous), so the lanes' counts agree.
  int parity() const { return static_cast<int>(warp_ops_++ & 1); }

  void wgmma_issue(float* d, int n, const uint32_t* a, uint64_t desc_a, uint64_t desc_b, bool trans_b,
                   bool accumulate) {
    if (!wgmma_.fenced)
      wgmma_error(block_.violation(), "wgmma: issued without a wgmma.fence since the last wait_group");
    Block::Group& grp = block_.group(tid_);
    const int me = tid_ % 128, p = static_cast<int>(group_ops_++ & 1);
    if (a != nullptr) std::memcpy(grp.a[p][me], a, 4 * sizeof(uint32_t));
    grp.desc_a[p][me] = desc_a;
    grp.desc_b[p][me] = desc_b;
    grp.barrier.arrive_and_wait();
    for (int i = 0; i < 128; ++i)
      if (grp.desc_a[p][i] != desc_a || grp.desc_b[p][i] != desc_b)
        wgmma_error(block_.violation(), "wgmma: descriptors differ between the threads of a warpgroup");
    WgmmaOp op;
    op.d = d;
    op.n = n;
    op.me = me;
    op.desc_a = desc_a;
    op.desc_b = desc_b;
    op.a_in_regs = a != nullptr;
    op.trans_b = trans_b;
    op.accumulate = accumulate;
    if (a != nullptr) {
      op.a_regs = a;
      std::memcpy(op.a_issued, a, sizeof op.a_issued);
    }
    wgmma_gather(op, me, a != nullptr ? grp.a[p] : nullptr, block_.shared(), block_.shared_bytes(), block_.unfenced(),
                 block_.violation());
    wgmma_push(wgmma_, std::move(op), block_.violation());
  }

  Block& block_;
  int tid_, bx_, by_, dim_;
  std::vector<Copy> open_;
  std::vector<std::vector<Copy>> groups_;
  int commits_ = 0;
  mutable uint64_t warp_ops_ = 0;
  uint64_t group_ops_ = 0;
  // Shared-memory offsets and lengths this thread's copies and stores wrote, not yet fenced.
  std::vector<std::pair<size_t, size_t>> landed_;
  WgmmaState wgmma_;
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
        th.wgmma_finish();
        block.barrier().arrive_and_wait();
      }
  });
  if (!block.violation().empty()) throw std::logic_error(block.violation());
}

}  // namespace bench::kernels::emulator
