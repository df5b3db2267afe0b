// The warp emulator's wgmma (wgmma_emulator.h) on its own: one warpgroup multiplies a 64 x 16 A
// (shared memory, K-major or M-major, or registers) by a 16 x N B in shared memory through matrix
// descriptors, in
// the layouts of kernels/cuda/wgmma_layout.cuh and in 128-byte swizzled layouts built here
// independently, against a float64 product. And the faults it must catch: a wrong descriptor
// stride, D or A's registers read before the wait (they hold the poison), a missing wgmma.fence
// or fence.proxy.async, shared memory or registers changed while a wgmma is in flight; and chained
// or register-sharing wgmmas, whose registers stay poisoned until the last wait that needs them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/wgmma_layout.cuh"
#include "emulator_test_util.h"
#include "warp_emulator.h"
#include "wgmma_test_util.h"

namespace bench::kernels {
namespace wgmma_emulation_test {
namespace {

using emulator::EmulatedThread;
using emulator::launch;
using emulator_test::throws;
using wgmma_test::at;
using wgmma_test::close;
using wgmma_test::Problem;
using wgmma_test::put;

/// Layouts of the test's shared memory.
enum class Layout { kCore, kSwizzle128 };

/// Where a test puts A and B in shared memory and what the descriptors say.
struct Placement {
  uint32_t a_at = 0, b_at = 0;
  uint64_t desc_a = 0, desc_b = 0;
  bool trans_a = false, trans_b = false;
  size_t bytes = 0;
};

/// Byte offset of (row, col) in a 128-byte swizzled tile of rows of 64 bf16 (128 bytes): the
/// 16-byte chunk col / 8 of row r moves to chunk (col / 8) ^ (r % 8) (CUTLASS's Swizzle<3, 4, 3>
/// on a 1024-byte aligned atom, written out directly rather than through the emulator's decoder).
uint32_t swizzled(int row, int col) {
  return static_cast<uint32_t>(row * 128 + (((col / 8) ^ (row % 8)) * 16) + (col % 8) * 2);
}

/// Writes A (K-major, or M-major when trans_a) and B (K-major, or MN-major when trans_b) and
/// returns the placement.
template <int N>
Placement place(uint8_t* shared, const Problem& p, Layout layout, bool trans_b, bool trans_a = false) {
  Placement pl;
  pl.trans_a = trans_a;
  pl.trans_b = trans_b;
  pl.a_at = 0;
  pl.b_at = 8192;  // past A's 64 rows of 128 bytes (swizzled); 1024-byte aligned
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 16; ++k) {
      const uint16_t v = p.a[static_cast<size_t>(m * 16 + k)];
      if (layout == Layout::kCore)  // M-major: rows of 64 m (k the row), as B's MN-major tile
        put(shared,
            pl.a_at + 2 * static_cast<uint32_t>(trans_a ? wgmma::core_offset<64>(k, m) : wgmma::core_offset<16>(m, k)),
            v);
      else if (trans_a)  // 16 rows of 64 m (128 bytes each)
        put(shared, pl.a_at + swizzled(k, m), v);
      else
        put(shared, pl.a_at + swizzled(m, k), v);  // columns 16.. of each 128-byte row unused
    }
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < N; ++j) {
      const uint16_t v = p.b[static_cast<size_t>(k * N + j)];
      uint32_t at = 0;
      if (layout == Layout::kCore)
        at = 2 * static_cast<uint32_t>(trans_b ? wgmma::core_offset<N>(k, j) : wgmma::core_offset<16>(j, k));
      else if (trans_b)  // rows of 64 n (128 bytes) per k, then the next 64 n after 16 rows
        at = static_cast<uint32_t>(j / 64) * 2048 + swizzled(k, j % 64);
      else
        at = swizzled(j, k);
      put(shared, pl.b_at + at, v);
    }
  if (layout == Layout::kCore) {
    pl.desc_a = trans_a ? wgmma::mn_major<64>(pl.a_at, 0) : wgmma::k_major<16>(pl.a_at, 0);
    pl.desc_b = trans_b ? wgmma::mn_major<N>(pl.b_at, 0) : wgmma::k_major<16>(pl.b_at, 0);
  } else {
    // K-major: rows 128 bytes apart, 8-row groups 1024 (SBO); MN-major: 8-row groups along K
    // 1024 apart (SBO), groups of 64 along N 2048 (LBO).
    pl.desc_a = trans_a ? wgmma::descriptor(pl.a_at, 2048, 1024, wgmma::kSwizzle128)
                        : wgmma::descriptor(pl.a_at, 16, 1024, wgmma::kSwizzle128);
    pl.desc_b = trans_b ? wgmma::descriptor(pl.b_at, 2048, 1024, wgmma::kSwizzle128)
                        : wgmma::descriptor(pl.b_at, 16, 1024, wgmma::kSwizzle128);
  }
  pl.bytes = 8192 + static_cast<size_t>(N) * 128;
  return pl;
}

/// The A fragment of thread `me` of the warpgroup (the m16n8k16 A layout of its warp's 16 rows).
void a_fragment(const Problem& p, int me, uint32_t (&a)[4]) {
  const int row = 16 * (me / 32) + (me % 32) / 4, t = me % 4;
  const auto at = [&](int r, int k) { return static_cast<uint32_t>(p.a[static_cast<size_t>(r * 16 + k)]); };
  a[0] = at(row, 2 * t) | at(row, 2 * t + 1) << 16;
  a[1] = at(row + 8, 2 * t) | at(row + 8, 2 * t + 1) << 16;
  a[2] = at(row, 2 * t + 8) | at(row, 2 * t + 9) << 16;
  a[3] = at(row + 8, 2 * t + 8) | at(row + 8, 2 * t + 9) << 16;
}

/// Copies thread me's D fragment into the 64 x N result.
template <int N>
void store_d(const float (&d)[N / 2], int me, std::vector<double>& out) {
  const int row = 16 * (me / 32) + (me % 32) / 4, t = me % 4;
  for (int i = 0; i < N / 2; ++i)
    out[static_cast<size_t>((row + 8 * ((i % 4) / 2)) * N + 8 * (i / 4) + 2 * t + i % 2)] = d[i];
}

/// Faults the kernel below can commit on purpose.
enum class Fault {
  kNone,
  kNoFence,
  kReadBeforeWait,
  kWriteSharedInFlight,
  kWriteAccumulatorInFlight,
  kWriteARegistersInFlight,
  kScaleAccumulatorInFlight,  // o *= 0.5 in flight: a read and a write
  kTransAOff,                 // A placed M-major, read with the transpose bit 0
  kTransBDiffers              // the warpgroup's last thread issues its wgmma with B's transpose bit flipped
};

/// One warpgroup: places the operands (thread 0, plain stores), then d = A B (+ d0 when
/// `accumulate`, d0 = 1 everywhere) by one wgmma.
template <int N, int kTransB, int kTransA = 0>
std::vector<double> run(const Problem& p, Layout layout, bool a_in_regs, bool accumulate = false,
                        Fault fault = Fault::kNone, uint32_t wrong_sbo = 0) {
  std::vector<double> out(static_cast<size_t>(64 * N), NAN);
  std::vector<uint8_t> probe(1 << 16, 0);
  const Placement pl = place<N>(probe.data(), p, layout, kTransB != 0, kTransA != 0);
  launch(1, 1, 128, pl.bytes, [&](EmulatedThread& th) {
    if (th.tid() == 0) std::memcpy(th.shared(), probe.data(), pl.bytes);
    th.sync();
    uint64_t desc_b = pl.desc_b;
    if (wrong_sbo != 0) desc_b = (desc_b & ~(uint64_t{0x3FFF} << 32)) | wgmma::encode(wrong_sbo) << 32;
    float d[N / 2];
    for (float& x : d) x = 1.f;
    uint32_t a[4];  // lives until the wait: the wgmma reads it while in flight
    if (fault != Fault::kNoFence) th.wgmma_fence();
    if (a_in_regs) {
      a_fragment(p, th.tid(), a);
      th.template wgmma_rs<N, kTransB>(d, a, desc_b, accumulate);
    } else if (fault == Fault::kTransAOff) {
      th.template wgmma_ss<N, kTransB, 0>(d, pl.desc_a, desc_b, accumulate);
    } else if (fault == Fault::kTransBDiffers && th.tid() == 127) {
      th.template wgmma_ss<N, 1 - kTransB, kTransA>(d, pl.desc_a, desc_b, accumulate);
    } else {
      th.template wgmma_ss<N, kTransB, kTransA>(d, pl.desc_a, desc_b, accumulate);
    }
    th.wgmma_commit();
    if (fault == Fault::kReadBeforeWait) store_d<N>(d, th.tid(), out);
    if (fault == Fault::kWriteSharedInFlight && th.tid() == 0) th.shared()[pl.b_at] ^= 1;
    if (fault == Fault::kWriteAccumulatorInFlight) d[0] = 2.f;
    if (fault == Fault::kWriteARegistersInFlight) a[0] ^= 1;
    if (fault == Fault::kScaleAccumulatorInFlight)
      for (float& x : d) x *= 0.5f;
    th.template wgmma_wait<0>();
    if (fault != Fault::kReadBeforeWait) store_d<N>(d, th.tid(), out);
  });
  return out;
}

std::vector<double> plus_one(std::vector<double> v) {
  for (double& x : v) x += 1.0;
  return v;
}

TEST(WgmmaEmulation, SharedAKMajorBMatchesFloat64) {
  const Problem p16(16), p64(64), p128(128), p256(256);
  EXPECT_TRUE(close(p16.product, run<16, 0>(p16, Layout::kCore, false)));
  EXPECT_TRUE(close(p64.product, run<64, 0>(p64, Layout::kCore, false)));
  EXPECT_TRUE(close(p128.product, run<128, 0>(p128, Layout::kCore, false)));
  EXPECT_TRUE(close(p256.product, run<256, 0>(p256, Layout::kCore, false)));
}

TEST(WgmmaEmulation, MNMajorBMatchesFloat64) {
  const Problem p64(64), p128(128);
  EXPECT_TRUE(close(p64.product, run<64, 1>(p64, Layout::kCore, false)));
  EXPECT_TRUE(close(p128.product, run<128, 1>(p128, Layout::kCore, false)));
}

TEST(WgmmaEmulation, MNMajorAMatchesFloat64) {
  // A from shared memory with the transpose bit (M-major: the flash backward's dS^T as dQ's A),
  // in the interleaved layout (rows of 64 m per k, as B's MN-major tile) and 128-byte swizzled.
  const Problem p32(32, 13), p64(64, 13), p128(128, 13);
  EXPECT_TRUE(close(p32.product, run<32, 1, 1>(p32, Layout::kCore, false)));
  EXPECT_TRUE(close(p64.product, run<64, 1, 1>(p64, Layout::kCore, false)));
  EXPECT_TRUE(close(p128.product, run<128, 0, 1>(p128, Layout::kCore, false)));
  EXPECT_TRUE(close(plus_one(p64.product), run<64, 1, 1>(p64, Layout::kCore, false, true)));
  EXPECT_TRUE(close(p64.product, run<64, 1, 1>(p64, Layout::kSwizzle128, false)));
  // The same bytes read with the transpose bit 0 are wrong: the test can fail.
  EXPECT_FALSE(close(p64.product, run<64, 1, 1>(p64, Layout::kCore, false, false, Fault::kTransAOff)));
  EXPECT_FALSE(close(p64.product, run<64, 1, 1>(p64, Layout::kSwizzle128, false, false, Fault::kTransAOff)));
}

TEST(WgmmaEmulation, RegisterAMatchesFloat64) {
  const Problem p64(64, 9), p128(128, 9);
  EXPECT_TRUE(close(p64.product, run<64, 0>(p64, Layout::kCore, true)));
  EXPECT_TRUE(close(p128.product, run<128, 1>(p128, Layout::kCore, true)));
  // The input accumulator (1 everywhere) is added when asked, and only then.
  EXPECT_TRUE(close(plus_one(p128.product), run<128, 1>(p128, Layout::kCore, true, true)));
}

TEST(WgmmaEmulation, Swizzle128MatchesFloat64) {
  const Problem p64(64, 11), p128(128, 11);
  EXPECT_TRUE(close(p64.product, run<64, 0>(p64, Layout::kSwizzle128, false)));
  EXPECT_TRUE(close(p64.product, run<64, 1>(p64, Layout::kSwizzle128, false)));
  EXPECT_TRUE(close(p128.product, run<128, 1>(p128, Layout::kSwizzle128, true)));
}

TEST(WgmmaEmulation, WrongStrideFails) {
  // K-major B of 16 columns: 8-row groups are 256 bytes apart; 128 reads the wrong rows.
  const Problem p(64);
  EXPECT_FALSE(close(p.product, run<64, 0>(p, Layout::kCore, false, false, Fault::kNone, 128)));
  // MN-major B of 64 columns: core matrices along N are 128 bytes apart (SBO); 256 is wrong.
  EXPECT_FALSE(close(p.product, run<64, 1>(p, Layout::kCore, false, false, Fault::kNone, 256)));
}

TEST(WgmmaEmulation, AsynchronyFaultsAreCaught) {
  const Problem p(64);
  // D read before the wait: the poison, not the product.
  EXPECT_FALSE(close(p.product, run<64, 0>(p, Layout::kCore, false, false, Fault::kReadBeforeWait)));
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, false, Fault::kNoFence); }, "without a wgmma.fence"));
  // At the wait each thread compares its part: eight k in a row at once (K-major B), or one by one.
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, false, Fault::kWriteSharedInFlight); },
                     "shared memory it reads changed"));
  EXPECT_TRUE(throws([&] { run<64, 1>(p, Layout::kCore, false, false, Fault::kWriteSharedInFlight); },
                     "shared memory it reads changed"));
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kSwizzle128, false, false, Fault::kWriteSharedInFlight); },
                     "shared memory it reads changed"));
  EXPECT_TRUE(throws([&] { run<64, 1>(p, Layout::kSwizzle128, false, false, Fault::kWriteSharedInFlight); },
                     "shared memory it reads changed"));
  // The warpgroup's operands are read once for its 128 threads: they must issue one shape.
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, false, Fault::kTransBDiffers); }, "different shapes"));
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, true, Fault::kWriteAccumulatorInFlight); },
                     "accumulator registers"));
  EXPECT_TRUE(
      throws([&] { run<64, 0>(p, Layout::kCore, true, false, Fault::kWriteARegistersInFlight); }, "A registers"));
  // A read-modify-write of the poison gives a quiet NaN, other bits: reported as a write.
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, true, Fault::kScaleAccumulatorInFlight); },
                     "accumulator registers were written while it was in flight"));
}

bool all_nan(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
}

/// A B with A in registers; before the wait the kernel reads A's registers it gave the wgmma (the
/// fault: undefined on the GPU) and sums each of its 2 rows' 4 values there; returns the 64 x 4
/// sums (row, t) and D, and whether every thread's registers held the fragment after the wait.
struct ReadA {
  std::vector<double> sums, d;
  bool restored = true;
};
ReadA read_a_in_flight(const Problem& p) {
  std::vector<uint8_t> probe(1 << 16, 0);
  const Placement pl = place<64>(probe.data(), p, Layout::kCore, false);
  ReadA r{std::vector<double>(at(64, 4, 0), NAN), std::vector<double>(at(64, 64, 0), NAN)};
  std::vector<int> restored(128, 0);
  launch(1, 1, 128, pl.bytes, [&](EmulatedThread& th) {
    if (th.tid() == 0) std::memcpy(th.shared(), probe.data(), pl.bytes);
    th.sync();
    uint32_t a[4], fragment[4];
    a_fragment(p, th.tid(), fragment);
    std::memcpy(a, fragment, sizeof a);
    float d[32];
    th.wgmma_fence();
    th.wgmma_rs<64, 0>(d, a, pl.desc_b, false);
    th.wgmma_commit();
    float sum[2] = {0.f, 0.f};  // register e holds row g + 8 (e % 2)
    for (int e = 0; e < 4; ++e)
      for (int h = 0; h < 2; ++h) sum[e % 2] += Problem::value(static_cast<uint16_t>(a[e] >> (16 * h)));
    th.wgmma_wait<0>();
    const int row = 16 * (th.tid() / 32) + (th.tid() % 32) / 4, t = th.tid() % 4;
    for (int r2 = 0; r2 < 2; ++r2) r.sums[at(row + 8 * r2, 4, t)] = sum[r2];
    restored[static_cast<size_t>(th.tid())] = std::memcmp(a, fragment, sizeof a) == 0 ? 1 : 0;
    store_d<64>(d, th.tid(), r.d);
  });
  r.restored = std::count(restored.begin(), restored.end(), 1) == 128;
  return r;
}

TEST(WgmmaEmulation, InFlightReadsSeeThePoison) {
  // The accumulator read before its wait: every value the poison (NaN), neither the input (1) nor
  // the product.
  const Problem p(64, 5);
  EXPECT_TRUE(all_nan(run<64, 0>(p, Layout::kCore, false, true, Fault::kReadBeforeWait)));
  EXPECT_TRUE(all_nan(run<64, 0>(p, Layout::kCore, true, false, Fault::kReadBeforeWait)));
  // A's registers read after the issue: the kernel's row sums are NaN, not A's; after the wait
  // the registers hold the fragment again and the product is right.
  std::vector<double> sums(at(64, 4, 0), 0.0);
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 16; ++k) sums[at(m, 4, (k % 8) / 2)] += Problem::value(p.a[at(m, 16, k)]);
  const ReadA r = read_a_in_flight(p);
  EXPECT_FALSE(close(sums, r.sums));
  EXPECT_TRUE(all_nan(r.sums));
  EXPECT_TRUE(r.restored);
  EXPECT_TRUE(close(p.product, r.d));
}

/// Whether the `count` registers at p hold wgmma's poison `poison` (all, or none when `all` is false).
template <class T>
bool poisoned(const T* p, int count, uint32_t poison, bool all = true) {
  for (int i = 0; i < count; ++i) {
    uint32_t v = 0;
    std::memcpy(&v, p + i, sizeof v);
    if ((v == poison) != all) return false;
  }
  return true;
}

TEST(WgmmaEmulation, ChainsAndSharedARegistersStayPoisonedUntilTheirLastWait) {
  // Registers regs[0..5] = A's fragment f0 f1 f2 f3 then f0 f1. In separate commit groups: d1 = A
  // B from regs[0..3], then d1 += A B again (a chain sharing the A registers), then d2 = A' B from
  // regs[2..5] (partly overlapping): f2 f3 f0 f1 swaps A's k halves, A'(m, k) = A(m, k ^ 8).
  // wait_group 1 completes the first two: d1 holds 2 A B, regs[0..1] the fragment, regs[2..5]
  // and d2 the poison; wait_group 0 completes the last.
  const Problem p(64, 17);
  std::vector<double> twice = p.product, swapped(at(64, 64, 0), 0.0);
  for (double& x : twice) x *= 2;
  for (int m = 0; m < 64; ++m)
    for (int j = 0; j < 64; ++j)
      for (int k = 0; k < 16; ++k)
        swapped[at(m, 64, j)] +=
            static_cast<double>(Problem::value(p.a[at(m, 16, k ^ 8)])) * Problem::value(p.b[at(k, 64, j)]);
  std::vector<uint8_t> probe(1 << 16, 0);
  const Placement pl = place<64>(probe.data(), p, Layout::kCore, false);
  for (const bool write_between : {false, true}) {
    std::vector<double> out1(at(64, 64, 0), NAN), out2(at(64, 64, 0), NAN);
    std::vector<int> ok(128, 0);
    const auto body = [&](EmulatedThread& th) {
      if (th.tid() == 0) std::memcpy(th.shared(), probe.data(), pl.bytes);
      th.sync();
      uint32_t regs[6], fragment[4];
      a_fragment(p, th.tid(), fragment);
      std::memcpy(regs, fragment, sizeof fragment);
      regs[4] = fragment[0];
      regs[5] = fragment[1];
      auto& a1 = *reinterpret_cast<uint32_t(*)[4]>(regs);
      auto& a2 = *reinterpret_cast<uint32_t(*)[4]>(regs + 2);
      float d1[32], d2[32];
      th.wgmma_fence();
      th.wgmma_rs<64, 0>(d1, a1, pl.desc_b, false);
      th.wgmma_commit();
      if (write_between) regs[3] = 0;  // the fault: an A register the first wgmma reads, written in flight
      th.wgmma_rs<64, 0>(d1, a1, pl.desc_b, true);
      th.wgmma_commit();
      th.wgmma_rs<64, 0>(d2, a2, pl.desc_b, false);
      th.wgmma_commit();
      th.wgmma_wait<1>();
      bool good = regs[0] == fragment[0] && regs[1] == fragment[1] && poisoned(regs + 2, 4, emulator::kWgmmaPoisonA) &&
                  poisoned(d2, 32, emulator::kWgmmaPoisonD) && poisoned(d1, 32, emulator::kWgmmaPoisonD, false);
      store_d<64>(d1, th.tid(), out1);
      th.wgmma_wait<0>();
      good =
          good && std::memcmp(regs, fragment, sizeof fragment) == 0 && regs[4] == fragment[0] && regs[5] == fragment[1];
      ok[static_cast<size_t>(th.tid())] = good ? 1 : 0;
      store_d<64>(d2, th.tid(), out2);
    };
    if (write_between) {
      EXPECT_TRUE(throws([&] { launch(1, 1, 128, pl.bytes, body); }, "A registers were written while"));
      continue;
    }
    launch(1, 1, 128, pl.bytes, body);
    EXPECT_EQ(std::count(ok.begin(), ok.end(), 1), 128);
    EXPECT_TRUE(close(twice, out1));
    EXPECT_TRUE(close(swapped, out2));
  }
}

TEST(WgmmaEmulation, ChainedWgmmaAccumulateAndCpAsyncNeedsProxyFence) {
  // Two k16 steps into one accumulator without a wait between (K = 32: A B + A B' = A (B + B')
  // with B' = B here, so 2 A B), the operands brought in by cp.async; without the proxy fence
  // the wgmma reads an unfenced write and throws.
  const Problem p(64, 3);
  std::vector<uint8_t> probe(1 << 16, 0);
  const Placement pl = place<64>(probe.data(), p, Layout::kCore, false);
  for (const bool fence : {true, false}) {
    std::vector<double> out(64 * 64, NAN);
    const auto body = [&](EmulatedThread& th) {
      for (size_t c = static_cast<size_t>(th.tid()); c < pl.bytes / 16; c += 128)
        th.cp_async_16(th.shared() + 16 * c, probe.data() + 16 * c, true);
      th.cp_async_commit();
      th.cp_async_wait(0);
      if (fence) th.fence_proxy_async();
      th.sync();
      float d[32];
      th.wgmma_fence();
      th.wgmma_ss<64, 0>(d, pl.desc_a, pl.desc_b, false);
      th.wgmma_ss<64, 0>(d, pl.desc_a, pl.desc_b, true);
      th.wgmma_commit();
      th.wgmma_wait<0>();
      store_d<64>(d, th.tid(), out);
    };
    if (fence) {
      launch(1, 1, 128, pl.bytes, body);
      std::vector<double> twice = p.product;
      for (double& x : twice) x *= 2;
      EXPECT_TRUE(close(twice, out));
    } else {
      EXPECT_TRUE(throws([&] { launch(1, 1, 128, pl.bytes, body); }, "fence.proxy.async"));
    }
  }
}

}  // namespace
}  // namespace wgmma_emulation_test
}  // namespace bench::kernels
