// defines: bench::RunnerEnv, run_case — run one case with its runner and describe the outcome
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

}  // namespace bench
