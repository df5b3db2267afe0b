// defines: bench::Runner, RunnerEnv, FinishedCase, CaseMetrics, ResultsTable — what a runner is:
// a name (its experiment section and its cases' runner), the settings of its section, run(case),
// and finish(cases) for figures across its cases. Runners are registered in one place,
// runners/registry.cpp; nothing else names them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/interfaces.h"
#include "bench/params.h"
#include "experiment/experiment.h"
#include "experiment/resolve.h"
#include "runners/device.h"
#include "runners/progress.h"
#include "runners/result.h"

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

/// A finished case of a runner (completed or diverged), as finish() sees it: `index` is the
/// caller's, handed back in CaseMetrics.
struct FinishedCase {
  size_t index = 0;
  const ResolvedCase* resolved = nullptr;
  const CaseResult* result = nullptr;
};

/// Metrics to add to the case `index` after all cases ran.
struct CaseMetrics {
  size_t index = 0;
  std::vector<Metric> metrics;
};

/// A column of a runner's table in `bench results`: one metric, its header, and how the text
/// table and Markdown show it (a fmt format spec such as "{:.4f}"; empty: 4 significant digits).
struct ResultsColumn {
  std::string metric, header, format;
  /// Shown only when some case of the table has the metric (bits per byte: text datasets only).
  bool when_present = false;
};

/// How `bench results` shows a runner's cases: a row per case with these metric columns; with
/// `timings`, instead a row per timed mode with the throughput columns (median ms, tokens/s ...).
/// With `steps`, its cases train: the HTML report plots their curves.
struct ResultsTable {
  bool timings = false;
  std::vector<ResultsColumn> columns;
  bool steps = false;
};

/// A kind of measurement applied to cases (google/benchmark's benchmark family, our section).
class Runner {
 public:
  virtual ~Runner();
  /// The name of its section and of its cases' `runner` ("throughput").
  virtual std::string_view name() const = 0;
  /// The settings its section takes.
  virtual const std::vector<ParamSpec>& params() const = 0;
  /// Checks `settings` beyond their declared ranges and applies what they imply for the model;
  /// throws ConfigError at the offending setting. Default: nothing.
  virtual void resolve(const Params& settings, ModelSpec& model) const;
  /// Runs one case. Throws for a failure of the case (the scheduler records it as failed).
  virtual CaseResult run(const Case& c, const ResolvedCase& rc, RunnerEnv& env) const = 0;
  /// Cases with equal keys belong together: finish() needs them whole, and a shard takes them
  /// together (experiment/shard.h). Default: the resolved configuration (every case alone).
  virtual std::string group_key(const ResolvedCase& rc) const;
  /// Figures across its finished cases, after all of the run's cases ran. Default: none.
  virtual std::vector<CaseMetrics> finish(const std::vector<FinishedCase>& cases) const;
  /// Its table in `bench results`.
  virtual ResultsTable table() const = 0;
  /// The headline of a finished case for the note printed when it ends (", final loss 2.345");
  /// default: none.
  virtual std::string summary(const CaseResult& result) const;
};

/// Runs `c` with its runner and records how it went: never throws for a failure of the case itself
/// (a plugin error or exception gives status "failed" with the message), stamps the start and end
/// times and the wall time.
CaseResult run_case(const Runner& runner, const Case& c, const ResolvedCase& rc, RunnerEnv& env);

/// The case's dataset, with its cache directory set: "tokenizers" beside the database, or under
/// the system's temporary directory when the run has no database directory.
std::unique_ptr<Dataset> create_dataset(const ResolvedCase& rc, const RunnerEnv& env);

/// A file as a case's artifact: its size and SHA-256, and its path relative to the database's
/// directory (absolute when it lies elsewhere).
Artifact file_artifact(const std::string& kind, const std::string& path, const RunnerEnv& env);

/// Loss in bits per byte of `tokens` tokens that stand for `bytes` source bytes, from their mean
/// loss in nats per token: loss * tokens / (bytes * ln 2). Written as (loss / ln 2) * (tokens /
/// bytes), so that a byte-level dataset (tokens == bytes) gives exactly loss / ln 2. NaN when the
/// dataset has no bytes (bytes <= 0).
double bits_per_byte(double loss_nats_per_token, int64_t tokens, int64_t bytes);

}  // namespace bench
