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
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/wgmma_layout.cuh"
#include "warp_emulator.h"

namespace bench::kernels {
namespace wgmma_emulation_test {
namespace {

using emulator::EmulatedThread;
using emulator::launch;

/// Layouts of the test's shared memory.
enum class Layout { kCore, kSwizzle128 };

/// A (64 x 16) and B (16 x N) with small random bf16 values, and the float64 product.
struct Problem {
  int n;
  std::vector<uint16_t> a, b;  // row-major: A[m][k], B[k][n]
  std::vector<double> product;
  explicit Problem(int n_, unsigned seed = 7) : n(n_), a(64 * 16), b(static_cast<size_t>(16 * n_)) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& x : a) x = tile::float_to_bf16(nd(gen)).bits;
    for (auto& x : b) x = tile::float_to_bf16(nd(gen)).bits;
    product.assign(static_cast<size_t>(64 * n), 0.0);
    for (int m = 0; m < 64; ++m)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < 16; ++k)
          product[static_cast<size_t>(m * n + j)] +=
              static_cast<double>(value(a[static_cast<size_t>(m * 16 + k)])) * value(b[static_cast<size_t>(k * n + j)]);
  }
  static float value(uint16_t bits) { return tile::bf16_to_float(tile::bf16{bits}); }
};

/// Where a test puts A and B in shared memory and what the descriptors say.
struct Placement {
  uint32_t a_at = 0, b_at = 0;
  uint64_t desc_a = 0, desc_b = 0;
  bool trans_a = false, trans_b = false;
  size_t bytes = 0;
};

void put(uint8_t* shared, uint32_t at, uint16_t v) { std::memcpy(shared + at, &v, sizeof v); }

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

::testing::AssertionResult close(const std::vector<double>& ref, const std::vector<double>& got) {
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::abs(got[i] - ref[i]) <= 1e-4 + 1e-5 * std::abs(ref[i])))
      return ::testing::AssertionFailure() << "at " << i << ": " << got[i] << " vs " << ref[i];
  return ::testing::AssertionSuccess();
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
  kTransAOff                  // A placed M-major, read with the transpose bit 0
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

/// Whether f throws std::logic_error with `what` in its message (and not for another reason).
::testing::AssertionResult throws(const std::function<void()>& f, const std::string& what) {
  try {
    f();
  } catch (const std::logic_error& e) {
    if (std::string(e.what()).find(what) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "threw: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
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
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, false, Fault::kWriteSharedInFlight); },
                     "shared memory it reads changed"));
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, true, Fault::kWriteAccumulatorInFlight); },
                     "accumulator registers"));
  EXPECT_TRUE(
      throws([&] { run<64, 0>(p, Layout::kCore, true, false, Fault::kWriteARegistersInFlight); }, "A registers"));
  // A read-modify-write of the poison gives a quiet NaN, other bits: reported as a write.
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, true, Fault::kScaleAccumulatorInFlight); },
                     "accumulator registers were written while it was in flight"));
}

/// Index (row, col) of a row-major matrix `width` wide.
size_t at(int row, int width, int col) {
  return static_cast<size_t>(row) * static_cast<size_t>(width) + static_cast<size_t>(col);
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

// --- The PTX ISA's own numbers, written out here rather than taken from wgmma_layout.cuh or the
// emulator: the author of both read the ISA once, so a misreading shared by the two would pass
// every test above. Sources: PTX ISA 9.7.15.5.1.2 ("Matrix Descriptor Format", "Leading/Stride
// Dimension Byte Offset", "Canonical Layouts" and its worked examples) and CUTLASS
// cute/atom/mma_traits_sm90_gmma.hpp (ALayout_64x16, CLayout_64xN, make_gmma_desc).

/// Bit fields of a descriptor as the ISA's table gives them: start address bits 0-13, LBO 16-29,
/// SBO 32-45 (each matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4), base offset 49-51, swizzle
/// mode 62-63.
struct IsaDescriptor {
  uint32_t start, lbo, sbo, base, swizzle;  // start, lbo and sbo in bytes
  explicit IsaDescriptor(uint64_t d)
      : start(static_cast<uint32_t>(d & 0x3FFF) * 16),
        lbo(static_cast<uint32_t>((d >> 16) & 0x3FFF) * 16),
        sbo(static_cast<uint32_t>((d >> 32) & 0x3FFF) * 16),
        base(static_cast<uint32_t>((d >> 49) & 7)),
        swizzle(static_cast<uint32_t>(d >> 62)) {}
};

/// Byte address of bf16 element (mn, k) in the ISA's no-swizzle canonical layouts (T = 8):
/// K-major ((8,m),(T,2k)):((1T,SBO),(1,LBO)), MN-major ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)).
uint32_t isa_interleaved(const IsaDescriptor& d, bool mn_major, int mn, int k) {
  const auto m = static_cast<uint32_t>(mn), kk = static_cast<uint32_t>(k);
  const uint32_t elements = mn_major ? (m % 8) + 8 * (kk % 8) : 8 * (m % 8) + (kk % 8);
  return d.start + 2 * elements + (m / 8) * d.sbo + (kk / 8) * d.lbo;
}

/// CUTLASS's CLayout_64xN and ALayout_64x16 as (thread, value) -> m + 64 n (or m + 64 k):
/// thread modes (4, 8, 4) : (128, 1, 16), value modes (2, 2, N / 8) : (64, 8, 512). Value v of A
/// is half v % 2 of register v / 2 (the low half first).
int cute_index(int tid, int v) {
  return (tid % 4) * 128 + (tid / 4) % 8 + (tid / 32) * 16 + (v % 2) * 64 + ((v / 2) % 2) * 8 + (v / 4) * 512;
}

TEST(WgmmaIsa, DescriptorBitsMatchTheIsaTable) {
  static_assert(wgmma::kNoSwizzle == 0 && wgmma::kSwizzle128 == 1 && wgmma::kSwizzle64 == 2 && wgmma::kSwizzle32 == 3,
                "ISA swizzle-mode encodings");
  // start 0x1230 >> 4 = 0x123, LBO 0x100 >> 4 = 0x10 at bit 16, SBO 0x800 >> 4 = 0x80 at bit 32.
  EXPECT_EQ(wgmma::descriptor(0x1230, 0x100, 0x800), 0x0000008000100123ull);
  // 128-byte swizzle: mode 1 at bits 62-63; LBO 16 (encoded 1, "assumed 1" for K-major), SBO 1024.
  EXPECT_EQ(wgmma::descriptor(0, 16, 1024, wgmma::kSwizzle128), 0x4000004000010000ull);
  // The encode keeps 18 bits of the address: 0x40010 encodes as 1.
  EXPECT_EQ(wgmma::descriptor(0x40010, 0, 0), 1ull);
  const IsaDescriptor d(wgmma::descriptor(0x3FFF0, 0x3FFF0, 0x3FFF0, wgmma::kSwizzle32));
  EXPECT_EQ(d.start, 0x3FFF0u);
  EXPECT_EQ(d.lbo, 0x3FFF0u);
  EXPECT_EQ(d.sbo, 0x3FFF0u);
  EXPECT_EQ(d.base, 0u);
  EXPECT_EQ(d.swizzle, 3u);
}

TEST(WgmmaIsa, KernelDescriptorsAddressTheTilesItCopies) {
  // Every element a k16 step of the forward's wgmma reads, through the ISA's canonical formula
  // applied to the kernel's descriptors, is the element the copy put there (core_offset).
  const uint32_t base = 4096;
  const auto check = [&](auto d_tag) {
    constexpr int D = decltype(d_tag)::value;
    for (int kk = 0; kk < D / 16; ++kk) {
      const IsaDescriptor qk(wgmma::k_major<D>(base, kk));  // Q as A, K as B of Q K^T: 64 rows
      for (int mn = 0; mn < 64; ++mn)
        for (int k = 0; k < 16; ++k)
          ASSERT_EQ(isa_interleaved(qk, false, mn, k), base + 2 * wgmma::core_offset<D>(mn, 16 * kk + k))
              << "K-major D " << D << " kk " << kk << " (" << mn << ", " << k << ")";
    }
    for (int kk = 0; kk < 4; ++kk) {  // V as the N-major B of P V: keys along K, D columns along N
      const IsaDescriptor v(wgmma::mn_major<D>(base, kk));
      for (int n = 0; n < D; ++n)
        for (int k = 0; k < 16; ++k)
          ASSERT_EQ(isa_interleaved(v, true, n, k), base + 2 * wgmma::core_offset<D>(16 * kk + k, n))
              << "MN-major D " << D << " kk " << kk << " (" << n << ", " << k << ")";
    }
  };
  check(std::integral_constant<int, 64>{});
  check(std::integral_constant<int, 128>{});
  // dS^T of the wgmma backward (128 keys x 64 queries) as dQ's M-major A: queries along M, keys
  // along K, all 8 k16 steps of the tile.
  for (int kk = 0; kk < 8; ++kk) {
    const IsaDescriptor ds(wgmma::mn_major<64>(base, kk));
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < 16; ++k)
        ASSERT_EQ(isa_interleaved(ds, true, m, k), base + 2 * wgmma::core_offset<64>(16 * kk + k, m))
            << "dS^T kk " << kk << " (" << m << ", " << k << ")";
  }
}

/// One warpgroup computes A B (A 64 x 16, B 16 x N) with A in registers laid out by CUTLASS's
/// ALayout_64x16 (or in shared memory at `a_at`) and B in shared memory at `b_at`, both placed by
/// the ISA's canonical formula under the descriptors given, and D read back by CLayout_64xN. The
/// wgmma reads B through `read_b` when it is not 0 (a wrong descriptor for the bytes placed).
template <int N, int kTransB, int kTransA = 0>
std::vector<double> run_isa(const Problem& p, bool a_in_regs, uint64_t desc_a, uint64_t desc_b, size_t bytes,
                            uint64_t read_b = 0) {
  std::vector<uint8_t> image(bytes, 0);
  const IsaDescriptor da(desc_a), db(desc_b);
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 16; ++k)
      if (!a_in_regs) put(image.data(), isa_interleaved(da, kTransA != 0, m, k), p.a[static_cast<size_t>(m * 16 + k)]);
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < N; ++j)
      put(image.data(), isa_interleaved(db, kTransB != 0, j, k), p.b[static_cast<size_t>(k * N + j)]);
  std::vector<double> out(static_cast<size_t>(64 * N), NAN);
  launch(1, 1, 128, bytes, [&](EmulatedThread& th) {
    if (th.tid() == 0) std::memcpy(th.shared(), image.data(), bytes);
    th.sync();
    uint32_t a[4] = {};
    for (int v = 0; v < 8; ++v) {
      const int at = cute_index(th.tid(), v);
      a[v / 2] |= static_cast<uint32_t>(p.a[static_cast<size_t>((at % 64) * 16 + at / 64)]) << (16 * (v % 2));
    }
    float d[N / 2];
    const uint64_t b = read_b != 0 ? read_b : desc_b;
    th.wgmma_fence();
    if (a_in_regs)
      th.template wgmma_rs<N, kTransB>(d, a, b, false);
    else
      th.template wgmma_ss<N, kTransB, kTransA>(d, desc_a, b, false);
    th.wgmma_commit();
    th.template wgmma_wait<0>();
    for (int v = 0; v < N / 2; ++v) {
      const int at = cute_index(th.tid(), v);
      out[static_cast<size_t>((at % 64) * N + at / 64)] = d[v];
    }
  });
  return out;
}

TEST(WgmmaIsa, IsaWorkedExampleMNMajorBf16) {
  // The ISA's example "MN-Major, no-swizzling and bf16 type": ((8,1,2),(8,2)):((1,8,64),(8,128)),
  // LBO 128 bf16 (encoded 16), SBO 64 bf16 (encoded 8), as a 16 x 16 B at byte 2048.
  const uint64_t desc_b = (2048u >> 4) | uint64_t{16} << 16 | uint64_t{8} << 32;
  const Problem p(16, 21);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 16; ++n)  // the example's exact layout, element offsets
      ASSERT_EQ(isa_interleaved(IsaDescriptor(desc_b), true, n, k),
                2048u + 2u * static_cast<uint32_t>((n % 8) + 64 * (n / 8) + 8 * (k % 8) + 128 * (k / 8)));
  EXPECT_TRUE(close(p.product, run_isa<16, 1>(p, true, 0, desc_b, 4096)));
}

TEST(WgmmaIsa, StridesOppositeToTheKernelsStillMatchFloat64) {
  // LBO and SBO chosen the other way round from the forward's tiles, so an emulator that swapped
  // their meaning (for either major-ness) reads other bytes. K-major A: the 8 row groups adjacent
  // (SBO 128), the second k8 half 1024 bytes on (LBO). MN-major B: the k8 groups adjacent (LBO
  // 128), the n8 groups 256 apart (SBO). K-major B: SBO 128, LBO 16 N.
  const Problem p64(64, 23), p128(128, 23);
  const uint64_t a = wgmma::descriptor(0, 1024, 128);
  EXPECT_TRUE(close(p64.product, run_isa<64, 1>(p64, false, a, wgmma::descriptor(4096, 128, 256), 8192)));
  EXPECT_TRUE(close(p128.product, run_isa<128, 1>(p128, true, 0, wgmma::descriptor(4096, 128, 256), 8192)));
  EXPECT_TRUE(close(p64.product, run_isa<64, 0>(p64, false, a, wgmma::descriptor(4096, 16 * 64, 128), 8192)));
  EXPECT_TRUE(close(p128.product, run_isa<128, 0>(p128, true, 0, wgmma::descriptor(4096, 16 * 128, 128), 16384)));
  // M-major A the same way (the ISA's MN-major formula, as for B): the k8 groups adjacent (LBO
  // 128), the m8 groups 256 apart (SBO).
  const uint64_t at = wgmma::descriptor(0, 128, 256);
  EXPECT_TRUE(close(p64.product, run_isa<64, 1, 1>(p64, false, at, wgmma::descriptor(4096, 128, 256), 8192)));
  EXPECT_TRUE(close(p128.product, run_isa<128, 0, 1>(p128, false, at, wgmma::descriptor(4096, 16 * 128, 128), 16384)));
  // And the same bytes read with LBO and SBO swapped are wrong: the test can fail.
  EXPECT_FALSE(close(p64.product, run_isa<64, 1>(p64, false, a, wgmma::descriptor(4096, 128, 256), 8192,
                                                 wgmma::descriptor(4096, 256, 128))));
}
}  // namespace
}  // namespace wgmma_emulation_test
}  // namespace bench::kernels
