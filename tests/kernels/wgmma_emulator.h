// defines: bench::kernels::emulator::WgmmaOp, WgmmaState and the functions behind
//          EmulatedThread's wgmma_* members (warp_emulator.h): Hopper's warpgroup MMA
//          (wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16) on the CPU
//
// A warpgroup is 4 consecutive warps (128 threads, the first a multiple of 128). Each thread
// gives its A fragment (when A is in registers), the descriptors and the shape; they meet at a
// barrier of the warpgroup, where the last to arrive (the first to go on) reads the whole of A and
// B once for all 128 (WgmmaOperands: what every thread's own part would read at that moment, with
// the same checks), and each computes its own part of D, decoding shared memory through the 64-bit matrix
// descriptors with the canonical layouts of the PTX ISA (9.7.15.5.1.2; kernels/cuda/wgmma_layout.cuh):
// no swizzle and 128-byte swizzle, K-major and MN-major (the transpose bits: B's, and A's when A
// is in shared memory, which the ISA allows for bf16 and f16). Fragments: A (64 x 16)
// and D (64 x N) are the m16n8k16 layouts of mma.sync with warp w of the group owning rows
// 16 w .. 16 w + 15; D's register 4 j + e holds (16 w + g + 8 (e / 2), 8 j + 2 t + e % 2), with
// g = lane / 4 and t = lane % 4.
//
// What the asynchrony checks (a violation is recorded, the first one per launch, and launch()
// throws it as std::logic_error once every thread has ended: a thread that threw instead would
// leave the others suspended at barriers forever, with what they own):
// - The product is computed when the wgmma is issued, but reaches the accumulator registers only
//   at the wgmma.wait_group that completes it. From the issue to that wait the thread's
//   accumulator registers hold a poison (a signaling NaN a float, kWgmmaPoisonD) and so do its A
//   registers when A is in registers (two signaling bf16 NaNs a register, kWgmmaPoisonA): the
//   PTX ISA makes reading either before the wait undefined, and a kernel that does computes NaN
//   and fails its comparison with a float64 reference. At the wait, D gets its result once no
//   newer wgmma in flight chains on the same registers (the chain's input is the previous result,
//   as on the hardware), and each A register what it held at the issue once no wgmma in flight
//   reads it (fragments shared by several wgmmas, or partly overlapping, stay poisoned until the
//   last). A wgmma issued on A registers that one in flight reads takes what they held.
// - Registers written while in flight: at the wait (and at the issue of a wgmma chained on the
//   accumulator or reading the same A registers) they must still hold the poison, else "its
//   accumulator (A) registers were written while it was in flight". Arithmetic on a signaling NaN
//   gives a quiet one, so a read-modify-write (o *= alpha in flight) is reported as a write
//   (not o *= 1, which the compiler drops; measured with GCC -O3: fmaxf of a quiet NaN and x
//   gives x, of a signaling one NaN).
// - At the wait, the thread's part of the operands is read from shared memory again (at the
//   addresses read at the issue): if its bits changed while the wgmma was in flight (a copy into a
//   stage that a wgmma still reads, a barrier or wait missing), that is a violation.
// - Every shared-memory byte a wgmma reads must not hold a cp.async write (or a store_shared_b32)
//   that its thread has not yet fenced with fence.proxy.async (both write through the generic
//   proxy, wgmma reads through the async proxy), nor be the destination of a TMA load whose
//   mbarrier phase has not completed (warp_emulator.h; TMA writes through the async proxy, no
//   fence needed).
// - A wgmma needs a wgmma.fence since the thread's last wait_group (and before its first), the
//   descriptors and the shape (N, A in registers or not, the transposes) must agree across the
//   warpgroup, and no wgmma may be in flight at the kernel's end.
// What it cannot check: a read in flight whose value does not reach a result (a NaN only
// compared, the outcome then used; or a value then discarded by a select), a write in flight of
// the poison's own bits (a poisoned register copied into itself), an A register that overlaps an
// accumulator in flight (not tracked across the two kinds), a register written between a
// wgmma.fence and a wgmma in the same stretch without a wait (it only requires one fence after
// each wait), whether two wgmmas may read the same A registers in flight (the ISA does not say;
// this allows it), stores to shared memory other than cp.async and the Thread's
// store_shared_b32 needing a proxy fence (the kernels write the shared memory that wgmma reads
// only by those two, both tracked), the hardware's order of float additions inside one wgmma
// (summed here in float, k in order), and the speed of anything.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/wgmma_layout.cuh"
#include "tile/defs.h"

namespace bench::kernels::emulator {

/// The operands of one wgmma of a warpgroup, read once for its 128 threads when the last of them
/// issues it (EmulatedThread::wgmma_issue): A (64 x 16) and B (N x 16) as floats, and of what came
/// from shared memory the byte addresses and the bf16 bits, against which each thread checks its
/// own part of them at its wait_group. Owned by the warpgroup (WgmmaPool), reused once every
/// thread has retired it: one decode a wgmma instead of one a thread, and no allocation a wgmma.
struct WgmmaOperands {
  int users = 0;  // the threads whose wgmma in flight reads it
  int n = 0;
  bool a_in_regs = false, trans_a = false, trans_b = false;
  uint64_t desc_a = 0, desc_b = 0;
  std::vector<float> a, b;               // A(row, k) at 16 row + k, B(col, k) at 16 col + k
  std::vector<uint32_t> a_at, b_at;      // their shared-memory byte addresses (kWgmmaUnread: none)
  std::vector<uint16_t> a_bits, b_bits;  // and the bits read there
  std::vector<uint8_t> a_run, b_run;     // per row: bit h when its k 8 h .. 8 h + 7 are 16 bytes in a row
};

/// The index of operand element (mn, k) in WgmmaOperands' arrays: 16 mn + k.
inline size_t wgmma_index(int mn, int k) { return static_cast<size_t>(mn) * 16 + static_cast<size_t>(k); }

/// The byte address of an operand element that was not read (outside shared memory: a violation).
constexpr uint32_t kWgmmaUnread = ~0u;

/// A warpgroup's WgmmaOperands, each taken for one wgmma and free again when its users are 0.
class WgmmaPool {
 public:
  WgmmaOperands& take() {
    for (const auto& o : all_)
      if (o->users == 0) return *o;
    all_.push_back(std::make_unique<WgmmaOperands>());
    return *all_.back();
  }

 private:
  std::vector<std::unique_ptr<WgmmaOperands>> all_;
};

/// One wgmma of one thread, from its issue to the wait that completes it.
struct WgmmaOp {
  float* d = nullptr;
  int n = 0;
  int me = 0;  // the thread's index in its warpgroup
  bool accumulate = false;
  int group = -1;                     // the commit group (-1: not yet committed)
  WgmmaOperands* operands = nullptr;  // the warpgroup's, this thread's part of them read at its wait
  uint32_t* a_regs = nullptr;         // this thread's A fragment (A in registers), poisoned while in flight
  uint32_t a_held[4] = {};            // ... what it held at the issue, restored at the last wait reading it
  std::vector<float> result;          // D after this wgmma
};

/// A thread's wgmma in flight, in issue order.
struct WgmmaState {
  std::vector<WgmmaOp> ops;
  std::vector<std::vector<float>> spare;  // results' storage of retired wgmma, for the next ones
  int groups = 0;                         // groups committed so far
  bool fenced = false;
};

/// Records `what` in `error` unless an earlier violation is there.
inline void wgmma_error(std::string& error, const char* what) {
  if (error.empty()) error = what;
}

/// Byte address of element (mn, k) of a bf16 operand: mn along M or N, k along K; `mn_major`
/// for an operand with its transpose bit (A from shared memory, or B). The canonical layouts of the PTX ISA, T = 8
/// elements of 16 bytes.
inline uint32_t wgmma_element_address(uint64_t desc, bool mn_major, int mn, int k, std::string& error) {
  const auto start = static_cast<uint32_t>(desc & 0x3FFF) << 4;
  const auto lbo = static_cast<uint32_t>((desc >> 16) & 0x3FFF) << 4;
  const auto sbo = static_cast<uint32_t>((desc >> 32) & 0x3FFF) << 4;
  const auto swizzle = static_cast<uint32_t>(desc >> 62);
  if (((desc >> 49) & 7) != 0) wgmma_error(error, "wgmma: a base offset is not emulated");
  const auto m = static_cast<uint32_t>(mn), kk = static_cast<uint32_t>(k);
  if (swizzle == wgmma::kNoSwizzle) {
    // K-major ((8, m), (T, 2k)) : ((T, SBO), (1, LBO)); MN-major ((T, 1, m), (8, k)) : ((1, T, SBO), (T, LBO)).
    return mn_major ? start + (m % 8) * 2 + (kk % 8) * 16 + (m / 8) * sbo + (kk / 8) * lbo
                    : start + (m % 8) * 16 + (m / 8) * sbo + (kk % 8) * 2 + (kk / 8) * lbo;
  }
  if (swizzle == wgmma::kSwizzle128) {
    // K-major ((8, m), (T, 2k)) : ((8T, SBO), (1, T)); MN-major ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO));
    // then Swizzle<3, 4, 3>: address bits 4-6 ^= bits 7-9.
    const uint32_t a = mn_major ? start + (m % 64) * 2 + (m / 64) * lbo + (kk % 8) * 128 + (kk / 8) * sbo
                                : start + (m % 8) * 128 + (m / 8) * sbo + kk * 2;
    return a ^ (((a >> 7) & 7) << 4);
  }
  wgmma_error(error, "wgmma: the 64- and 32-byte swizzles are not emulated");
  return 0;
}

/// Reads the bf16 at shared-memory byte `at` into `bits`, which must lie inside the block's
/// shared memory (else false) and hold no unfenced cp.async write or TMA load in flight.
inline bool wgmma_load(const uint8_t* shared, size_t bytes, const uint8_t* unfenced, uint32_t at, uint16_t& bits,
                       std::string& error) {
  if (at + size_t{2} > bytes || at % 2 != 0) {
    wgmma_error(error, "wgmma: a descriptor addresses outside shared memory");
    bits = 0;
    return false;
  }
  if (unfenced[at] == 2)
    wgmma_error(error,
                "wgmma: reads a TMA load's destination before the mbarrier phase that counts its bytes completed");
  else if (unfenced[at] != 0)
    wgmma_error(error, "wgmma: reads a cp.async write or a store that no fence.proxy.async made visible");
  std::memcpy(&bits, shared + at, sizeof bits);
  return true;
}

/// Reads an operand of `rows` rows (M or N) of 16 k from shared memory through its descriptor.
inline void wgmma_read(int rows, uint64_t desc, bool mn_major, const uint8_t* shared, size_t bytes,
                       const uint8_t* unfenced, std::vector<float>& values, std::vector<uint32_t>& at,
                       std::vector<uint16_t>& bits, std::vector<uint8_t>& run, std::string& error) {
  const auto count = static_cast<size_t>(rows) * 16;
  values.resize(count);
  at.resize(count);
  bits.resize(count);
  run.assign(static_cast<size_t>(rows), 0);
  for (int mn = 0; mn < rows; ++mn)
    for (int k = 0; k < 16; ++k) {
      const size_t i = wgmma_index(mn, k);
      const uint32_t address = wgmma_element_address(desc, mn_major, mn, k, error);
      at[i] = wgmma_load(shared, bytes, unfenced, address, bits[i], error) ? address : kWgmmaUnread;
      values[i] = tile::bf16_to_float(tile::bf16{bits[i]});
      if (k % 8 == 7) {
        bool in_a_row = at[i - 7] != kWgmmaUnread;
        for (size_t e = i - 6; e <= i && in_a_row; ++e) in_a_row = at[e] == at[e - 1] + 2;
        if (in_a_row) run[static_cast<size_t>(mn)] |= static_cast<uint8_t>(1 << (k / 8));
      }
    }
}

/// Fills `o` (its shape and descriptors set) for the warpgroup: A from the warpgroup's registers
/// `regs` (A in registers: the fragments every thread gave) or from shared memory, B from shared
/// memory. Every element a thread's part of D needs, the whole of A and B over the 128 threads,
/// is checked as that thread's own read would be.
inline void wgmma_gather(WgmmaOperands& o, const uint32_t (*regs)[4], const uint8_t* shared, size_t bytes,
                         const uint8_t* unfenced, std::string& error) {
  if (o.a_in_regs) {
    o.a.resize(wgmma_index(64, 0));
    for (int row = 0; row < 64; ++row)
      for (int k = 0; k < 16; ++k) {
        // A(row, k): lane (row % 8) 4 + (k % 8) / 2 of warp row / 16, register (row % 16) / 8 + 2 (k / 8).
        const uint32_t reg = regs[32 * (row / 16) + (row % 8) * 4 + (k % 8) / 2][(row % 16) / 8 + 2 * (k / 8)];
        o.a[wgmma_index(row, k)] = tile::bf16_to_float(tile::bf16{static_cast<uint16_t>(reg >> (16 * (k % 2)))});
      }
  } else {
    wgmma_read(64, o.desc_a, o.trans_a, shared, bytes, unfenced, o.a, o.a_at, o.a_bits, o.a_run, error);
  }
  wgmma_read(o.n, o.desc_b, o.trans_b, shared, bytes, unfenced, o.b, o.b_at, o.b_bits, o.b_run, error);
}

/// Thread `me`'s part of D: rows 16 w + g and 16 w + g + 8 of A (warp w, g = lane / 4), and of B
/// the N / 4 columns 8 (j / 2) + 2 t + j % 2 (t = lane % 4).
inline int wgmma_row(int me, int r) { return 16 * (me / 32) + (me % 32) / 4 + 8 * r; }
inline int wgmma_col(int me, int j) { return 8 * (j / 2) + 2 * (me % 4) + j % 2; }

/// Whether thread `me`'s part of the operands still holds, in shared memory, what was read at the issue.
inline bool wgmma_unchanged(const WgmmaOperands& o, int me, const uint8_t* shared) {
  // Eight k in 16 bytes in a row (a K-major operand) compare at once: those bytes are this thread's alone.
  const auto same = [&](const std::vector<uint32_t>& at, const std::vector<uint16_t>& bits,
                        const std::vector<uint8_t>& run, int mn) {
    for (int h = 0; h < 2; ++h) {
      const size_t first = wgmma_index(mn, 8 * h);
      if ((run[static_cast<size_t>(mn)] >> h & 1) != 0) {
        uint64_t now[2] = {}, then[2] = {};
        std::memcpy(now, shared + at[first], sizeof now);
        std::memcpy(then, &bits[first], sizeof then);
        if (now[0] != then[0] || now[1] != then[1]) return false;
        continue;
      }
      for (size_t i = first; i < first + 8; ++i) {
        uint16_t now = 0;
        if (at[i] == kWgmmaUnread) continue;
        std::memcpy(&now, shared + at[i], sizeof now);
        if (now != bits[i]) return false;
      }
    }
    return true;
  };
  if (!o.a_in_regs)
    for (int r = 0; r < 2; ++r)
      if (!same(o.a_at, o.a_bits, o.a_run, wgmma_row(me, r))) return false;
  for (int j = 0; j < o.n / 4; ++j)
    if (!same(o.b_at, o.b_bits, o.b_run, wgmma_col(me, j))) return false;
  return true;
}

/// The poison a wgmma in flight leaves in its registers until the wait that completes it: for
/// the floats of D a signaling NaN, for A's bf16 pairs two signaling bf16 NaNs. A kernel that
/// reads them computes NaN; arithmetic on a signaling NaN gives a quiet one (other bits), so a
/// read-modify-write shows as a write at the wait, where a quiet NaN would pass unchanged.
constexpr uint32_t kWgmmaPoisonD = 0x7fa5a5a5u;
constexpr uint32_t kWgmmaPoisonA = 0x7fa57fa5u;

/// Whether `n` bytes at `p` and `m` bytes at `q` overlap (registers of different arrays).
inline bool wgmma_overlap(const void* p, size_t n, const void* q, size_t m) {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  return a < b + m && b < a + n;
}

/// The index of register `r` among op's A registers, -1 if it is not one.
inline int wgmma_a_index(const WgmmaOp& op, const uint32_t* r) {
  if (op.a_regs == nullptr || !wgmma_overlap(op.a_regs, sizeof op.a_held, r, sizeof *r)) return -1;
  return static_cast<int>((reinterpret_cast<uintptr_t>(r) - reinterpret_cast<uintptr_t>(op.a_regs)) / sizeof *r);
}

/// Whether the `count` registers at `p` all hold `poison`.
inline bool wgmma_poisoned(const void* p, size_t count, uint32_t poison) {
  for (size_t i = 0; i < count; ++i) {
    uint32_t v = 0;
    std::memcpy(&v, static_cast<const uint8_t*>(p) + 4 * i, sizeof v);
    if (v != poison) return false;
  }
  return true;
}

inline void wgmma_poison(void* p, size_t count, uint32_t poison) {
  for (size_t i = 0; i < count; ++i) std::memcpy(static_cast<uint8_t*>(p) + 4 * i, &poison, sizeof poison);
}

/// What A registers `a` hold for a wgmma issued now (`out`): a register that a wgmma in flight
/// reads holds the poison and stands for what it held at that wgmma's issue (another wgmma may
/// read it: the hardware leaves it unchanged); one that no longer holds the poison was written.
inline void wgmma_a_values(const WgmmaState& s, const uint32_t* a, uint32_t (&out)[4], std::string& error) {
  for (int i = 0; i < 4; ++i) {
    out[i] = a[i];
    for (auto it = s.ops.rbegin(); it != s.ops.rend(); ++it)
      if (const int j = wgmma_a_index(*it, a + i); j >= 0) {
        if (a[i] != kWgmmaPoisonA) wgmma_error(error, "wgmma: its A registers were written while it was in flight");
        out[i] = it->a_held[j];
        break;
      }
  }
}

/// Queues an issued wgmma (its operands gathered): its input is D as the registers hold it, or the
/// result of the newest wgmma in flight on the same registers (the hardware chains them). Then its
/// accumulator and A registers hold the poison until the wait that completes it.
inline void wgmma_push(WgmmaState& s, WgmmaOp op, std::string& error) {
  const auto half = static_cast<size_t>(op.n / 2);
  const float* input = op.d;
  for (auto it = s.ops.rbegin(); it != s.ops.rend(); ++it)
    if (wgmma_overlap(it->d, it->result.size() * sizeof(float), op.d, half * sizeof(float))) {
      if (it->d != op.d || it->n != op.n) {
        wgmma_error(error, "wgmma: chained on registers of another shape");
      } else {
        if (!wgmma_poisoned(op.d, half, kWgmmaPoisonD))
          wgmma_error(error, "wgmma: its accumulator registers were written while it was in flight");
        input = it->result.data();
      }
      break;
    }
  if (!s.spare.empty()) {
    op.result = std::move(s.spare.back());
    s.spare.pop_back();
  }
  op.result.resize(half);
  const WgmmaOperands& o = *op.operands;
  if (o.n != op.n || op.n % 8 != 0 || o.a.size() != wgmma_index(64, 0)) {
    // Another shape than the warpgroup's (a violation at the issue): no product.
    std::fill(op.result.begin(), op.result.end(), 0.f);
  } else {
    // D's registers 4 q .. 4 q + 3 are rows g and g + 8 by columns j = 2 q and 2 q + 1: their four
    // sums (each over k in order, as one register's alone) run side by side, so that the additions
    // of one, each waiting on the last, overlap the others'.
    const float* a0 = &o.a[wgmma_index(wgmma_row(op.me, 0), 0)];
    const float* a1 = &o.a[wgmma_index(wgmma_row(op.me, 1), 0)];
    for (size_t q = 0; q < half / 4; ++q) {
      const int j = 2 * static_cast<int>(q);
      const float* b0 = &o.b[wgmma_index(wgmma_col(op.me, j), 0)];
      const float* b1 = &o.b[wgmma_index(wgmma_col(op.me, j + 1), 0)];
      float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
      for (int k = 0; k < 16; ++k) {
        s0 += a0[k] * b0[k];
        s1 += a0[k] * b1[k];
        s2 += a1[k] * b0[k];
        s3 += a1[k] * b1[k];
      }
      const float sums[4] = {s0, s1, s2, s3};
      for (size_t e = 0; e < 4; ++e) {
        const size_t i = 4 * q + e;
        op.result[i] = (op.accumulate ? input[i] : 0.f) + sums[e];
      }
    }
  }
  wgmma_poison(op.d, half, kWgmmaPoisonD);
  if (op.a_regs != nullptr) wgmma_poison(op.a_regs, 4, kWgmmaPoisonA);
  s.ops.push_back(std::move(op));
}

/// Ends a thread's wgmma: its operands lose a user, its result's storage goes back to `s`.
inline void wgmma_drop(WgmmaState& s, WgmmaOp& op) {
  --op.operands->users;
  s.spare.push_back(std::move(op.result));
}

inline void wgmma_commit_group(WgmmaState& s) {
  for (WgmmaOp& op : s.ops)
    if (op.group < 0) op.group = s.groups;
  ++s.groups;
}

/// wgmma.wait_group: completes the committed groups older than the `pending` newest, in order:
/// their operands must not have changed in shared memory, their registers must still hold the
/// poison. D receives the result once no newer wgmma in flight chains on it, an A register what it
/// held at the issue once no wgmma in flight reads it.
inline void wgmma_retire(WgmmaState& s, int pending, const uint8_t* shared, std::string& error) {
  const int limit = s.groups - pending;  // groups below this one complete
  size_t done = 0;
  for (; done < s.ops.size() && s.ops[done].group >= 0 && s.ops[done].group < limit; ++done) {
    WgmmaOp& op = s.ops[done];
    if (!wgmma_unchanged(*op.operands, op.me, shared))
      wgmma_error(error, "wgmma: shared memory it reads changed while it was in flight (before its wait_group)");
    if (op.a_regs != nullptr && !wgmma_poisoned(op.a_regs, 4, kWgmmaPoisonA))
      wgmma_error(error, "wgmma: its A registers were written while it was in flight");
    if (!wgmma_poisoned(op.d, op.result.size(), kWgmmaPoisonD))
      wgmma_error(error, "wgmma: its accumulator registers were written while it was in flight");
    const auto newer = [&](const auto& uses) {
      for (size_t k = done + 1; k < s.ops.size(); ++k)
        if (uses(s.ops[k])) return true;
      return false;
    };
    if (!newer([&](const WgmmaOp& o) { return o.d == op.d; }))
      std::memcpy(op.d, op.result.data(), op.result.size() * sizeof(float));
    if (op.a_regs != nullptr)
      for (int i = 0; i < 4; ++i)
        if (!newer([&](const WgmmaOp& o) { return wgmma_a_index(o, op.a_regs + i) >= 0; })) op.a_regs[i] = op.a_held[i];
    wgmma_drop(s, op);
  }
  s.ops.erase(s.ops.begin(), s.ops.begin() + static_cast<std::ptrdiff_t>(done));
  s.fenced = false;
}

}  // namespace bench::kernels::emulator
