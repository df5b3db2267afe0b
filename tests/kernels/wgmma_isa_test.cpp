// The wgmma emulator (wgmma_emulator.h) against the PTX ISA's own numbers, written out here
// rather than taken from wgmma_layout.cuh or the emulator: the author of both read the ISA once,
// so a misreading shared by the two would pass every test of wgmma_emulation_test.cpp. Sources:
// PTX ISA 9.7.15.5.1.2 ("Matrix Descriptor Format", "Leading/Stride Dimension Byte Offset",
// "Canonical Layouts" and its worked examples) and CUTLASS cute/atom/mma_traits_sm90_gmma.hpp
// (ALayout_64x16, CLayout_64xN, make_gmma_desc).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "cuda/wgmma_layout.cuh"
#include "warp_emulator.h"
#include "wgmma_test_util.h"

namespace bench::kernels {
namespace wgmma_isa_test {
namespace {

using emulator::EmulatedThread;
using emulator::launch;
using wgmma_test::close;
using wgmma_test::Problem;
using wgmma_test::put;

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
}  // namespace wgmma_isa_test
}  // namespace bench::kernels
