// defines: bench::Summary, summarize, relative_noise, NoiseStep, noise_step, find_spikes, lr_at, lr_sensitivity,
// GridCase, lr_grid_metrics — the arithmetic behind the runners
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "store/record.h"

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

/// Robust relative spread of repeated times: 1.4826 * MAD / median (the MAD scaled to estimate a
/// normal distribution's standard deviation, relative to the median). NaN with fewer than two
/// values or a median that is not positive.
double relative_noise(const std::vector<double>& v);

/// What the throughput runner does after a round of repetitions (docs/design.md, "How throughput
/// is measured").
enum class NoiseStep {
  kStop,      ///< the noise is at most the target: done
  kContinue,  ///< above the target, and another round fits in the time limit
  kNoisy,     ///< above the target (or not known), and no time for another round: done, noisy
};

/// The stopping rule: kStop when relative_noise(samples) <= target; otherwise kContinue when a
/// further round of about `next_round_s` seconds would end within `max_time_s` of the start of
/// the timing (`elapsed_s` ago), else kNoisy.
NoiseStep noise_step(const std::vector<double>& samples, double target, double elapsed_s, double next_round_s,
                     double max_time_s);

/// Whether the machine was too busy around a timing for it to be trusted however steady it was:
/// other processes (`other_busy`) or the hypervisor (`steal`) took more than `max_busy` of the
/// cores' time (fractions, 0..1; NaN: not known, not busy). A loaded core slows a pinned team
/// steadily (measured: 2x, with a noise of 1-7 %, the same as idle), which the spread alone does
/// not show.
bool machine_busy(double other_busy, double steal, double max_busy);

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
