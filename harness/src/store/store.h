// defines: bench::store::Store — the SQLite results database (schema in docs/results.md);
// RunInfo, QueryResult, now_utc. A case is written and read back as the one record
// (store/record.h: CaseRow), table by table as store/tables.h describes it.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/value.h"
#include "store/record.h"

struct sqlite3;

namespace bench::store {

/// The schema version this build writes and reads (`PRAGMA user_version`).
inline constexpr int kSchemaVersion = 8;

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
  /// Each column keeps its values as store/tables.h declares (NULL for what is not known); a NaN
  /// where a number is required (wall_s, the throughput times and rates, a sample, a profile row's
  /// ms) and a profile row given twice are refused (bench::Error naming the case and the column).
  /// Empty started_at / finished_at: the time of writing.
  int64_t add_case(int64_t run_id, const CaseRow& c);
  /// Adds (or replaces) summary metrics of an existing case, in one transaction: for figures
  /// computed across cases after they ran, such as `lr_sensitivity`.
  void add_metrics(int64_t case_id, const std::vector<Metric>& metrics);
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
