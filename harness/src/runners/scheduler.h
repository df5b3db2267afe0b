// defines: bench::Job, ResultSink, Executor, InProcessExecutor, schedule — how a run's cases are
// executed: a scheduler hands jobs to an executor (in this process, or child processes:
// runners/child.h) up to its slots at once, and every case's result to the sinks (runners/sinks.h)
// as it ends, google/benchmark's Run -> Reporter shape
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "runners/runner.h"

namespace bench {

/// One case as the scheduler runs it.
struct Job {
  size_t index = 0;  ///< the caller's position of the case, handed back in every callback
  const Case* c = nullptr;
  const ResolvedCase* rc = nullptr;
  const Runner* runner = nullptr;
  std::string prefix;  ///< "[3/16] stability pre-norm": for progress and notes
};

/// Where results go (google/benchmark's BenchmarkReporter): the database, the terminal's progress
/// and table, JSON lines. Called on the scheduler's thread, in the order things happen.
class ResultSink {
 public:
  virtual ~ResultSink();
  /// `job` is about to start.
  virtual void started(const Job& job);
  /// `job` ended: completed, diverged, failed (also when its process died) or interrupted.
  virtual void finished(const Job& job, const CaseResult& result) = 0;
  /// Figures across cases (Runner::finish) for the case of `job`, after every case ended.
  virtual void added(const Job& job, const std::vector<Metric>& metrics);
};

/// Runs jobs somewhere: in this process, or in child processes.
class Executor {
 public:
  virtual ~Executor();
  /// How many jobs it runs at once.
  virtual size_t slots() const = 0;
  /// Starts `job` in the free slot `slot` (0 .. slots()-1).
  virtual void start(size_t slot, const Job& job) = 0;
  /// A job that ended within `timeout` (its index and result), or nullopt. A job that could not
  /// produce a result (its process died) ends with status "failed", or "interrupted" after a stop.
  virtual std::optional<std::pair<size_t, CaseResult>> wait(std::chrono::milliseconds timeout) = 0;
  /// Passes a stop on to the running jobs (called once, when `stop` is first seen set).
  virtual void stop() = 0;
};

/// Runs each job in this process when it starts: one slot; start() returns when the case ended
/// (the case itself watches env's stop flag).
class InProcessExecutor final : public Executor {
 public:
  /// `env` is each case's environment, with its prefix set per job.
  explicit InProcessExecutor(RunnerEnv env) : env_(std::move(env)) {}
  size_t slots() const override { return 1; }
  void start(size_t slot, const Job& job) override;
  std::optional<std::pair<size_t, CaseResult>> wait(std::chrono::milliseconds timeout) override;
  void stop() override {}

 private:
  RunnerEnv env_;
  std::optional<std::pair<size_t, CaseResult>> done_;
};

/// Runs `jobs` in order on `executor`, up to its slots at once; hands every result to `sinks` as
/// it arrives. Once `stop` is set, no job is started, the executor is told once, and the jobs
/// already running are waited for. Returns the indices of the jobs that ran (in order of ending).
/// Exceptions of the executor propagate (after the sinks saw every result that arrived).
std::vector<size_t> schedule(const std::vector<Job>& jobs, Executor& executor, const std::vector<ResultSink*>& sinks,
                             const std::atomic<bool>& stop);

}  // namespace bench
