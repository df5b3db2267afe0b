// defines: bench::store::Store — the SQLite results database (schema in docs/results.md);
// RunInfo, CaseRow and its parts (what a runner records), QueryResult, now_utc
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/value.h"

struct sqlite3;

namespace bench::store {

/// The schema version this build writes and reads (`PRAGMA user_version`).
inline constexpr int kSchemaVersion = 7;

/// Provenance of one `bench run` invocation; becomes a row of `runs`. experiment_sha256 is
/// computed by the store from experiment_text.
struct RunInfo {
  std::string experiment_name, experiment_path, experiment_text, git_sha, harness_version, plugins_json, device,
      device_json, compiler, build_flags, command_line, hostname;
  int64_t seed = 0;
  int64_t n_cases = 0;  ///< cases the run plans to execute
  int64_t pid = 0;      ///< the writing process; 0 stores NULL (never considered stale)
  /// A shard of a sweep (`bench run --shard I/N`): the sweep's id, this shard, the shard count and
  /// the number of cases of the whole sweep. Empty sweep: an unsharded run (stored as NULLs).
  std::string sweep;
  int64_t shard_index = 0, shard_count = 0, sweep_cases = 0;
  std::string started_at;  ///< ISO-8601 UTC (now_utc()); empty: the time of begin_run
};

/// Timing of one mode ("forward", "forward_backward", "train_step") of a throughput case; a row
/// of `throughput` plus one row of `samples` per entry of samples_ms. Every double except mfu
/// must be a number (not NaN).
struct ThroughputRow {
  std::string mode;
  int64_t repetitions = 0, iterations = 0;
  double median_ms = 0, mean_ms = 0, min_ms = 0, max_ms = 0, stddev_ms = 0, mad_ms = 0, tokens_per_s = 0,
         flops_per_iter = 0, gflops_per_s = 0;
  std::optional<double> mfu;          ///< fraction of the device peak, 0..1; none when the peak is unknown
  std::optional<int64_t> peak_bytes;  ///< peak device memory during the timed loop
  std::vector<double> samples_ms;     ///< per repetition, in order
  /// The noise rule: achieved relative spread, its target (fractions; NaN: not known, stored as
  /// NULL) and whether the timing stopped above the target.
  double noise = NAN, max_noise = NAN;
  bool noisy = false;
  /// The machine around the timing: 1-minute load average, stolen and other processes' busy time
  /// as fractions of the cores' time, the number of cores (0: not known); NaN and 0 are stored as NULL.
  double load_avg = NAN, steal = NAN, other_busy = NAN;
  int64_t cores = 0;
};

/// One training step of a stability case; a row of `steps`. NaN and +-inf are stored as NULL.
struct StepRow {
  int64_t step = 0;
  double lr = 0, loss = 0, grad_norm = 0, max_attn_logit = 0, z_mean = 0, z_loss = 0, ms = 0;
};

/// One value of a named per-step series; a row of `series`. `layer` < 0 is a whole-model value
/// (stored as NULL); step -1 is "at initialization". NaN and +-inf are stored as NULL.
struct SeriesRow {
  std::string name;
  int64_t layer = -1;
  int64_t step = 0;
  double value = 0;
};

/// A named summary number of a case (final_loss, spike_count ...); a row of `metrics`.
/// NaN is stored as NULL.
struct MetricRow {
  std::string name;
  double value = 0;
  std::string unit;
};

/// One line of a throughput case's per-kernel profile: what one kernel of one component took in
/// one step of one mode; a row of `profile` (docs/results.md, "The profile"). (mode, scope, slot,
/// pass, kernel) is unique within a case. `ms` must be a number; NaN or infinite bytes and flops
/// (not declared) are stored as NULL and read back as NaN.
struct ProfileRow {
  std::string mode;                 ///< forward, forward_backward or train_step
  std::string scope;                ///< where the component sits ("blocks.0.attn_norm"); "" for the model itself
  std::string slot;                 ///< the component's slot ("norm"); "model" or "optimizer" outside components
  std::string component;            ///< the component's type ("rmsnorm"); "" for the model and the optimizer
  std::string pass;                 ///< forward, backward, optimizer or step
  std::string kernel;               ///< the kernel's readable name, a GEMM ("gemm NT"), "(host)" ...
  int64_t calls = 0;                ///< launches in one step
  double ms = 0;                    ///< time in one step, ms
  double bytes = NAN, flops = NAN;  ///< declared for one step; NaN: not declared
};

/// A file a case produced, e.g. the final weights of a stability case; a row of `artifacts`.
struct ArtifactRow {
  std::string kind;  ///< "weights"
  std::string path;  ///< relative to the database's directory (absolute when elsewhere)
  int64_t bytes = 0;
  std::string sha256;  ///< of the file's bytes, lower-case hex
};

/// Everything one case produced; add_case writes it in one transaction.
struct CaseRow {
  int64_t ordinal = 0;  ///< position in the run's expansion, unique within the run
  std::string runner, label, variant, axes_json = "{}", config_json = "{}";
  int64_t seed = 0;
  std::string status = "completed";     ///< completed, diverged, failed or interrupted
  std::string error;                    ///< stored as NULL when empty
  std::string placement;                ///< where it ran ("cores 0-3", "CUDA device 2"); NULL when empty
  std::string started_at, finished_at;  ///< ISO-8601 UTC (now_utc()); the time of add_case when empty
  double wall_s = 0;
  std::optional<int64_t> n_params, n_params_embedding;
  std::optional<double> flops_per_token;
  std::vector<ThroughputRow> throughput;
  std::vector<ProfileRow> profile;
  std::vector<StepRow> steps;
  std::vector<SeriesRow> series;
  std::vector<MetricRow> metrics;
  std::vector<ArtifactRow> artifacts;
};

/// The result of a query: column names and rows of null, integer, float or string values.
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
};

/// What `Store::merge` did with one run of a source database.
struct MergeOutcome {
  std::string source;       ///< the source database's path
  int64_t source_run = 0;   ///< the run's id there
  std::string description;  ///< "run 3 (norms, shard 1/4 of sweep norms-1a2b3c4d5e6f-of4)"
  int64_t target_run = 0;   ///< the run here that received its cases
  bool created = false;     ///< whether target_run was created by this merge
  int64_t added = 0;        ///< cases copied
  int64_t replaced = 0;     ///< unfinished cases here replaced by finished ones from the source
  int64_t kept = 0;         ///< cases already here (finished, or the source's was not): left as they were
};

/// The current time as ISO-8601 UTC with milliseconds: "2026-11-29T12:34:56.789Z".
std::string now_utc();

/// A connection to one results database. Several Store objects (threads, processes) may write
/// the same file: WAL mode, a 10 s busy timeout, and each case in its own retried transaction.
/// One Store object is not meant to be shared between threads.
class Store {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  /// Opens `path`. Read-write creates the file and its parent directories when missing, applies
  /// pending migrations and fails stale runs (fail_stale_runs); read-only requires an existing, current database and
  /// refuses every write. Throws bench::Error (naming the path, leaving the file untouched) for a file that is not
  /// SQLite, a SQLite file of another application, or a newer schema version.
  explicit Store(const std::string& path, Mode mode = Mode::kReadWrite);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// The path given to the constructor.
  const std::string& path() const;

  /// Inserts a run with status 'running' and started_at now; returns its id.
  int64_t begin_run(const RunInfo& info);
  /// Sets a run's status ('completed', 'failed', 'interrupted'), error (NULL when empty) and
  /// finished_at, which it returns. Throws when the run does not exist.
  std::string finish_run(int64_t run_id, std::string_view status, std::string_view error = {});
  /// Marks failed every run that is 'running' on this host while its process (`pid`) is gone or
  /// is no longer a `bench` process: what a run killed by SIGKILL or a crash leaves behind. Its
  /// error says which process it was. Returns the ids of the runs it marked.
  std::vector<int64_t> fail_stale_runs();
  /// The runs the read-write constructor marked failed as stale.
  const std::vector<int64_t>& stale_runs_failed() const;
  /// Sets a finished (or stale) run back to 'running' for `bench run --resume`, written by the
  /// process `pid` on `hostname`; clears error and finished_at. Throws when the run does not exist.
  void resume_run(int64_t run_id, int64_t pid, std::string_view hostname);
  /// Deletes the case `ordinal` of a run with every row that belongs to it (throughput, samples,
  /// profile, steps, series, metrics, artifacts), in one transaction; nothing when there is no such case.
  void remove_case(int64_t run_id, int64_t ordinal);
  /// Writes a case with its throughput, samples, profile, steps, series, metrics and artifacts in
  /// one transaction (BEGIN IMMEDIATE, retried on SQLITE_BUSY); returns the case id. All or nothing.
  int64_t add_case(int64_t run_id, const CaseRow& c);
  /// Adds (or replaces) summary metrics of an existing case, in one transaction: for figures
  /// computed across cases after they ran, such as `lr_sensitivity`.
  void add_metrics(int64_t case_id, const std::vector<MetricRow>& metrics);
  /// Merges the databases at `sources` into this one (`bench merge`). Every source must be a bench
  /// results database of this schema version, other than this file. The shards of one sweep
  /// (`bench run --shard I/N`) become one run here, keyed by their sweep id; any other run is copied
  /// once, keyed by its uid, so merging a source again adds only what it gained since. A case
  /// (run, ordinal) already here and finished is kept; an unfinished one is replaced by a finished
  /// one. Artifacts are re-pathed relative to this database. Everything is checked first — schema
  /// versions, and that the shards of a sweep come from one experiment text with one shard count,
  /// here and across the sources — and a refusal (bench::Error naming the file and the run) writes
  /// nothing; then each source run is merged in its own transaction.
  std::vector<MergeOutcome> merge(const std::vector<std::string>& sources);
  /// The uid of a run (unique across databases, kept by `bench merge`). Throws when there is no such run.
  std::string run_uid(int64_t run_id) const;
  /// The highest run id, if there is any run.
  std::optional<int64_t> latest_run() const;
  /// Runs one SQL statement with parameters bound to ?1, ?2 ... and returns all its rows.
  QueryResult query(const std::string& sql, const std::vector<Value>& params = {}) const;
  /// `PRAGMA user_version` of the open database.
  int schema_version() const;

 private:
  struct Closer {
    void operator()(sqlite3* db) const;
  };

  void open_read_write();
  void open_read_only();
  void migrate();
  void check_identity(bool read_only) const;
  template <class Body>
  auto write_transaction(std::string_view what, Body&& body);
  MergeOutcome merge_run(const std::string& source, const std::vector<Value>& run);
  void copy_case(int64_t src_case, int64_t target_run, const std::string& source_uid);
  void delete_case(int64_t case_id);
  void update_sweep_status(int64_t run_id);

  std::string path_;
  std::unique_ptr<sqlite3, Closer> db_;
  std::vector<int64_t> stale_failed_;
};

}  // namespace bench::store
