// defines: bench::Summary, summarize, find_spikes, lr_at, lr_sensitivity, GridCase, lr_grid_metrics —
// the arithmetic behind the runners
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runners/result.h"

namespace bench {

/// Order statistics of repeated measurements.
struct Summary {
  double median = 0;
  double mean = 0;
  double min = 0;
  double max = 0;
  double stddev = 0;  ///< sample standard deviation (n - 1)
  double mad = 0;     ///< median absolute deviation from the median
};
Summary summarize(std::vector<double> v);

/// Spike detector: step t is a spike when v[t] > mean + sigma * std of the `window` values
/// before it (at least 10 of them; fewer at the start are not judged). Non-finite values are
/// not spikes (they are divergence). Returns the indices of spikes.
std::vector<int64_t> find_spikes(const std::vector<double>& v, int64_t window, double sigma);

/// Learning rate at 0-based `step` of `total`: linear warm-up to `peak` over `warmup` steps,
/// then "cosine", "linear" or "constant" decay to peak * min_ratio at the last step.
double lr_at(int64_t step, int64_t total, double peak, int64_t warmup, const std::string& schedule, double min_ratio);

/// Learning-rate sensitivity of one variant over a learning-rate grid (Wortsman et al. 2023,
/// sec. 2.2): mean over the grid of min(final_i, initial_loss) minus the min over the grid of
/// final_i, where a non-finite final loss counts as `initial_loss` (the loss at
/// initialization). 0 when one learning rate is as good as all; larger is more sensitive.
/// NaN for an empty grid.
double lr_sensitivity(const std::vector<double>& final_losses, double initial_loss);

/// A finished stability case, as lr_grid_metrics sees it.
struct GridCase {
  std::string key;  ///< equal for cases that differ only in lr (the stability runner's group key)
  size_t index = 0;
  double lr = 0;
  double initial_loss = 0;    ///< loss at initialization (step 0)
  double final_val_loss = 0;  ///< NaN when the case diverged or was not evaluated
};

/// For every group of cases with equal keys and at least two distinct learning rates, the
/// metrics `lr_sensitivity` (over the group's final validation losses, with L0 the mean of the
/// group's initial losses) and `lr_grid_size`, to add to each case (by index) of the group.
std::vector<std::pair<size_t, std::vector<Metric>>> lr_grid_metrics(const std::vector<GridCase>& cases);

}  // namespace bench
