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
// wgmma_emulator.h, which this header includes: EmulatedThread's wgmma_* members. So are the
// warp-specialization primitives of sm_90 (PTX ISA 9.7.13.15, 9.7.13.4, 9.7.19.x): mbarriers and
// the TMA loads that complete on them (mbarrier_emulator.h: the phases, transaction counts, the
// destination unreadable until its phase), named barriers (bar.sync and bar.arrive with an id and
// a thread count) and setmaxnreg (a no-op whose constraints are checked). A release of a named
// barrier or an mbarrier phase runs the fibers that waited on it first, so a consumer that lets a
// producer go too early meets the producer's writes at once.
//
// The bulk asynchronous reductions to global memory (cp.reduce.async.bulk and its bulk groups)
// are emulated in bulk_emulator.h: EmulatedThread's bulk_* members.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bulk_emulator.h"
#include "cuda/tma_map.h"
#include "cuda/wgmma_layout.cuh"
#include "mbarrier_emulator.h"
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
      : team_(threads, 32),
        threads_(threads),
        shared_(shared_bytes, 0),
        unfenced_(shared_bytes, 0),
        barrier_(team_, threads, true),
        mbarriers_(team_) {
    for (int w = 0; w < (threads + 31) / 32; ++w) warps_.emplace_back(team_);
    for (int g = 0; g < threads / 128; ++g) groups_.emplace_back(team_, launch_registers());
  }

  struct Warp {
    explicit Warp(FiberTeam& team) : barrier(team, 32) {}
    FiberTeam::Barrier barrier;
    float value[2][32] = {};
    uint32_t a[2][32][4] = {};
    uint32_t b[2][32][2] = {};
    const uint16_t* row[2][32] = {};
  };

  /// A warpgroup's slots for wgmma: the A fragments (when A is in registers), descriptors and
  /// shapes; and the operands of its wgmma, read once for the warpgroup by the first of its
  /// threads to go on from the issue's barrier (`issued`: the warpgroup operation whose operands
  /// `operands` holds, per parity).
  struct Group {
    Group(FiberTeam& team, int launch_regs) : barrier(team, 128), registers(launch_regs) {}
    FiberTeam::Barrier barrier;
    uint32_t a[2][128][4] = {};
    uint64_t desc_a[2][128] = {}, desc_b[2][128] = {};
    uint32_t shape[2][128] = {};  // N, and which operands are transposed or in registers
    int regs[2][128] = {};        // setmaxnreg's operand, per thread
    int registers;                // the warpgroup's registers a thread, as setmaxnreg set them
    WgmmaPool pool;
    WgmmaOperands* operands[2] = {};
    uint64_t issued[2] = {kNone, kNone};
    static constexpr uint64_t kNone = ~uint64_t{0};
  };

  FiberTeam& team() { return team_; }
  uint8_t* shared() { return shared_.data(); }
  FiberTeam::Barrier& barrier() { return barrier_; }
  Warp& warp(int tid) { return warps_[static_cast<size_t>(tid / 32)]; }
  Group& group(int tid) { return groups_.at(static_cast<size_t>(tid / 128)); }
  size_t shared_bytes() const { return shared_.size(); }
  /// Per byte of shared memory: 1, written by a cp.async (the generic proxy) that no
  /// fence.proxy.async of its thread has yet made visible to the async proxy (wgmma's reads);
  /// kTmaInFlight (mbarrier_emulator.h), the destination of a TMA load whose phase has not completed.
  uint8_t* unfenced() { return unfenced_.data(); }
  /// The first wgmma violation of this launch (wgmma_emulator.h), "" while none.
  std::string& violation() { return violation_; }

  /// Registers a thread at launch, for a kernel of __launch_bounds__(threads, 1) as the
  /// warp-specialized kernels declare: the register file's 65,536 shared out, in steps of 8, at
  /// most 256.
  int launch_registers() const { return std::min(65536 / threads_ / 8 * 8, 256); }

  /// The mbarrier at shared-memory offset `at` (nullptr and a violation if there is none).
  Mbarrier* mbarrier(uint32_t at, int tid) { return mbarriers_.find(at, tid, violation_); }
  Mbarriers& mbarriers() { return mbarriers_; }
  /// Where the mbarriers and TMA loads write.
  MbarrierMemory memory() { return {shared_.data(), unfenced_.data(), shared_.size(), violation_}; }
  /// Named barrier `id` (bar.sync / bar.arrive id, count): ids 1-15 (0 is __syncthreads), a
  /// count that is a multiple of 32 and at most the block's threads, the same at every use.
  FiberTeam::Barrier* named(int id, int count) {
    if (id < 1 || id > 15 || count % 32 != 0 || count < 32 || count > threads_) {
      wgmma_error(violation_, "bar: an id outside 1-15, or a count not a multiple of 32 within the block");
      return nullptr;
    }
    auto& b = named_[static_cast<size_t>(id)];
    if (b == nullptr) b = std::make_unique<FiberTeam::Barrier>(team_, count, false, true);
    if (b->count() == count) return b.get();
    wgmma_error(violation_, "bar: one named barrier used with two thread counts");
    return nullptr;
  }
  /// After every thread of a block has ended (one thread calls it): a named barrier left with
  /// arrivals, or warpgroups holding more registers than the block was given, is a violation
  /// (mbarriers: Mbarriers::end_block); the mbarriers, named barriers and registers start afresh
  /// for the next block.
  void end_block() {
    mbarriers_.end_block(unfenced_.data(), unfenced_.size(), violation_);
    for (const auto& b : named_)
      if (b != nullptr && b->arrived() != 0)
        wgmma_error(violation_, "bar: a named barrier holds arrivals at the block's end (an arrive without its sync)");
    int64_t used = 0;
    for (const Group& g : groups_) used += int64_t{128} * g.registers;
    if (used > int64_t{threads_} * launch_registers())
      wgmma_error(violation_, "setmaxnreg: the warpgroups ask for more registers than the block holds");
    for (Group& g : groups_) {
      g.registers = launch_registers();
      g.issued[0] = g.issued[1] = Group::kNone;  // the next block counts its operations from 0
    }
    for (auto& b : named_) b.reset();
  }

 private:
  FiberTeam team_;
  int threads_;
  std::vector<uint8_t> shared_;  // operator new aligns it to 16 bytes, as the 16-byte copies need
  std::vector<uint8_t> unfenced_;
  std::string violation_;
  FiberTeam::Barrier barrier_;
  std::vector<Warp> warps_;
  std::vector<Group> groups_;
  Mbarriers mbarriers_;
  std::array<std::unique_ptr<FiberTeam::Barrier>, 16> named_;
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
  void sync() const {
    block_.barrier().arrive_and_wait();
    block_.mbarriers().publish();
  }
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
    // This lane's rows lane / 4 and lane / 4 + 8 of A by its columns 2 (lane % 4) and the next of
    // B: the four sums (each over k in order) side by side, each element decoded once.
    const int row = lane / 4, col = 2 * (lane % 4);
    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
    for (int k = 0; k < 16; ++k) {
      const int a_lane = 4 * row + (k % 8) / 2, b_lane = 4 * col + (k % 8) / 2, a_reg = 2 * (k / 8);
      const float a_lo = bf16_at(w.a[p][a_lane][a_reg], k % 2);
      const float a_hi = bf16_at(w.a[p][a_lane][a_reg + 1], k % 2);
      const float b_lo = bf16_at(w.b[p][b_lane][k / 8], k % 2);
      const float b_hi = bf16_at(w.b[p][b_lane + 4][k / 8], k % 2);
      s0 += a_lo * b_lo;
      s1 += a_lo * b_hi;
      s2 += a_hi * b_lo;
      s3 += a_hi * b_hi;
    }
    d[0] += s0;
    d[1] += s1;
    d[2] += s2;
    d[3] += s3;
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
  /// st.shared.b32 at a shared-window address (smem_addr's): like a cp.async write, wgmma sees
  /// it only after this thread's fence.proxy.async (the generic proxy's write, the async proxy's
  /// read).
  void store_shared_b32(uint32_t address, uint32_t v) {
    const size_t at = address;
    if (at + sizeof v > block_.shared_bytes() || at % sizeof v != 0) {
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
  /// wgmma.mma_async m64nNk16 f32 bf16 with A and B in shared memory (A K-major, or M-major when
  /// kTransA; B K-major, or N-major when kTransB): d = A B + (accumulate ? d : 0) for this
  /// thread's fragment of D.
  template <int N, int kTransB, int kTransA = 0>
  void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
    wgmma_issue(d, N, nullptr, desc_a, desc_b, kTransA != 0, kTransB != 0, accumulate);
  }
  /// The same with A in registers (this thread's fragment: the m16n8k16 A layout of its warp's
  /// 16 rows), which hold the poison while the wgmma is in flight (wgmma_emulator.h: a
  /// reference to non-const, the emulator writes there).
  template <int N, int kTransB>
  void wgmma_rs(float (&d)[N / 2], uint32_t (&a)[4], uint64_t desc_b, bool accumulate) {
    wgmma_issue(d, N, a, 0, desc_b, false, kTransB != 0, accumulate);
  }
  /// wgmma.commit_group: the wgmma issued since the last commit form a group.
  void wgmma_commit() { wgmma_commit_group(wgmma_); }
  /// wgmma.wait_group kPending: all but the kPending newest groups complete; only now do their
  /// results reach the accumulators.
  template <int kPending>
  void wgmma_wait() {
    wgmma_retire(wgmma_, kPending, block_.shared(), block_.violation());
  }

  // --- sm_90 bulk asynchronous reductions to global memory (bulk_emulator.h describes the checks) ---

  /// st.shared.v2.f32 at a shared-window address (8-byte aligned): two store_shared_b32.
  void store_shared_v2_f32(uint32_t address, float a, float b) {
    if (address % 8 != 0) {
      wgmma_error(block_.violation(), "st.shared.v2: an address not 8-byte aligned");
      return;
    }
    uint32_t bits[2] = {};
    std::memcpy(&bits[0], &a, sizeof a);
    std::memcpy(&bits[1], &b, sizeof b);
    store_shared_b32(address, bits[0]);
    store_shared_b32(address + 4, bits[1]);
  }
  /// __syncwarp(): the lanes of this warp meet (and their shared-memory writes are ordered).
  void warp_sync() const { block_.warp(tid_).barrier.arrive_and_wait(); }
  /// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], bytes: dst[i] +=
  /// the floats at shared-window address src, asynchronously.
  void bulk_reduce_add(float* dst, uint32_t src, uint32_t bytes) {
    bulk_issue(bulk_, dst, src, bytes, block_.shared(), block_.shared_bytes(), block_.unfenced(), block_.violation());
  }
  /// cp.async.bulk.commit_group.
  void bulk_commit() { emulator::bulk_commit(bulk_, tid_); }
  /// cp.async.bulk.wait_group kPending: all but the kPending newest groups complete.
  /// Where it completes some reads, the other threads run first (bulk_emulator.h).
  template <int kPending>
  void bulk_wait() {
    if (bulk_reads_complete(bulk_, kPending)) block_.team().yield_last();
    emulator::bulk_wait(bulk_, kPending, false, block_.shared(), block_.violation());
  }
  /// cp.async.bulk.wait_group.read kPending: their reads of shared memory complete (the other
  /// threads first, as bulk_wait).
  template <int kPending>
  void bulk_wait_read() {
    if (bulk_reads_complete(bulk_, kPending)) block_.team().yield_last();
    emulator::bulk_wait(bulk_, kPending, true, block_.shared(), block_.violation());
  }
  /// At the end of the kernel: no bulk reduction may be outstanding.
  void bulk_finish() { emulator::bulk_finish(bulk_, block_.violation()); }

  // --- end of the bulk reductions ---

  // --- sm_90 warp specialization: mbarriers, named barriers, setmaxnreg ---

  /// mbarrier.init.shared::cta.b64 [address], count (one thread; a barrier publishes it).
  void mbar_init(uint32_t address, int count) {
    block_.mbarriers().init(address, count, tid_, block_.shared_bytes(), block_.violation());
  }
  /// mbarrier.arrive.shared::cta.b64: one arrival on the current phase, which completes when its
  /// pending count reaches 0 (the count starts again, the phase advances).
  void mbar_arrive(uint32_t address) {
    if (Mbarrier* m = block_.mbarrier(address, tid_)) mbar_count(*m, block_.memory());
  }
  /// mbarrier.arrive.expect_tx.shared::cta.b64 _, [address], bytes: the current phase's
  /// transaction count += bytes (at most 2^20 - 1), then one arrival.
  void mbar_arrive_expect_tx(uint32_t address, uint32_t bytes) {
    if (Mbarrier* m = block_.mbarrier(address, tid_)) mbar_expect_tx(*m, bytes, block_.memory());
  }
  /// cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [dst],
  /// [map, {c0, c1, c2, c3}], [bar]: the box of `map` (a tma::TensorMapArgs, what the GPU's map
  /// was encoded from) at element coordinates c (innermost first) into shared memory at `dst`,
  /// as mbarrier_emulator.h describes.
  void tma_load_4d(uint32_t dst, const void* map, int c0, int c1, int c2, int c3, uint32_t bar) {
    const int c[4] = {c0, c1, c2, c3};
    if (Mbarrier* m = block_.mbarrier(bar, tid_))
      tma_issue(*m, *static_cast<const tma::TensorMapArgs*>(map), c, 4, dst, block_.memory());
  }
  /// cp.async.mbarrier.arrive.noinc.shared::cta.b64: an arrival once every cp.async this thread
  /// issued before it has landed (here: they land now), counted in the init's count (.noinc).
  /// The ranges they wrote go with the phase, for its waiters' fence.proxy.async.
  void cp_async_mbar_arrive(uint32_t address) {
    Mbarrier* m = block_.mbarrier(address, tid_);
    if (m == nullptr) return;
    land(open_);
    open_.clear();
    for (auto& g : groups_) land(g);
    m->incoming.insert(m->incoming.end(), landed_.begin(), landed_.end());
    landed_.clear();
    mbar_count(*m, block_.memory());
  }
  /// A loop on mbarrier.try_wait.parity.shared::cta.b64 until the phase of parity `parity` has
  /// completed: it returns at once when the current phase's parity differs from `parity`.
  void mbar_wait(uint32_t address, int parity) {
    Mbarrier* m = block_.mbarrier(address, tid_);
    if (m == nullptr) return;
    emulator::mbar_wait(*m, parity, block_.memory());
    landed_.insert(landed_.end(), m->published.begin(), m->published.end());
  }
  /// bar.sync id, count: waits until `count` threads have arrived at named barrier `id`.
  void named_sync(int id, int count) {
    if (FiberTeam::Barrier* b = block_.named(id, count)) b->arrive_and_wait();
  }
  /// bar.arrive id, count: counts this thread at named barrier `id`, without waiting.
  void named_arrive(int id, int count) {
    if (FiberTeam::Barrier* b = block_.named(id, count)) b->arrive();
  }
  /// setmaxnreg.{inc,dec}.sync.aligned.u32 kCount: nothing to do on the CPU, but the ISA's
  /// constraints are checked: kCount a multiple of 8 in [24, 256], the same for all 128 threads
  /// of the warpgroup (which meet here), no less than the warpgroup holds for .inc and no more
  /// for .dec; and at the block's end (Block::end_block) the warpgroups within the registers the
  /// block was launched with.
  template <int kCount>
  void setmaxnreg_inc() {
    setmaxnreg(kCount, true);
  }
  template <int kCount>
  void setmaxnreg_dec() {
    setmaxnreg(kCount, false);
  }
  /// The warpgroup index (a warp-uniform value on the GPU).
  int warpgroup() const { return tid_ / 128; }
  int warp_uniform() const { return tid_ / 32; }

  /// At the end of the kernel: nothing may be left in flight.
  void wgmma_finish() {
    if (!wgmma_.ops.empty())
      wgmma_error(block_.violation(), "wgmma: the kernel ended with wgmma in flight (no wait_group)");
    for (WgmmaOp& op : wgmma_.ops) wgmma_drop(wgmma_, op);
    wgmma_.ops.clear();
  }

 private:
  struct Copy {
    void* dst;
    const void* src;
    bool valid;
  };

  void setmaxnreg(int count, bool inc) {
    Block::Group& grp = block_.group(tid_);
    const int me = tid_ % 128, p = static_cast<int>(group_ops_++ & 1);
    grp.regs[p][me] = count;
    grp.barrier.arrive_and_wait();
    for (int i = 0; i < 128; ++i)
      if (grp.regs[p][i] != count) wgmma_error(block_.violation(), "setmaxnreg: counts differ within a warpgroup");
    if (count % 8 != 0 || count < 24 || count > 256)
      wgmma_error(block_.violation(), "setmaxnreg: a count not a multiple of 8 in [24, 256]");
    if (inc ? count < grp.registers : count > grp.registers)
      wgmma_error(block_.violation(), "setmaxnreg: .inc to fewer registers than held, or .dec to more");
    grp.barrier.arrive_and_wait();  // every thread has compared before the count changes
    if (me == 0) grp.registers = count;
  }

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

  void wgmma_issue(float* d, int n, uint32_t* a, uint64_t desc_a, uint64_t desc_b, bool trans_a, bool trans_b,
                   bool accumulate) {
    if (!wgmma_.fenced)
      wgmma_error(block_.violation(), "wgmma: issued without a wgmma.fence since the last wait_group");
    Block::Group& grp = block_.group(tid_);
    const uint64_t issue = group_ops_++;
    const int me = tid_ % 128, p = static_cast<int>(issue & 1);
    uint32_t held[4] = {};  // A's registers, those a wgmma in flight reads as they were at its issue
    if (a != nullptr) {
      wgmma_a_values(wgmma_, a, held, block_.violation());
      std::memcpy(grp.a[p][me], held, sizeof held);
    }
    grp.desc_a[p][me] = desc_a;
    grp.desc_b[p][me] = desc_b;
    const uint32_t shape = static_cast<uint32_t>(n) << 3 | static_cast<uint32_t>(a != nullptr) << 2 |
                           static_cast<uint32_t>(trans_a) << 1 | static_cast<uint32_t>(trans_b);
    grp.shape[p][me] = shape;
    grp.barrier.arrive_and_wait();
    if (grp.issued[p] != issue) {
      // The first thread on after the barrier (the last to arrive, before any other runs): the
      // warpgroup's operands, as every thread's own read of them would have found them now.
      for (int i = 0; i < 128; ++i) {
        if (grp.desc_a[p][i] != desc_a || grp.desc_b[p][i] != desc_b)
          wgmma_error(block_.violation(), "wgmma: descriptors differ between the threads of a warpgroup");
        if (grp.shape[p][i] != shape)
          wgmma_error(block_.violation(),
                      "wgmma: the threads of a warpgroup issue different shapes (N, A, transposes)");
      }
      if (n % 8 != 0 || n < 8 || n > 256)
        wgmma_error(block_.violation(), "wgmma: an N not a multiple of 8 in [8, 256]");
      WgmmaOperands& o = grp.pool.take();
      o.users = 128;
      o.n = n;
      o.a_in_regs = a != nullptr;
      o.trans_a = trans_a;
      o.trans_b = trans_b;
      o.desc_a = desc_a;
      o.desc_b = desc_b;
      wgmma_gather(o, grp.a[p], block_.shared(), block_.shared_bytes(), block_.unfenced(), block_.violation());
      grp.operands[p] = &o;
      grp.issued[p] = issue;
    }
    WgmmaOp op;
    op.d = d;
    op.n = n;
    op.me = me;
    op.accumulate = accumulate;
    op.operands = grp.operands[p];
    if (a != nullptr) {
      op.a_regs = a;
      std::memcpy(op.a_held, held, sizeof held);
    }
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
  BulkState bulk_;  // this thread's bulk reductions not yet completed (bulk_emulator.h)
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
        th.bulk_finish();
        block.barrier().arrive_and_wait();
        if (t == 0) block.end_block();
        block.barrier().arrive_and_wait();
      }
  });
  if (!block.violation().empty()) throw std::logic_error(block.violation());
}

}  // namespace bench::kernels::emulator
