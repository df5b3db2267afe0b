// defines: bench::store::RunData, Steps, load_run, load_steps, load_layers, load_profile, sort_modes,
// sort_profile — one run read back from the database, each case as the one record (store/record.h:
// CaseRow), read column by column as store/tables.h describes them: what the reports (results,
// compare, HTML) are made from. `bench run` fills the same structs from the results in memory.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/store.h"

namespace bench::store {

/// A run; `error` and `finished_at` are empty where the database has NULL.
struct RunData {
  int64_t id = 0, seed = 0, n_cases = 0;
  std::string experiment_name, experiment_path, experiment_text, status, error, started_at, finished_at, git_sha,
      harness_version, plugins_json, device, device_json, compiler, build_flags, command_line, hostname;
  std::vector<CaseRow> cases;  ///< in ordinal order, with every row of every table
};

/// Modes in the order a reader expects them: forward, forward_backward, train_step, then the
/// others by name.
void sort_modes(std::vector<Timing>& modes);

/// Profile rows in the order a reader expects them: by mode as sort_modes orders modes, then the
/// longest first (ms descending), ties by scope, slot, pass and kernel.
void sort_profile(std::vector<ProfileRow>& rows);

/// A run with its cases and all their rows: timed modes (with their samples) in sort_modes' order,
/// the profile in sort_profile's, the other rows in the order they were stored. Throws bench::Error when there
/// is no run `run_id`.
RunData load_run(const Store& db, int64_t run_id);

/// The run's fields without its cases. Throws bench::Error when there is no run `run_id`.
RunData load_run_header(const Store& db, int64_t run_id);

/// The per-step series of a stability case; NaN where the store has NULL.
struct Steps {
  std::vector<double> step, lr, loss, grad_norm, max_attn_logit, z_mean;
  /// Whole-model named series of the `series` table (val_loss, param_norm ...): steps, values.
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> named;
};
Steps load_steps(const Store& db, int64_t case_id);

/// The profile rows of one case, in sort_profile's order; NaN bytes and flops where the store has
/// NULL. Empty for a case without a profile (or no such case).
std::vector<ProfileRow> load_profile(const Store& db, int64_t case_id);

/// One per-layer series of a case at one step (-1: at initialization): (layer, value) pairs in
/// layer order; NaN where the store has NULL.
std::vector<std::pair<double, double>> load_layers(const Store& db, int64_t case_id, const std::string& name,
                                                   int64_t step);

}  // namespace bench::store
