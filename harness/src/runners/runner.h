// defines: bench::Runner, RunnerEnv, FinishedCase, CaseMetrics, ResultsTable, MetricSpec, ModeMetric,
// CurveSpec, Better — what a runner is:
// a name (its experiment section and its cases' runner), the settings of its section, run(case),
// and finish(cases) for figures across its cases. Runners are registered in one place,
// runners/registry.cpp; nothing else names them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/interfaces.h"
#include "bench/params.h"
#include "experiment/experiment.h"
#include "experiment/resolve.h"
#include "runners/device.h"
#include "runners/progress.h"
#include "store/record.h"

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

/// Which way a figure is better (`bench compare` turns a difference into better or worse).
enum class Better { kNeither, kLower, kHigher };

/// A per-case figure a runner stores (a row of `metrics`), declared once, by the runner that makes
/// it: `bench results`, `bench compare` and the report read it here.
struct MetricSpec {
  std::string name;  ///< as stored ("final_loss"); ending in '/': a prefix (".../<mode>")
  std::string unit;  ///< as stored ("nats"; "" for none)
  Better better = Better::kNeither;
  std::string header;              ///< its name in `bench compare` (the unit is added); "": `name`
  std::string column;              ///< its column's header in `bench results`; "": not a column
  std::string format;              ///< that column's fmt spec ("{:.4f}"); "": 4 significant digits
  bool when_present = false;       ///< a column only when some case has it (bits per byte: text data)
  bool timing = false;             ///< a time or a rate: `bench compare` says faster / slower
  bool compared = false;           ///< one of `bench compare`'s default metrics
  std::vector<std::string> plots;  ///< the report's figures that show it ("final-loss-vs-lr")
  bool layered = false;            ///< stored once per layer, as `<name>_L<layer>` ("final_grad_rms_L3")
  bool numbered = false;           ///< stored as `<name><number>` ("val_loss_at_512": one per eval length)
  bool unit_varies = false;        ///< its unit depends on the case (match_target: params or FLOP)

  explicit MetricSpec(std::string metric_name, std::string metric_unit = {})
      : name(std::move(metric_name)), unit(std::move(metric_unit)) {}
  /// Lower is better, with this name in `bench compare`.
  MetricSpec& lower(std::string compare_header) { return judged(Better::kLower, std::move(compare_header)); }
  /// Higher is better, with this name in `bench compare`.
  MetricSpec& higher(std::string compare_header) { return judged(Better::kHigher, std::move(compare_header)); }
  /// Neither better nor worse, with this name in `bench compare`.
  MetricSpec& neither(std::string compare_header) { return judged(Better::kNeither, std::move(compare_header)); }
  /// A column of `bench results` with this header and format.
  MetricSpec& results_column(std::string column_header, std::string column_format = {}) {
    column = std::move(column_header);
    format = std::move(column_format);
    return *this;
  }
  /// Its column only when some case of the table has it.
  MetricSpec& only_when_present() { return when_present = true, *this; }
  /// A time or a rate.
  MetricSpec& time_or_rate() { return timing = true, *this; }
  /// One of `bench compare`'s default metrics.
  MetricSpec& by_default() { return compared = true, *this; }
  /// Shown by this figure of the report.
  MetricSpec& plotted_in(std::string figure) { return plots.push_back(std::move(figure)), *this; }
  /// Stored per layer, as `<name>_L<layer>`.
  MetricSpec& per_layer() { return layered = true, *this; }
  /// Stored as `<name><number>`.
  MetricSpec& followed_by_number() { return numbered = true, *this; }
  /// Its unit is the case's (the declared one is empty).
  MetricSpec& any_unit() { return unit_varies = true, *this; }
  /// Whether the stored metric `stored` is this one: the name itself; a name ending in '/' followed
  /// by a mode; `<name>_L<layer>` when per_layer; `<name><number>` when followed_by_number.
  bool matches(std::string_view stored) const;
  /// The form of the names it declares, for messages and uniqueness ("final_grad_rms_L<n>").
  std::string pattern() const;

 private:
  MetricSpec& judged(Better b, std::string compare_header) {
    better = b;
    header = std::move(compare_header);
    return *this;
  }
};

/// A per-mode figure of a runner whose cases are timed: a view of one Timing (the `throughput`
/// row of a mode), a column of `bench results` and, with per_repetition, a metric of `bench compare`.
struct ModeMetric {
  std::string name;    ///< "median_ms"
  std::string header;  ///< "median ms"
  std::string format;  ///< fmt spec; "": 4 significant digits
  Better better = Better::kNeither;
  bool timing = false;    ///< a time or a rate: a mode timed above its noise target cannot back a verdict
  bool compared = false;  ///< one of `bench compare`'s default metrics
  /// The results' cell; nullopt: not known (NULL).
  std::optional<double> (*value)(const Timing&) = nullptr;
  /// Its value at each repetition, what `bench compare` tests; nullptr: not compared.
  std::vector<double> (*per_repetition)(const Timing&) = nullptr;
  /// One value per case, not sampled (peak memory): the minimum effect alone decides.
  bool single = false;
};

/// How `bench results` and the report show a runner's cases: with `timings`, a row per timed mode
/// with its mode_metrics(); otherwise a row per case with the columns of its metrics(). With
/// `steps`, its cases train: the report plots their curves().
struct ResultsTable {
  bool timings = false;
  bool steps = false;
};

/// A figure of the report drawn per step (or per layer at initialization) from a per-step
/// quantity: a column of `steps`, or a named series of `series`.
struct CurveSpec {
  enum class Source { kStepColumn, kSeries, kInitLayers };
  Source source = Source::kStepColumn;
  std::string name;     ///< the column or series ("loss", "val_loss", "init_grad_norm")
  std::string kind;     ///< the figure's id and kind ("loss", "grad-norm")
  std::string heading;  ///< "Training loss"
  std::string y_label;  ///< "loss (nats)"
  bool log_y = false;
  std::string caption;
  bool entropy_lines = false;  ///< with the data's unigram and bigram entropies as references
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
  /// How `bench results` and the report show its cases.
  virtual ResultsTable table() const = 0;
  /// The per-case figures it stores, each declared once (MetricSpec). Default: none.
  virtual const std::vector<MetricSpec>& metrics() const;
  /// The declaration of a metric its cases store: its own metrics(), then the budget every case
  /// gets from the scheduler (budget_metrics()); nullptr for a name nothing declares (a plugin's
  /// own probe's final value: it compares as neither better nor worse).
  const MetricSpec* declaration(std::string_view stored) const;
  /// With table().timings: the per-mode figures of its timed modes. Default: none.
  virtual const std::vector<ModeMetric>& mode_metrics() const;
  /// With table().timings: a note under `bench results`' table about one timed mode (why it is
  /// marked noisy); "" for none (the default).
  virtual std::string mode_note(const Timing& t) const;
  /// With table().steps: the per-step curves the report draws. Default: none.
  virtual const std::vector<CurveSpec>& curves() const;
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

/// The budget the scheduler stores with every case of every runner (runners/scheduler.cpp:
/// parameters, FLOPs per token, training tokens and FLOPs, a matched experiment's target and gap).
const std::vector<MetricSpec>& budget_metrics();

}  // namespace bench
