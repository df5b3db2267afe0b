// The warp emulator's TMA (tests/kernels/warp_emulator.h, mbarrier_emulator.h) against the PTX ISA: mbarrier
// transaction counts (9.7.13.15: a phase completes when its pending arrivals and its transaction
// count are both 0), cp.async.bulk.tensor's box (9.7.9.25: out-of-bounds elements zeros, the
// 128-byte swizzle: chunk c of 128-byte row r at c ^ (r % 8)), a destination unreadable until the
// phase that counts its bytes completes, an expect_tx short of the bytes (early completion) or
// past them (a hang, reported); the 128-byte swizzled descriptor convention of wgmma_layout.cuh
// (k_major_sw128, mn_major_sw128) on tiles that TMA wrote, with the faults it must reject (SBO off
// by an atom, LBO off, the XOR missing on one side); and the flash forward's tensor map
// (tma_map.h) against the constraints of cuTensorMapEncodeTiled (CUDA driver API 6.30).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/flash_attention_wgmma_kernels.cuh"
#include "cuda/tma_map.h"
#include "cuda/wgmma_layout.cuh"
#include "warp_emulator.h"

namespace bench::kernels {
namespace tma_emulation_test {
namespace {

using emulator::EmulatedThread;
using emulator::launch;

/// A rank-4 map of a row-major [rows][cols] bf16 matrix as (cols, 1, rows, 1), boxes of 64
/// columns and `box_rows` rows, 128-byte swizzle: the shape of tma::flash_tensor_map's.
tma::TensorMapArgs matrix_map(const uint16_t* data, uint64_t rows, uint64_t cols, uint32_t box_rows) {
  tma::TensorMapArgs m;
  m.rank = 4;
  m.global = data;
  m.dims[0] = cols;
  m.dims[1] = 1;
  m.dims[2] = rows;
  m.dims[3] = 1;
  m.strides[0] = cols * 2;
  m.strides[1] = cols * 2;
  m.strides[2] = rows * cols * 2;
  m.box[0] = 64;
  m.box[1] = 1;
  m.box[2] = box_rows;
  m.box[3] = 1;
  for (uint32_t& e : m.element_strides) e = 1;
  return m;
}

/// Index of (row, col) in a row-major matrix of `cols` columns.
size_t idx(int row, int col, int cols) {
  return static_cast<size_t>(row) * static_cast<size_t>(cols) + static_cast<size_t>(col);
}

uint16_t at(const uint8_t* shared, uint32_t byte) {
  uint16_t v = 0;
  std::memcpy(&v, shared + byte, sizeof v);
  return v;
}

/// Where the ISA puts element (row, col) of a box of 64 columns (128 bytes a row) in the 128-byte
/// swizzle, written out from the ISA's words (not through wgmma::sw128_offset).
uint32_t isa_swizzled(int row, int col) {
  return static_cast<uint32_t>(row * 128 + (((col / 8) ^ (row % 8)) * 16) + (col % 8) * 2);
}

TEST(TmaEmulation, Sw128OffsetIsTheIsaChunkXor) {
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < 128; ++c) {
      ASSERT_EQ(wgmma::sw128_offset<128>(r, c), static_cast<uint32_t>((c / 64) * 128 * 128) + isa_swizzled(r, c % 64))
          << r << ", " << c;
      ASSERT_EQ(wgmma::sw128_offset<64>(r % 64, c),
                static_cast<uint32_t>((c / 64) * 64 * 128) + isa_swizzled(r % 64, c % 64));
    }
}

// Three boxes of 8 rows of a 5 x 64 matrix: rows 0..7 (rows 5..7 past the end: zeros), rows
// -3..4 (the first three before the start: zeros), and batch 1 of a tensor with one batch (all
// zeros); in the swizzle, and poison (0xffff) until the phase completes.
TEST(TmaEmulation, LoadSwizzlesTheBoxAndZeroFillsOutOfBounds) {
  std::vector<uint16_t> global(size_t{5} * 64);
  for (size_t i = 0; i < global.size(); ++i) global[i] = static_cast<uint16_t>(i + 1);
  const tma::TensorMapArgs map = matrix_map(global.data(), 5, 64, 8);
  ASSERT_EQ(tma::box_bytes(map), 1024u);
  std::vector<uint16_t> before;
  std::vector<uint8_t> after;
  launch(1, 1, 32, 4096, [&](EmulatedThread& th) {
    if (th.tid() == 0) th.mbar_init(3072, 1);
    th.sync();
    if (th.tid() == 0) {
      th.mbar_arrive_expect_tx(3072, 3 * 1024);
      th.tma_load_4d(0, &map, 0, 0, 0, 0, 3072);
      th.tma_load_4d(1024, &map, 0, 0, -3, 0, 3072);
      th.tma_load_4d(2048, &map, 0, 0, 0, 1, 3072);
      for (uint32_t b = 0; b < 3072; b += 2) before.push_back(at(th.shared(), b));  // no thread has waited yet
      th.mbar_wait(3072, 0);
      after.assign(th.shared(), th.shared() + 3072);
    }
  });
  for (const uint16_t v : before) ASSERT_EQ(v, 0xffff);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 64; ++c) {
      const uint16_t want0 = r < 5 ? global[idx(r, c, 64)] : 0;
      const uint16_t want1 = r >= 3 ? global[idx(r - 3, c, 64)] : 0;
      EXPECT_EQ(at(after.data(), isa_swizzled(r, c)), want0) << r << ", " << c;
      EXPECT_EQ(at(after.data(), 1024 + isa_swizzled(r, c)), want1) << r << ", " << c;
      EXPECT_EQ(at(after.data(), 2048 + isa_swizzled(r, c)), 0) << r << ", " << c;
    }
}

// A phase needs both: with every byte counted but an arrival missing it never completes (the
// waiters' hang is an exception), nor with every arrival made but bytes missing; with both it does.
TEST(TmaEmulation, PhaseNeedsArrivalsAndBytes) {
  std::vector<uint16_t> global(size_t{8} * 64, 7);
  const tma::TensorMapArgs map = matrix_map(global.data(), 8, 64, 8);
  const auto run = [&](bool second_arrival, uint32_t expect) {
    launch(1, 1, 64, 2048, [&](EmulatedThread& th) {
      if (th.tid() == 0) th.mbar_init(1024, 2);
      th.sync();
      if (th.tid() == 0) {
        th.mbar_arrive_expect_tx(1024, expect);
        th.tma_load_4d(0, &map, 0, 0, 0, 0, 1024);
        if (second_arrival) th.mbar_arrive(1024);
      }
      th.mbar_wait(1024, 0);
    });
  };
  EXPECT_NO_THROW(run(true, 1024));
  EXPECT_THROW(run(false, 1024), std::logic_error);
  EXPECT_THROW(run(true, 2048), std::logic_error);
}

// expect_tx short of the bytes: the phase completes after that many, the rest of the box stays
// poisoned (it belongs to the next phase, which never completes: a violation at the block's end).
// Past them: the waiters hang, reported as an exception.
TEST(TmaEmulation, WrongExpectTxIsCaught) {
  std::vector<uint16_t> global(size_t{8} * 64, 0x3f80);
  const tma::TensorMapArgs map = matrix_map(global.data(), 8, 64, 8);
  std::vector<uint16_t> seen;
  try {
    launch(1, 1, 32, 2048, [&](EmulatedThread& th) {
      if (th.tid() == 0) th.mbar_init(1024, 1);
      th.sync();
      if (th.tid() == 0) {
        th.mbar_arrive_expect_tx(1024, 512);
        th.tma_load_4d(0, &map, 0, 0, 0, 0, 1024);
      }
      th.mbar_wait(1024, 0);
      if (th.tid() == 0)
        for (uint32_t b = 0; b < 1024; b += 2) seen.push_back(at(th.shared(), b));
    });
    ADD_FAILURE() << "no violation";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("transaction bytes outstanding"), std::string::npos) << e.what();
  }
  ASSERT_EQ(seen.size(), 512u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i < 256 ? 0x3f80 : 0xffff) << i;
  EXPECT_THROW(launch(1, 1, 32, 2048,
                      [&](EmulatedThread& th) {
                        if (th.tid() == 0) th.mbar_init(1024, 1);
                        th.sync();
                        if (th.tid() == 0) {
                          th.mbar_arrive_expect_tx(1024, 2048);
                          th.tma_load_4d(0, &map, 0, 0, 0, 0, 1024);
                        }
                        th.mbar_wait(1024, 0);
                      }),
               std::logic_error);
  // A destination off the 1024-byte atoms is refused.
  EXPECT_THROW(launch(1, 1, 32, 4096,
                      [&](EmulatedThread& th) {
                        if (th.tid() == 0) th.mbar_init(3072, 1);
                        th.sync();
                        if (th.tid() == 0) {
                          th.mbar_arrive_expect_tx(3072, 1024);
                          th.tma_load_4d(512, &map, 0, 0, 0, 0, 3072);
                        }
                        th.mbar_wait(3072, 0);
                      }),
               std::logic_error);
}

/// Faults of the swizzled operands: none, K-major SBO off by an atom, MN-major LBO off (one atom
/// instead of a column block), the tiles written without the XOR (by the test, not by TMA) for
/// descriptors that expect it, and the wgmma issued before the mbarrier wait.
enum class Fault { kNone, kSboOff, kLboOff, kNoXor, kNoWait };

/// X (64 x 128) and Y (64 x 128) by TMA into 128-byte swizzled tiles (two boxes of 64 columns
/// each), then by one warpgroup S = X Y^T (8 wgmma m64n64k16, both K-major) and O = X[:, :64] Y
/// (4 wgmma m64n128k16, Y MN-major), against float64. Returns the largest error relative to the
/// largest |reference|; throws what the emulator reports.
double swizzled_products(Fault fault) {
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> x(size_t{64} * 128), y(size_t{64} * 128);
  for (auto& v : x) v = tile::float_to_bf16(nd(gen)).bits;
  for (auto& v : y) v = tile::float_to_bf16(nd(gen)).bits;
  const tma::TensorMapArgs mx = matrix_map(x.data(), 64, 128, 64), my = matrix_map(y.data(), 64, 128, 64);
  constexpr uint32_t kX = 0, kY = 16384, kBar = 32768;
  std::vector<float> s(size_t{64} * 64), o(size_t{64} * 128);
  launch(1, 1, 128, kBar + 8, [&](EmulatedThread& th) {
    if (th.tid() == 0) th.mbar_init(kBar, 1);
    th.sync();
    if (fault == Fault::kNoXor) {
      // Row-major 128-byte rows per column block, no XOR: what a copy that forgot the swizzle writes.
      if (th.tid() == 0)
        for (int r = 0; r < 64; ++r)
          for (int c = 0; c < 128; ++c) {
            const auto off = static_cast<uint32_t>((c / 64) * 8192 + r * 128 + (c % 64) * 2);
            std::memcpy(th.shared() + kX + off, &x[idx(r, c, 128)], 2);
            std::memcpy(th.shared() + kY + off, &y[idx(r, c, 128)], 2);
          }
      th.sync();
    } else {
      if (th.tid() == 0) {
        th.mbar_arrive_expect_tx(kBar, 4 * 8192);
        for (int c = 0; c < 2; ++c) {
          th.tma_load_4d(kX + c * 8192, &mx, 64 * c, 0, 0, 0, kBar);
          th.tma_load_4d(kY + c * 8192, &my, 64 * c, 0, 0, 0, kBar);
        }
      }
      if (fault != Fault::kNoWait) th.mbar_wait(kBar, 0);
    }
    float d_s[32] = {}, d_o[64] = {};
    th.wgmma_fence();
    for (int kk = 0; kk < 8; ++kk) {
      uint64_t da = wgmma::k_major_sw128<64>(kX, kk), db = wgmma::k_major_sw128<64>(kY, kk);
      if (fault == Fault::kSboOff) {
        const uint32_t start = kX + static_cast<uint32_t>(kk / 4) * 8192u + static_cast<uint32_t>(kk % 4) * 32u;
        da = wgmma::descriptor(start, 16, 2048, wgmma::kSwizzle128);
      }
      th.wgmma_ss<64, 0>(d_s, da, db, kk > 0);
    }
    for (int kk = 0; kk < 4; ++kk) {
      uint64_t db = wgmma::mn_major_sw128<64>(kY, kk);
      if (fault == Fault::kLboOff)
        db = wgmma::descriptor(kY + static_cast<uint32_t>(kk) * 2048u, 1024, 1024, wgmma::kSwizzle128);
      th.wgmma_ss<128, 1>(d_o, wgmma::k_major_sw128<64>(kX, kk), db, kk > 0);
    }
    th.wgmma_commit();
    th.wgmma_wait<0>();
    if (fault == Fault::kNoWait) th.mbar_wait(kBar, 0);  // so that the launch ends; the reads came before
    const int warp = th.tid() / 32, g = (th.tid() % 32) / 4, t = th.tid() % 4;
    for (int i = 0; i < 32; ++i) s[idx(16 * warp + g + 8 * ((i % 4) / 2), 8 * (i / 4) + 2 * t + i % 2, 64)] = d_s[i];
    for (int i = 0; i < 64; ++i) o[idx(16 * warp + g + 8 * ((i % 4) / 2), 8 * (i / 4) + 2 * t + i % 2, 128)] = d_o[i];
  });
  const auto f = [](uint16_t v) { return static_cast<double>(tile::bf16_to_float(tile::bf16{v})); };
  double worst = 0, largest = 0;
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < 64; ++n) {
      double ref = 0;
      for (int k = 0; k < 128; ++k) ref += f(x[idx(m, k, 128)]) * f(y[idx(n, k, 128)]);
      largest = std::max(largest, std::abs(ref));
      worst = std::max(worst, std::abs(ref - s[idx(m, n, 64)]));
    }
    for (int n = 0; n < 128; ++n) {
      double ref = 0;
      for (int k = 0; k < 64; ++k) ref += f(x[idx(m, k, 128)]) * f(y[idx(k, n, 128)]);
      largest = std::max(largest, std::abs(ref));
      worst = std::max(worst, std::abs(ref - o[idx(m, n, 128)]));
    }
  }
  return std::isnan(worst) ? INFINITY : worst / largest;
}

TEST(TmaEmulation, SwizzledDescriptorsReadWhatTmaWrote) { EXPECT_LT(swizzled_products(Fault::kNone), 1e-5); }

TEST(TmaEmulation, WrongSwizzleConventionFails) {
  EXPECT_GT(swizzled_products(Fault::kSboOff), 0.1);
  EXPECT_GT(swizzled_products(Fault::kLboOff), 0.1);
  EXPECT_GT(swizzled_products(Fault::kNoXor), 0.1);
}

TEST(TmaEmulation, WgmmaBeforeTheWaitIsCaught) {
  try {
    swizzled_products(Fault::kNoWait);
    ADD_FAILURE() << "no violation";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("TMA"), std::string::npos) << e.what();
  }
}

// The flash forward's tensor map against cuTensorMapEncodeTiled's documented requirements, for
// the shape and the emulation's; and its strides address qkv's layout
// ([batch, time, n_heads + 2 n_kv, d_head], as flash_forward_wgmma reads it with cp.async).
TEST(TmaEmulation, FlashTensorMapMeetsTheEncodeConstraints) {
  struct Shape {
    int64_t batch, seq;
    int n_h, n_kv, d;
  };
  alignas(16) static const uint16_t base[8] = {};
  for (const Shape& sh : {Shape{4, 4096, 16, 16, 128}, Shape{2, 150, 1, 1, 64}, Shape{1, 130, 2, 1, 128},
                          Shape{1, 90, 4, 2, 64}, Shape{8, 32768, 32, 8, 128}}) {
    const tma::TensorMapArgs m = tma::flash_tensor_map(base, sh.batch, sh.seq, sh.n_h, sh.n_kv, sh.d);
    EXPECT_EQ(m.data_type, 9u);  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    ASSERT_TRUE(m.rank >= 1 && m.rank <= 5);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.global) % 16, 0u);  // 16-byte aligned (32 with interleave 32B)
    for (uint32_t i = 0; i < m.rank; ++i) {
      EXPECT_TRUE(m.dims[i] >= 1 && m.dims[i] <= (uint64_t{1} << 32)) << i;
      EXPECT_TRUE(m.box[i] >= 1 && m.box[i] <= 256) << i;
      EXPECT_TRUE(m.element_strides[i] >= 1 && m.element_strides[i] <= 8) << i;
    }
    for (uint32_t i = 0; i + 1 < m.rank; ++i) {
      EXPECT_EQ(m.strides[i] % 16, 0u) << i;
      EXPECT_LT(m.strides[i], uint64_t{1} << 40) << i;
    }
    // Interleave none: the inner box dimension in bytes a multiple of 16, and within the
    // swizzle's span (128 bytes for CU_TENSOR_MAP_SWIZZLE_128B).
    EXPECT_EQ(m.interleave, tma::kInterleaveNone);
    EXPECT_EQ(m.swizzle, tma::kSwizzle128B);
    EXPECT_EQ(m.box[0] * m.element_bytes % 16, 0u);
    EXPECT_LE(m.box[0] * m.element_bytes, 128u);
    EXPECT_EQ(m.oob_fill, tma::kOobFillNone);
    EXPECT_EQ(m.l2_promotion, tma::kL2Promotion128B);
    // Element (column, head, row, batch) lands where the kernels' pointer arithmetic puts it.
    const int64_t width = static_cast<int64_t>(sh.n_h + 2 * sh.n_kv) * sh.d;
    const int64_t col = sh.d - 1, head = sh.n_h + 2 * sh.n_kv - 1, row = sh.seq - 1, batch = sh.batch - 1;
    const uint64_t bytes = static_cast<uint64_t>(col) * m.element_bytes + static_cast<uint64_t>(head) * m.strides[0] +
                           static_cast<uint64_t>(row) * m.strides[1] + static_cast<uint64_t>(batch) * m.strides[2];
    EXPECT_EQ(bytes, static_cast<uint64_t>(((batch * sh.seq + row) * width + head * sh.d + col) * 2));
    EXPECT_EQ(m.dims[2],
              static_cast<uint64_t>(sh.seq));  // a sequence's own bound: its last tile's rows past it are zeros
  }
  // The shared-memory destinations: every tile of the TMA variant starts on a 1024-byte atom
  // (the 128-byte swizzle's requirement) from the aligned base.
  for (const int rows : {flash::kFwdBlockM, flash::kBlockN}) {
    EXPECT_EQ(flash::wgmma_tma_tile_bytes<64>(rows) % wgmma::kSw128Atom, 0u);
    EXPECT_EQ(flash::wgmma_tma_tile_bytes<128>(rows) % wgmma::kSw128Atom, 0u);
  }
}

}  // namespace
}  // namespace tma_emulation_test
}  // namespace bench::kernels
