// defines: bench::StoreSink, ProgressSink, ResultsSink, JsonLinesSink, store_row — where a run's
// results go as its cases end (runners/scheduler.h: ResultSink): the database, the progress line and
// notes on the terminal, the results table printed at the end, and JSON lines when asked for
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

#include "runners/progress.h"
#include "runners/scheduler.h"
#include "store/run_data.h"
#include "store/store.h"

namespace bench {

/// The store's row of a case: its identity from the job, its measurements from the result.
CaseRow store_row(const Job& job, const CaseResult& result);

/// Writes every case to the database as it ends, in a transaction of its own; a case that starts
/// again (a resumed run) loses its earlier row first. The only writer of a run's cases.
class StoreSink final : public ResultSink {
 public:
  /// `stored`: the ids of the run's cases already in the database, by ordinal (a resumed run).
  StoreSink(store::Store& db, int64_t run_id, std::map<int64_t, int64_t> stored);
  void started(const Job& job) override;
  void finished(const Job& job, const CaseResult& result) override;
  void added(const Job& job, const std::vector<Metric>& metrics) override;

 private:
  store::Store& db_;
  int64_t run_id_;
  std::map<int64_t, int64_t> ids_;  // ordinal -> case id
};

/// The terminal: the progress line when a case starts, a note when it ends ("[3/16] stability
/// pre: completed, final loss 2.345 (12.3 s)"), and how many failed.
class ProgressSink final : public ResultSink {
 public:
  explicit ProgressSink(Progress& progress) : progress_(progress) {}
  void started(const Job& job) override;
  void finished(const Job& job, const CaseResult& result) override;
  int64_t failed() const { return failed_; }

 private:
  Progress& progress_;
  int64_t failed_ = 0;
};

/// The run as `bench results` shows it, kept in memory (report::render_results renders it), so
/// that `bench run` prints its table without reading back what it wrote.
class ResultsSink final : public ResultSink {
 public:
  /// `run`: the run's fields and the cases it already has (a resumed run).
  explicit ResultsSink(store::RunData run) : run_(std::move(run)) {}
  void finished(const Job& job, const CaseResult& result) override;
  void added(const Job& job, const std::vector<Metric>& metrics) override;
  store::RunData& run() { return run_; }

 private:
  CaseRow& case_of(int64_t ordinal);
  store::RunData run_;
};

/// One JSON object per line on `out` as each case ends — {"ordinal", "runner", "label", "variant",
/// "axes", "config", "result"} — and one {"ordinal", "added"} per figure across cases.
class JsonLinesSink final : public ResultSink {
 public:
  explicit JsonLinesSink(std::ostream& out) : out_(out) {}
  void finished(const Job& job, const CaseResult& result) override;
  void added(const Job& job, const std::vector<Metric>& metrics) override;

 private:
  std::ostream& out_;
};

/// The case as load_run reads it back after store_row was written (store/tables.h: as_stored), for
/// a ResultsSink.
CaseRow case_data(const Job& job, const CaseResult& result);

}  // namespace bench
