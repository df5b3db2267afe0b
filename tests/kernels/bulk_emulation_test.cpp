// The warp emulator's bulk asynchronous reductions (bulk_emulator.h) on their own: warps stage
// rows of floats in shared memory (st.shared), fence them for the async proxy and add them to
// global memory with cp.reduce.async.bulk, a row a lane, over several tiles and blocks, against
// the exact sums. And the faults it must catch: the staging rows written again before
// cp.async.bulk.wait_group.read, no fence.proxy.async between the stores and the bulk reduction,
// no __syncwarp between the other lanes' stores and the issue (their stores land under the read), a kernel that ends
// with a bulk group outstanding, a misaligned size; and the additions landing between the issue and the wait.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "emulator_test_util.h"
#include "warp_emulator.h"

namespace bench::kernels {
namespace bulk_emulation_test {
namespace {

using emulator::EmulatedThread;
using emulator::launch;
using emulator_test::throws;

constexpr int kThreads = 64, kRows = 32, kCols = 32;  // two warps, 16 rows of 32 floats each
constexpr size_t kFloats = size_t{kRows} * kCols, kStaging = kFloats * sizeof(float);
constexpr uint32_t kRowBytes = kCols * sizeof(float);

enum class Fault { kNone, kNoFence, kNoWaitRead, kNoFinalWait, kNoWarpSync, kBadSize, kNoCommit };

/// The value block b stages at (tile, row, col): small integers, so that every sum is exact.
float value(int b, int tile, int row, int col) {
  return static_cast<float>((b * 7 + tile * 5 + row * 3 + col) % 13) - 6.f;
}

/// Row `row` of a kRows x kCols destination.
float* row_of(std::vector<float>& out, int row) { return out.data() + static_cast<std::ptrdiff_t>(row) * kCols; }

/// `blocks` blocks of `tiles` tiles each add their rows to out (kRows x kCols): lane l of warp w
/// stages row 16 w + l / 2, columns 16 (l % 2) .. + 15 (8 st.shared.v2.f32), then lanes of even l
/// reduce their row (128 bytes) into out; the staging is written again after wait_group.read and a
/// barrier.
std::vector<float> run(int blocks, int tiles, Fault fault) {
  std::vector<float> out(kFloats, 0.f);
  launch(blocks, 1, kThreads, kStaging, [&](EmulatedThread& th) {
    const int warp = th.tid() / 32, lane = th.tid() % 32, row = 16 * warp + lane / 2, col0 = 16 * (lane % 2);
    const uint32_t base = th.smem_addr(th.shared());
    for (int tile = 0; tile < tiles; ++tile) {
      if (fault != Fault::kNoWaitRead) th.bulk_wait_read<0>();
      th.sync();
      for (int c = 0; c < 16; c += 2) {
        th.store_shared_v2_f32(base + static_cast<uint32_t>(row) * kRowBytes + static_cast<uint32_t>(col0 + c) * 4,
                               value(th.block_x(), tile, row, col0 + c), value(th.block_x(), tile, row, col0 + c + 1));
      }
      if (fault != Fault::kNoFence) th.fence_proxy_async();
      if (fault != Fault::kNoWarpSync) th.warp_sync();
      if (lane % 2 == 0) {
        const uint32_t bytes = fault == Fault::kBadSize ? 120 : kRowBytes;
        th.bulk_reduce_add(row_of(out, row), base + static_cast<uint32_t>(row) * kRowBytes, bytes);
      }
      if (fault != Fault::kNoCommit) th.bulk_commit();
    }
    if (fault != Fault::kNoFinalWait) th.bulk_wait<0>();
  });
  return out;
}

TEST(BulkEmulation, RowsSumOverTilesAndBlocks) {
  const int blocks = 3, tiles = 4;
  const std::vector<float> out = run(blocks, tiles, Fault::kNone);
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) {
      double want = 0;
      for (int b = 0; b < blocks; ++b)
        for (int t = 0; t < tiles; ++t) want += value(b, t, r, c);
      ASSERT_EQ(out[static_cast<size_t>(r) * kCols + static_cast<size_t>(c)], want) << r << ", " << c;
    }
}

TEST(BulkEmulation, FaultsAreCaught) {
  EXPECT_TRUE(throws([] { run(1, 1, Fault::kNoFence); }, "no fence.proxy.async made visible"));
  EXPECT_TRUE(throws([] { run(1, 3, Fault::kNoWaitRead); }, "written again before its cp.async.bulk.wait_group.read"));
  // Without the __syncwarp the issuing lane reads its row before its neighbour stored its half
  // (the fibers of a warp run in turn between its barriers); its wait_group.read lets the other
  // threads run first (FiberTeam::yield_last), the neighbour's stores land under the read in
  // flight, and the wait sees its source changed.
  EXPECT_TRUE(throws([] { run(1, 2, Fault::kNoWarpSync); }, "written again before its cp.async.bulk.wait_group.read"));
  EXPECT_TRUE(throws([] { run(1, 2, Fault::kNoFinalWait); }, "ended with a bulk reduction outstanding"));
  EXPECT_TRUE(throws([] { run(1, 1, Fault::kNoCommit); }, "ended with a bulk reduction outstanding"));
  EXPECT_TRUE(throws([] { run(1, 1, Fault::kBadSize); }, "not a multiple of 16"));
}

// The additions land after the issue, at the commit or only at the wait (by turns): a thread
// that reads its row's destination between the commit and the wait sees either, never the sum before
// the issue; after wait_group 0 every lane sees it.
TEST(BulkEmulation, AdditionsLandBetweenTheIssueAndTheWait) {
  std::vector<float> out(kFloats, 0.f);
  int before_issue = 0, early = 0, late = 0, after_wait = 0;
  launch(1, 1, kRows, kStaging, [&](EmulatedThread& th) {
    const int row = th.tid();
    const uint32_t at = th.smem_addr(th.shared()) + static_cast<uint32_t>(row) * kRowBytes;
    {
      for (int c = 0; c < kCols; c += 2) th.store_shared_v2_f32(at + 4 * static_cast<uint32_t>(c), 1.f, 1.f);
      th.fence_proxy_async();
      before_issue += row_of(out, row)[0] != 0.f;
      th.bulk_reduce_add(row_of(out, row), at, kRowBytes);
      th.bulk_commit();
      (row_of(out, row)[0] == 1.f ? early : late) += 1;
      th.bulk_wait<0>();
      after_wait += row_of(out, row)[kCols - 1] == 1.f;
    }
  });
  EXPECT_EQ(before_issue, 0);
  EXPECT_GT(early, 0);
  EXPECT_GT(late, 0);
  EXPECT_EQ(early + late, kRows);
  EXPECT_EQ(after_wait, kRows);
}

// wait_group.read 1 completes the reads of all but the newest group: the older group's staging
// may then be written, the newer one's not.
TEST(BulkEmulation, WaitGroupReadLeavesTheNewestGroupsInFlight) {
  const auto two_groups = [](bool write_newer) {
    std::vector<float> out(2 * size_t{kCols}, 0.f);
    launch(1, 1, 32, 2 * size_t{kRowBytes}, [&](EmulatedThread& th) {
      if (th.tid() != 0) return;
      const uint32_t base = th.smem_addr(th.shared()), row_bytes = kRowBytes;
      for (int r = 0; r < 2; ++r) {
        for (int c = 0; c < kCols; ++c) th.store_shared_b32(base + r * row_bytes + 4 * static_cast<uint32_t>(c), 0);
        th.fence_proxy_async();
        th.bulk_reduce_add(row_of(out, r), base + r * row_bytes, row_bytes);
        th.bulk_commit();
      }
      th.bulk_wait_read<1>();
      th.store_shared_b32(base + (write_newer ? row_bytes : 0), 0x3f800000u);
      th.bulk_wait<0>();
    });
  };
  EXPECT_NO_THROW(two_groups(false));
  EXPECT_TRUE(throws([&] { two_groups(true); }, "written again before"));
}

}  // namespace
}  // namespace bulk_emulation_test
}  // namespace bench::kernels
