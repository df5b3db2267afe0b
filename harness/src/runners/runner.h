// defines: bench::RunnerEnv, run_case, GridCase, lr_grid_metrics — run one case with its runner and
// describe the outcome; summaries across the cases of a learning-rate grid
#pragma once

#include <atomic>
#include <string>

#include "experiment/experiment.h"
#include "experiment/resolve.h"
#include "runners/device.h"
#include "runners/progress.h"
#include "store/store.h"

namespace bench {

class Registry;

/// What a runner needs besides its case.
struct RunnerEnv {
  const Registry& registry;
  const DeviceInfo& device;
  Progress& progress;
  std::string prefix;                       ///< progress prefix, e.g. "[3/16] pre-norm"
  const std::atomic<bool>* stop = nullptr;  ///< set by SIGINT/SIGTERM: finish the case as interrupted
  /// Where a stability case with save_weights writes its final weights (created on demand), and
  /// the database's directory, against which the stored path is relative.
  std::string weights_dir;
  std::string db_dir;
};

/// Run `c` (already resolved as `rc`) with its runner. Never throws for a failure of the case
/// itself: a plugin error or exception gives a row with status "failed" and the message.
store::CaseRow run_case(const Case& c, const ResolvedCase& rc, RunnerEnv& env);

store::CaseRow run_throughput(const Case& c, const ResolvedCase& rc, RunnerEnv& env);
store::CaseRow run_stability(const Case& c, const ResolvedCase& rc, RunnerEnv& env);

/// A finished stability case, as lr_grid_metrics sees it.
struct GridCase {
  std::string key;  ///< lr_group_key of the case: equal for cases that differ only in lr
  int64_t case_id = 0;
  double lr = 0;
  double initial_loss = 0;    ///< loss at initialization (step 0)
  double final_val_loss = 0;  ///< NaN when the case diverged or was not evaluated
};

/// For every group of cases with equal keys and at least two distinct learning rates, the
/// metrics `lr_sensitivity` (stats.h: over the group's final validation losses, with L0 the mean
/// of the group's initial losses) and `lr_grid_size`, to add to each case of the group.
std::vector<std::pair<int64_t, std::vector<store::MetricRow>>> lr_grid_metrics(const std::vector<GridCase>& cases);

}  // namespace bench
