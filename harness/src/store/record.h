// defines: bench::CaseResult and its parts (Timing, ProfileRow, StepRecord, SeriesPoint, Metric,
// Artifact), CaseRow — the one record of a case's results: what a runner returns, what a child
// process hands back (runners/result_json.h), what the store writes and reads back
// (store/store.h, store/run_data.h) and what the reports are made from. Which table and column
// holds each member is declared once, in store/tables.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bench {

/// One timed mode ("forward", "forward_backward", "train_step") of a throughput case.
struct Timing {
  std::string mode;
  int64_t repetitions = 0, iterations = 0;
  double median_ms = 0, mean_ms = 0, min_ms = 0, max_ms = 0, stddev_ms = 0, mad_ms = 0, tokens_per_s = 0,
         flops_per_iter = 0, gflops_per_s = 0;
  std::optional<double> mfu;          ///< fraction of the device peak, 0..1; none when the peak is unknown
  std::optional<int64_t> peak_bytes;  ///< peak device memory during the timed loop
  std::vector<double> samples_ms;     ///< per repetition, in order
  /// The noise rule (docs/design.md, "How throughput is measured"): the achieved relative spread
  /// of the samples (1.4826 MAD / median; NaN when not known), its target, and whether the timing
  /// stopped without reaching it.
  double noise = NAN, max_noise = NAN;
  bool noisy = false;
  /// The machine around the timing (runners/machine_state.h); NaN / 0 when not known.
  double load_avg = NAN, steal = NAN, other_busy = NAN;
  int64_t cores = 0;
};

/// One line of a throughput case's profile (docs/results.md, "The profile"): what one kernel of
/// one component took in one step of one mode, measured in separate, untimed steps.
struct ProfileRow {
  std::string mode;       ///< forward, forward_backward or train_step
  std::string scope;      ///< where the component sits ("blocks.0.attn_norm"); "" for the model itself
  std::string slot;       ///< the component's slot ("norm", "attention" ...); "model", "optimizer"
  std::string component;  ///< the component's type ("rmsnorm"); "" for the model and the optimizer
  std::string pass;       ///< forward, backward, optimizer, or step (around them: zeroing, waiting)
  /// A tile program's readable name ("NormForward<float, 128>"), a GEMM
  /// ("gemm NT"), a launcher's label ("attention forward (materializing)"), or "(host)": the
  /// component's time outside its kernels (on the CPU), "(between kernels)" on a GPU.
  std::string kernel;
  int64_t calls = 0;  ///< launches in one step
  double ms = 0;      ///< time in one step: the mean over the profiled steps
  /// Declared by the kernels, summed over one step's calls; NaN when some call declared none.
  double bytes = NAN, flops = NAN;
};

/// One training step (loss, grad norm ...); non-finite values are kept as they are.
struct StepRecord {
  int64_t step = 0;
  double lr = 0, loss = 0, grad_norm = 0, max_attn_logit = 0, z_mean = 0, z_loss = 0, ms = 0;
};

/// One value of a named series at a step (-1: at initialization); layer < 0: the whole model.
struct SeriesPoint {
  std::string name;
  int64_t layer = -1;
  int64_t step = 0;
  double value = 0;
};

/// A named summary number with its unit.
struct Metric {
  std::string name;
  double value = 0;
  std::string unit;
};

/// A file the case produced (the final weights of save_weights).
struct Artifact {
  std::string kind;  ///< "weights"
  std::string path;  ///< relative to the database's directory (absolute when elsewhere)
  int64_t bytes = 0;
  std::string sha256;
};

/// Everything one case produced, and how and where it ran.
struct CaseResult {
  std::string status = "completed";  ///< completed, diverged, failed or interrupted
  std::string error;                 ///< why it failed or diverged; empty otherwise
  std::string placement;             ///< where it ran ("job 2/4, cores 4-7"); empty in this process
  /// What a reader should know beside the numbers, one line each: how the case ran where it
  /// could not run as asked (a device's steps that could not be captured into a CUDA graph, and
  /// why); empty otherwise.
  std::string notes;
  std::string started_at, finished_at;
  double wall_s = 0;
  std::optional<int64_t> n_params, n_params_embedding;
  std::optional<double> flops_per_token;
  std::vector<Timing> timings;
  std::vector<ProfileRow> profile;  ///< throughput cases with profile = true
  std::vector<StepRecord> steps;
  std::vector<SeriesPoint> series;
  std::vector<Metric> metrics;
  std::vector<Artifact> artifacts;
  /// The metric's value, or nullopt when the case has none of that name.
  std::optional<double> metric(const std::string& name) const {
    const Metric* m = find_metric(name);
    return m != nullptr ? std::optional<double>(m->value) : std::nullopt;
  }
  /// The metric of that name, or nullptr.
  const Metric* find_metric(const std::string& name) const {
    for (const Metric& m : metrics)
      if (m.name == name) return &m;
    return nullptr;
  }
  /// Whether the case has a result to keep: completed, or diverged (deterministically).
  bool finished() const { return status == "completed" || status == "diverged"; }
};

/// A case of a run as the database holds it: its identity in the run and its result (a row of
/// `cases` with the rows of every other table that belong to it).
struct CaseRow {
  int64_t id = 0;       ///< the case's id in the database; 0 before it is stored
  int64_t ordinal = 0;  ///< position in the run's expansion, unique within the run
  std::string runner, label, variant, axes_json = "{}", config_json = "{}";
  int64_t seed = 0;
  CaseResult result;
  /// The metric's value when the case has it and it is finite (a NaN is stored as NULL).
  std::optional<double> metric(const std::string& name) const {
    const auto v = result.metric(name);
    return v && std::isfinite(*v) ? v : std::nullopt;
  }
};

}  // namespace bench
