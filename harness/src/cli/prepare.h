// defines: bench::cli::Prepared, prepare — read, load plugins, expand, resolve and plan an experiment
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "experiment/experiment.h"
#include "experiment/resolve.h"
#include "model/model.h"
#include "plugins/registry.h"

namespace bench::cli {

/// An experiment ready to run: every case resolved, and checked by its plan-only build.
struct Prepared {
  ExperimentFile file;
  std::unique_ptr<Registry> registry;
  std::string device;       ///< resolved: "cpu", "cuda", "guarded" or "emulated"
  std::string device_note;  ///< why
  std::vector<Case> cases;
  std::vector<ResolvedCase> resolved;
  /// Per case: its plan-only build (Model::plan), which validated every component against the
  /// model's dimensions, set it up and measured it. One per case: validation, the memory estimate
  /// and the run's checks share it.
  std::vector<ModelPlan> plans;
  size_t max_model_bytes = 0;  ///< largest case
  size_t max_model_case = 0;   ///< index in `cases` of that case

  /// Keeps only the cases whose `keep` flag is set (by position), with their resolved settings and
  /// plans, and the largest of them.
  void keep_only(const std::vector<bool>& keep);
  /// "16 cases (8 throughput, 8 stability)": the count, and per runner with cases.
  std::string case_counts() const;
};

/// Everything before the first case runs. Throws ConfigError (ConfigErrors when the file has
/// several independent mistakes: every one, in file order) / Error.
Prepared prepare(const std::string& path, const std::string& device_flag);

/// Memory a model can have now, in bytes: the host's (MemAvailable), or the GPU's free memory
/// for device "cuda".
size_t available_memory(const std::string& device = "cpu");

/// "123.4 MiB".
std::string mib(double bytes);

/// Where a case is written: its [[variant]], else the [model] table, else the file alone.
SourceLoc case_loc(const ExperimentFile& file, const Case& c);

/// Throws ConfigError at the largest case (case_loc) when `processes` of it at once (the
/// processes of `bench run --jobs`) need more than `available` bytes: checked before anything runs
/// or is stored.
void check_memory(const Prepared& p, size_t available, int64_t processes = 1);

/// Print an error as one line "bench: <what>" (or "file:line:col: message") to stderr.
void print_error(const std::exception& e);

}  // namespace bench::cli
