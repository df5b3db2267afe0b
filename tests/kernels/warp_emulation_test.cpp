// The warp emulator's own semantics (tests/kernels/warp_emulator.h) against the PTX ISA, apart from
// the kernels that run on it: mma.sync.m16n8k16's and ldmatrix's fragments ("Matrix fragments for
// mma.m16n8k16", "ldmatrix"), cp.async landing as early or as late as the ISA allows and its zero
// fill, and the order in which warps run between two barriers. The kernels' tests check the
// emulator only where a kernel and the emulator disagree; a layout that both got wrong alike, or an
// emulator that no longer lands a copy early or shuffles the warps, would let a kernel's missing
// wait or barrier pass (scripts/mutants.py's emu_* mutants).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "warp_emulator.h"

namespace bench::kernels {
namespace {

using emulator::EmulatedThread;
using emulator::launch;

uint16_t emu_bf16(float x) { return tile::float_to_bf16(x).bits; }
// Two bf16 in a register, the lower index in the lower half: the ISA's rule, written here rather
// than taken from the kernels' flash::pack_floats, so that the test does not share it with them.
uint32_t emu_pack(float lo, float hi) {
  return static_cast<uint32_t>(emu_bf16(lo)) | (static_cast<uint32_t>(emu_bf16(hi)) << 16);
}

// D = A B + C for A 16 x 16, B 16 x 8 of small integers (every product and sum exact in float),
// each lane's fragments built from the ISA's table with g = lane / 4, t = lane % 4: a0 = A(g,
// 2t..2t+1), a1 = A(g+8, 2t..), a2 = A(g, 2t+8..), a3 = A(g+8, 2t+8..); b0 = B(2t..2t+1, g), b1 =
// B(2t+8.., g); d0, d1 = D(g, 2t..2t+1), d2, d3 = D(g+8, 2t..2t+1). The lower index in the lower
// half of a register.
TEST(WarpEmulation, MmaFollowsTheIsaFragmentLayout) {
  float a[16][16], b[16][8], c[16][8];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) a[i][k] = static_cast<float>((i * 7 + k * 3) % 9 - 4);
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 8; ++j) b[k][j] = static_cast<float>((k * 5 + j * 11) % 7 - 3);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) c[i][j] = static_cast<float>(100 * i + j);
  float got[16][8] = {};
  launch(1, 1, 32, 0, [&](EmulatedThread& th) {
    const int g = th.tid() / 4, t = th.tid() % 4;
    const uint32_t af[4] = {emu_pack(a[g][2 * t], a[g][2 * t + 1]), emu_pack(a[g + 8][2 * t], a[g + 8][2 * t + 1]),
                            emu_pack(a[g][2 * t + 8], a[g][2 * t + 9]),
                            emu_pack(a[g + 8][2 * t + 8], a[g + 8][2 * t + 9])};
    float d[4] = {c[g][2 * t], c[g][2 * t + 1], c[g + 8][2 * t], c[g + 8][2 * t + 1]};
    th.mma(d, af, emu_pack(b[2 * t][g], b[2 * t + 1][g]), emu_pack(b[2 * t + 8][g], b[2 * t + 9][g]));
    got[g][2 * t] = d[0];
    got[g][2 * t + 1] = d[1];
    got[g + 8][2 * t] = d[2];
    got[g + 8][2 * t + 1] = d[3];
  });
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double want = c[i][j];
      for (int k = 0; k < 16; ++k) want += static_cast<double>(a[i][k]) * b[k][j];
      EXPECT_EQ(got[i][j], want) << "D(" << i << ", " << j << ")";
    }
}

// ldmatrix.x4: lane L gives the address of row L % 8 of matrix L / 8 (here each row its own
// array, handed out in a scrambled order); every lane receives, of each matrix m, the elements
// (lane / 4, 2 (lane % 4)) and (lane / 4, 2 (lane % 4) + 1), and with .trans those of the
// transpose: (2 (lane % 4), lane / 4) and (2 (lane % 4) + 1, lane / 4).
TEST(WarpEmulation, LdmatrixFollowsTheIsa) {
  // Row r of matrix m holds m * 64 + r * 8 + col (exact in bf16 below 256).
  std::vector<std::vector<uint16_t>> rows(32, std::vector<uint16_t>(8));
  const auto at = [](int lane) { return (lane * 13 + 5) % 32; };  // the array lane L points to
  for (int lane = 0; lane < 32; ++lane)
    for (int col = 0; col < 8; ++col)
      rows[static_cast<size_t>(at(lane))][static_cast<size_t>(col)] = emu_bf16(static_cast<float>(lane * 8 + col));
  uint32_t got[2][32][4] = {};
  launch(1, 1, 32, 0, [&](EmulatedThread& th) {
    const uint16_t* row = rows[static_cast<size_t>(at(th.tid()))].data();
    th.ldmatrix_x4(got[0][th.tid()], row);
    th.ldmatrix_x4_trans(got[1][th.tid()], row);
  });
  const auto value = [](int m, int r, int col) { return uint32_t{emu_bf16(static_cast<float>(m * 64 + r * 8 + col))}; };
  for (int lane = 0; lane < 32; ++lane)
    for (int m = 0; m < 4; ++m) {
      const int g = lane / 4, t = lane % 4;
      EXPECT_EQ(got[0][lane][m], value(m, g, 2 * t) | value(m, g, 2 * t + 1) << 16) << "lane " << lane << ", m " << m;
      EXPECT_EQ(got[1][lane][m], value(m, 2 * t, g) | value(m, 2 * t + 1, g) << 16)
          << ".trans: lane " << lane << ", m " << m;
    }
}

// cp.async: a group may land at its commit or only at the wait that lets it go, so a read of the
// destination before the wait finds the copy in some threads and the old bytes in others;
// cp.async.wait_group 1 lands all but the newest group, 0 all; a copy that is not valid writes
// zeros.
TEST(WarpEmulation, CpAsyncLandsAsEarlyOrAsLateAsAllowed) {
  constexpr int kThreads = 64;
  std::vector<uint16_t> src(kThreads * 8 * 2);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i + 1);
  int early[2] = {}, landed_after_wait1 = 0, second_after_wait1 = 0, landed_after_wait0 = 0, zeroed = 0;
  launch(1, 1, kThreads, 3 * kThreads * 16, [&](EmulatedThread& th) {
    uint8_t* mine = th.shared() + 16 * th.tid();
    uint8_t* second = mine + kThreads * 16;
    uint8_t* zero = second + kThreads * 16;
    std::memset(mine, 0xff, 16);
    std::memset(second, 0xff, 16);
    std::memset(zero, 0xff, 16);
    const uint16_t* from = src.data() + 8 * th.tid();
    const uint16_t* from2 = from + kThreads * 8;
    const auto landed = [](const uint8_t* p, const uint16_t* want) { return std::memcmp(p, want, 16) == 0; };
    th.cp_async_16(mine, from, true);
    th.cp_async_commit();
    early[0] += landed(mine, from);
    th.cp_async_16(second, from2, true);
    th.cp_async_16(zero, from, false);
    th.cp_async_commit();
    early[1] += landed(second, from2);
    th.cp_async_wait(1);
    landed_after_wait1 += landed(mine, from);
    second_after_wait1 += landed(second, from2);
    th.cp_async_wait(0);
    landed_after_wait0 += landed(second, from2);
    const uint8_t zeros[16] = {};
    zeroed += std::memcmp(zero, zeros, 16) == 0;
  });
  for (int group = 0; group < 2; ++group) {
    EXPECT_GT(early[group], 0) << "group " << group << ": no copy landed before its wait";
    EXPECT_LT(early[group], kThreads) << "group " << group << ": every copy landed at its commit";
  }
  EXPECT_EQ(landed_after_wait1, kThreads);
  EXPECT_LT(second_after_wait1, kThreads) << "wait_group 1 landed the newest group everywhere";
  EXPECT_EQ(landed_after_wait0, kThreads);
  EXPECT_EQ(zeroed, kThreads);
}

// Between two __syncthreads one warp at a time does all its work (its 32 lanes one after the
// other), and the warps go in a new order after each barrier: over 8 phases of 4 warps, each
// phase's log is 4 runs of one warp's 32 lanes, and the orders are not all the same.
TEST(WarpEmulation, WarpsRunOneAtATimeInANewOrderEachPhase) {
  constexpr int kPhases = 8;
  std::vector<int> log;
  launch(1, 1, 128, 0, [&](EmulatedThread& th) {
    for (int phase = 0; phase < kPhases; ++phase) {
      th.sync();
      log.push_back(th.tid());
    }
  });
  ASSERT_EQ(log.size(), size_t{kPhases * 128});
  std::set<std::vector<int>> orders;
  for (int phase = 0; phase < kPhases; ++phase) {
    std::vector<int> order;
    std::set<int> lanes;
    for (int i = 0; i < 128; ++i) {
      const int tid = log[static_cast<size_t>(phase * 128 + i)];
      if (i % 32 == 0) order.push_back(tid / 32);
      EXPECT_EQ(tid / 32, order.back()) << "phase " << phase << ": warps interleave at " << i;
      lanes.insert(tid);
    }
    EXPECT_EQ(lanes.size(), size_t{128}) << "phase " << phase;
    std::vector<int> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3})) << "phase " << phase;
    orders.insert(order);
  }
  EXPECT_GT(orders.size(), size_t{1}) << "the warps ran in one order in every phase";
}

}  // namespace
}  // namespace bench::kernels
