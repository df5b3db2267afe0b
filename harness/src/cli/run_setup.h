// defines: the steps of `bench run` before and after its cases run — RunPlan (prepare_run), Resume
// (find_resume), measure_device, run_info (provenance), make_executor, finish_runners — so that
// cmd_run.cpp reads as the story: prepare, check, open, schedule, report
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/prepare.h"
#include "experiment/shard.h"
#include "runners/child.h"
#include "runners/device.h"
#include "runners/scheduler.h"
#include "store/run_data.h"
#include "store/store.h"

namespace bench::cli {

/// The run a `bench run` invocation asks for: its cases (its shard's), and how many processes.
struct RunPlan {
  Prepared p;
  std::optional<ShardSpec> shard;
  std::string sweep;        ///< the sweep id of a shard
  int64_t sweep_cases = 0;  ///< cases of the whole sweep
  /// Processes at once: 0 in this process, 1 with --isolate, else --jobs / --devices.
  int64_t n_slots = 0;
  /// Processes holding a model at once, for the memory check (each process of --devices has a
  /// GPU of its own).
  int64_t at_once = 1;
  /// "norms: 16 cases (8 throughput, 8 stability) on cpu with 2 threads; largest model needs ...".
  std::string note() const;
};

/// Checks the options, prepares the experiment and keeps the shard's cases. Throws ConfigError /
/// Error (exit status 2).
RunPlan prepare_run(const RunOptions& o);

/// Where a run continues (--resume): the run and what it already has.
struct Resume {
  int64_t run_id = 0;
  store::RunData stored;  ///< the run and its cases as they are in the database
};

/// The run --resume asks to continue, checked against the plan (same experiment text, same shard,
/// not running); nullopt for a new run. With --resume auto and a completed run, `completed` is set
/// to it (nothing to do). Throws bench::Error naming the run.
std::optional<Resume> find_resume(const store::Store& db, const RunOptions& o, const RunPlan& plan, Progress& progress,
                                  int64_t* completed);

/// The device the run's numbers are relative to, measured as one of its processes sees it (with
/// --jobs: on one slot's cores with its threads).
DeviceInfo measure_device(const RunOptions& o, const RunPlan& plan, const std::vector<ChildSlot>& slots,
                          int64_t child_threads);

/// The provenance of a new run: experiment, build, plugins (with the SHA-256 of each file),
/// device, command line, host, and its start time.
store::RunInfo run_info(const RunOptions& o, const RunPlan& plan, const DeviceInfo& device);

/// The run begun with `info` as the results view shows it, with no cases yet.
store::RunData run_header(int64_t run_id, const store::RunInfo& info);

/// This machine's host name.
std::string this_host();

/// Threads of each child of --jobs / --devices: --threads, else the experiment's, else an equal
/// share of this process's cores; for --isolate, --threads or the experiment's (-1: the default).
int64_t child_threads(const RunOptions& o, const RunPlan& plan);

/// The executor of the plan: this process (n_slots 0) or child processes running `bench -q
/// run-case` with the slots of --jobs / --devices.
std::unique_ptr<Executor> make_executor(const RunOptions& o, const RunPlan& plan, const RunnerEnv& env,
                                        const std::vector<ChildSlot>& slots, int64_t child_threads,
                                        const posix_spawnattr_t* spawn);

/// The jobs of the plan's cases that `resume` did not finish, in order.
std::vector<Job> pending_jobs(const RunPlan& plan, const std::optional<Resume>& resume);

/// Each runner's figures across its finished cases (Runner::finish): those finished before
/// (`resume`) and those of `ran` (indices into plan's cases, in the order they ended), handed to
/// `sinks` as added metrics.
void finish_runners(const RunPlan& plan, const std::optional<Resume>& resume, const std::vector<size_t>& ran,
                    const std::vector<CaseResult>& results, const std::vector<ResultSink*>& sinks);

}  // namespace bench::cli
