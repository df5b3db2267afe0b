// defines: bench::store::RunData, CaseData, ModeData, MetricData, Steps, load_run, load_steps,
// load_layers, load_profile, sort_profile — one run read back from the database into plain structs: what the reports
// (results, compare, HTML) are made from. `bench run` fills the same structs from the results in memory.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace bench::store {

/// One mode of a throughput case: the stored summary and the per-repetition samples.
struct ModeData {
  std::string mode;
  std::vector<double> samples_ms;
  double median_ms = 0, mad_ms = 0, min_ms = 0, max_ms = 0, tokens_per_s = 0, flops_per_iter = 0, gflops_per_s = 0;
  std::optional<double> mfu;
  std::optional<int64_t> peak_bytes;
  /// The noise rule and the machine around the timing (store.h: ThroughputRow); none where the
  /// database has NULL (rows written before schema version 6).
  std::optional<double> noise, max_noise, load_avg, steal, other_busy;
  bool noisy = false;
  std::optional<int64_t> cores;
};

/// A named summary number of a case; NaN when stored as NULL.
struct MetricData {
  double value = 0;
  std::string unit;
};

struct CaseData {
  int64_t id = 0, ordinal = 0, seed = 0;
  std::string runner, label, variant, status, error;
  std::vector<ModeData> modes;  ///< forward, forward_backward, train_step, then others
  /// The per-kernel profile of a throughput case (`profile`; docs/results.md, "The profile"), in
  /// sort_profile's order; NaN bytes and flops where the store has NULL. Empty when not profiled.
  std::vector<ProfileRow> profile;
  std::map<std::string, MetricData, std::less<>> metrics;
  std::vector<std::string> metric_order;  ///< the metrics' names in the order they were stored
  /// The metric's value when present and finite.
  std::optional<double> metric(const std::string& name) const;
};

/// A run; `error` and `finished_at` are empty where the database has NULL.
struct RunData {
  int64_t id = 0, seed = 0, n_cases = 0;
  std::string experiment_name, experiment_path, experiment_text, status, error, started_at, finished_at, git_sha,
      harness_version, plugins_json, device, device_json, compiler, build_flags, command_line, hostname;
  std::vector<CaseData> cases;  ///< in ordinal order
};

/// Modes in the order a reader expects them: forward, forward_backward, train_step, then the
/// others by name.
void sort_modes(std::vector<ModeData>& modes);

/// Profile rows in the order a reader expects them: by mode as sort_modes orders modes, then the
/// longest first (ms descending), ties by scope, slot, pass and kernel.
void sort_profile(std::vector<ProfileRow>& rows);

/// A run with its cases, throughput (with samples), profile and metrics. Throws bench::Error when there
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
