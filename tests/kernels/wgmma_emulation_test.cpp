// The warp emulator's wgmma (wgmma_emulator.h) on its own: one warpgroup multiplies a 64 x 16 A
// (shared memory or registers) by a 16 x N B in shared memory through matrix descriptors, in
// the layouts of kernels/cuda/wgmma_layout.cuh and in 128-byte swizzled layouts built here
// independently, against a float64 product. And the faults it must catch: a wrong descriptor
// stride, D read before its wait, a missing wgmma.fence or fence.proxy.async, shared memory or
// accumulators changed while a wgmma is in flight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/wgmma_layout.cuh"
#include "warp_emulator.h"

namespace bench::kernels {
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
  bool trans_b = false;
  size_t bytes = 0;
};

void put(uint8_t* shared, uint32_t at, uint16_t v) { std::memcpy(shared + at, &v, sizeof v); }

/// Byte offset of (row, col) in a 128-byte swizzled tile of rows of 64 bf16 (128 bytes): the
/// 16-byte chunk col / 8 of row r moves to chunk (col / 8) ^ (r % 8) (CUTLASS's Swizzle<3, 4, 3>
/// on a 1024-byte aligned atom, written out directly rather than through the emulator's decoder).
uint32_t swizzled(int row, int col) {
  return static_cast<uint32_t>(row * 128 + (((col / 8) ^ (row % 8)) * 16) + (col % 8) * 2);
}

/// Writes A (always K-major) and B (K-major, or MN-major when trans_b) and returns the placement.
template <int N>
Placement place(uint8_t* shared, const Problem& p, Layout layout, bool trans_b) {
  Placement pl;
  pl.trans_b = trans_b;
  pl.a_at = 0;
  pl.b_at = 8192;  // past A's 64 rows of 128 bytes (swizzled); 1024-byte aligned
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 16; ++k) {
      const uint16_t v = p.a[static_cast<size_t>(m * 16 + k)];
      if (layout == Layout::kCore)
        put(shared, pl.a_at + 2 * static_cast<uint32_t>(wgmma::core_offset<16>(m, k)), v);
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
    pl.desc_a = wgmma::k_major<16>(pl.a_at, 0);
    pl.desc_b = trans_b ? wgmma::mn_major<N>(pl.b_at, 0) : wgmma::k_major<16>(pl.b_at, 0);
  } else {
    // K-major: rows 128 bytes apart, 8-row groups 1024 (SBO); MN-major: 8-row groups along K
    // 1024 apart (SBO), groups of 64 along N 2048 (LBO).
    pl.desc_a = wgmma::descriptor(pl.a_at, 16, 1024, wgmma::kSwizzle128);
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
  kWriteARegistersInFlight
};

/// One warpgroup: places the operands (thread 0, plain stores), then d = A B (+ d0 when
/// `accumulate`, d0 = 1 everywhere) by one wgmma.
template <int N, int kTransB>
std::vector<double> run(const Problem& p, Layout layout, bool a_in_regs, bool accumulate = false,
                        Fault fault = Fault::kNone, uint32_t wrong_sbo = 0) {
  std::vector<double> out(static_cast<size_t>(64 * N), NAN);
  std::vector<uint8_t> probe(1 << 16, 0);
  const Placement pl = place<N>(probe.data(), p, layout, kTransB != 0);
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
    } else {
      th.template wgmma_ss<N, kTransB>(d, pl.desc_a, desc_b, accumulate);
    }
    th.wgmma_commit();
    if (fault == Fault::kReadBeforeWait) store_d<N>(d, th.tid(), out);
    if (fault == Fault::kWriteSharedInFlight && th.tid() == 0) th.shared()[pl.b_at] ^= 1;
    if (fault == Fault::kWriteAccumulatorInFlight) d[0] = 2.f;
    if (fault == Fault::kWriteARegistersInFlight) a[0] ^= 1;
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
  // D read before the wait: the old values (1), not the product.
  EXPECT_FALSE(close(p.product, run<64, 0>(p, Layout::kCore, false, false, Fault::kReadBeforeWait)));
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, false, Fault::kNoFence); }, "without a wgmma.fence"));
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, false, Fault::kWriteSharedInFlight); },
                     "shared memory it reads changed"));
  EXPECT_TRUE(throws([&] { run<64, 0>(p, Layout::kCore, false, true, Fault::kWriteAccumulatorInFlight); },
                     "accumulator registers"));
  EXPECT_TRUE(
      throws([&] { run<64, 0>(p, Layout::kCore, true, false, Fault::kWriteARegistersInFlight); }, "A registers"));
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
}  // namespace bench::kernels
