// Grouping of a run's stability cases into learning-rate grids for lr_sensitivity.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "runners/stats.h"

namespace bench {
namespace lr_grid_test {
namespace {

TEST(LrGrid, GroupsCasesThatDifferOnlyInLr) {
  const double l0 = 5.5;
  // Variant A: three learning rates, the largest diverged (NaN). Variant B: two learning rates.
  // Variant C: one learning rate only, no grid.
  const std::vector<GridCase> cases = {
      {"A", 1, 1e-3, l0, 3.0},  {"A", 2, 1e-2, l0, 2.0},  {"A", 3, 1e-1, l0, NAN},
      {"B", 4, 1e-3, 5.4, 4.0}, {"B", 5, 1e-2, 5.6, 2.5}, {"C", 6, 1e-3, l0, 2.0},
  };
  std::map<int64_t, std::map<std::string, double>> got;
  for (const auto& [id, metrics] : lr_grid_metrics(cases))
    for (const auto& m : metrics) got[id][m.name] = m.value;
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got.count(6), 0u);
  // A: (3.0 + 2.0 + 5.5) / 3 - 2.0 = 1.5
  for (int64_t id : {1, 2, 3}) {
    EXPECT_NEAR(got[id]["lr_sensitivity"], 1.5, 1e-12);
    EXPECT_EQ(got[id]["lr_grid_size"], 3);
  }
  // B: L0 = mean(5.4, 5.6) = 5.5; (4.0 + 2.5) / 2 - 2.5 = 0.75
  for (int64_t id : {4, 5}) EXPECT_NEAR(got[id]["lr_sensitivity"], 0.75, 1e-12);
}

}  // namespace
}  // namespace lr_grid_test
}  // namespace bench
