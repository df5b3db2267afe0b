// The launch order of the flash backward's main kernels (flash::backward_grid and
// flash::backward_block in kernels/cuda/flash_attention_backward_kernels.cuh, used by the mma.sync
// and the wgmma backward alike): in either order every (128-key block, (batch, kv head)) pair is
// one block of the grid, and heaviest first its work (the query tiles it walks) never grows along
// the order in which CUDA starts the blocks (the linear index, x fastest). The kernels' results in
// both orders are flash_emulation_test.cpp's (FlashEmulationBwd).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "cuda/flash_attention_backward_kernels.cuh"

namespace bench::kernels {
namespace flash_backward_grid_test {
namespace {

/// A thread of block (x, y): what backward_block reads.
struct At {
  int x, y;
  int block_x() const { return x; }
  int block_y() const { return y; }
};

struct Shape {
  int64_t seq, batch, n_heads, n_kv;
  bool causal;
};

/// Query tiles (64 queries of one head) the block of keys [n0, n0 + 128) walks without a window:
/// causal, the queries from n0 on of each of the group's heads; otherwise all of them.
int64_t tiles(const Shape& s, int64_t key_block) {
  const int64_t first = s.causal ? key_block * 128 : 0;
  return (s.n_heads / s.n_kv) * ((s.seq - first + 63) / 64);
}

/// The (key block, pair) of each block in launch order.
std::vector<std::pair<int, int>> launch_order(const Shape& s, bool asked) {
  int64_t x = 0, y = 0;
  const bool heaviest_first = flash::backward_grid(s.seq, s.batch * s.n_kv, s.causal, asked, x, y);
  std::vector<std::pair<int, int>> order;
  for (int by = 0; by < y; ++by)
    for (int bx = 0; bx < x; ++bx) {
      int key_block = -1, bkv = -1;
      flash::backward_block(At{bx, by}, heaviest_first, key_block, bkv);
      order.emplace_back(key_block, bkv);
    }
  return order;
}

/// The shape (32 key blocks x 64 pairs), GQA, MQA, one block, partial blocks.
std::vector<Shape> shapes() {
  return {
      {4096, 4, 16, 16, true}, {4096, 4, 16, 16, false}, {130, 1, 4, 2, true},  {1000, 3, 8, 1, true},
      {128, 2, 2, 2, true},    {129, 1, 1, 1, false},    {5000, 2, 6, 3, true},
  };
}

TEST(FlashBackwardGrid, EveryKeyBlockAndPairOnceInBothOrders) {
  for (const Shape& s : shapes())
    for (const bool asked : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "T " << s.seq << " B " << s.batch << " Hkv " << s.n_kv << " causal "
                                        << s.causal << " heaviest first " << asked);
      const int64_t blocks = (s.seq + 127) / 128, pairs = s.batch * s.n_kv;
      std::map<std::pair<int, int>, int> seen;
      for (const auto& kb : launch_order(s, asked)) {
        ASSERT_GE(kb.first, 0);
        ASSERT_LT(kb.first, blocks);
        ASSERT_GE(kb.second, 0);
        ASSERT_LT(kb.second, pairs);
        ++seen[kb];
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), blocks * pairs);
      for (const auto& [kb, n] : seen) EXPECT_EQ(n, 1) << "key block " << kb.first << ", pair " << kb.second;
    }
}

TEST(FlashBackwardGrid, HeaviestFirstNeverStartsALighterBlockBeforeAHeavierOne) {
  for (const Shape& s : shapes()) {
    SCOPED_TRACE(::testing::Message() << "T " << s.seq << " B " << s.batch << " Hkv " << s.n_kv << " causal "
                                      << s.causal);
    const auto order = launch_order(s, true);
    for (size_t i = 1; i < order.size(); ++i)
      ASSERT_LE(tiles(s, order[i].first), tiles(s, order[i - 1].first)) << "block " << i << " of the launch order";
    // By head, a causal grid of several key blocks and pairs does start lighter blocks first
    // (the first head's last key block before the second head's first): the order the option changes.
    if (s.causal && order.size() > 1 && s.seq > 128 && s.batch * s.n_kv > 1) {
      const auto by_head = launch_order(s, false);
      bool lighter_first = false;
      for (size_t i = 1; i < by_head.size(); ++i)
        lighter_first |= tiles(s, by_head[i].first) > tiles(s, by_head[i - 1].first);
      EXPECT_TRUE(lighter_first);
    }
  }
}

}  // namespace
}  // namespace flash_backward_grid_test
}  // namespace bench::kernels
