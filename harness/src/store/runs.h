// defines: bench::store::RunIdentity, StoredCase, RunSummary, run_identity, stored_cases,
// latest_matching_run, latest_run_of, has_run, run_summary, shard_completed — the look-ups of runs
// that the commands make (resume, results, merge, submit), each one named query
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/store.h"

namespace bench::store {

/// What `bench run --resume` checks of a run.
struct RunIdentity {
  std::string experiment_sha256, status, hostname;
  std::optional<int64_t> pid;
  std::optional<std::string> sweep;
  std::optional<int64_t> shard_index, shard_count;
};

/// The run's identity, or nullopt when there is no run `run_id`.
std::optional<RunIdentity> run_identity(const Store& db, int64_t run_id);

/// A case stored in a run: its id and status.
struct StoredCase {
  int64_t id = 0;
  std::string status;
};

/// The run's cases by ordinal.
std::vector<std::pair<int64_t, StoredCase>> stored_cases(const Store& db, int64_t run_id);

/// The latest run (id, status) of the experiment text with SHA-256 `experiment_sha256`: unsharded
/// when `sweep` is nullopt, else shard `shard_index` of that sweep. nullopt: none.
std::optional<std::pair<int64_t, std::string>> latest_matching_run(const Store& db,
                                                                   const std::string& experiment_sha256,
                                                                   const std::optional<std::string>& sweep,
                                                                   int64_t shard_index);

/// The latest run of the experiment named `name`, or nullopt.
std::optional<int64_t> latest_run_of(const Store& db, const std::string& name);

/// Whether run `run_id` exists.
bool has_run(const Store& db, int64_t run_id);

/// A run as `bench merge` reports it.
struct RunSummary {
  std::string experiment_name, status, error, sweep;  ///< error and sweep: empty for NULL
  int64_t n_cases = 0, shard_count = 0;               ///< shard_count: 0 for NULL
  int64_t stored = 0, finished = 0;                   ///< its cases, and those completed or diverged
};

/// The summary of run `run_id`. Throws bench::Error when there is none.
RunSummary run_summary(const Store& db, int64_t run_id);

/// Whether shard `index` of sweep `sweep` has a completed run in `db`.
bool shard_completed(const Store& db, const std::string& sweep, int64_t index);

}  // namespace bench::store
