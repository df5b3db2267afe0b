// `bench run FILE`: prepare every case, check that the largest fits, open the database (a new run,
// or the one --resume continues), schedule the cases — in this process, or each in a process of
// its own (--isolate), several at once (--jobs K, --devices LIST) — with every result going to the
// sinks as it ends (the database, the terminal, JSON lines), then the runners' figures across
// cases, and the results table from what the run holds in memory.
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/run_setup.h"
#include "cli/signals.h"
#include "report/report.h"
#include "runners/sinks.h"

namespace bench::cli {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

/// Keeps each case's status and metrics by index, for the runners' figures across cases.
class Collect final : public ResultSink {
 public:
  explicit Collect(size_t n) : results(n) {}
  void finished(const Job& job, const CaseResult& result) override {
    results[job.index].status = result.status;
    results[job.index].metrics = result.metrics;
  }
  std::vector<CaseResult> results;
};

}  // namespace

int cmd_run(const GlobalOptions& g, const RunOptions& o) {
  Progress progress(g.quiet);
  const auto fmt = report::parse_format(o.format).value_or(report::Format::kTable);
  // Prepare and check: everything is refused here, before anything is stored.
  RunPlan plan;
  try {
    plan = prepare_run(o);
    progress.note(plan.note());
    check_memory(plan.p, available_memory(plan.p.device), plan.at_once);
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }

  // Open: the database, the run (new or resumed), the device its numbers are relative to.
  std::unique_ptr<store::Store> db;
  std::optional<Resume> resume;
  std::optional<ResultsSink> results;
  DeviceInfo device;
  std::vector<ChildSlot> slots;
  const int64_t threads = child_threads(o, plan);
  int64_t run_id = 0;
  try {
    db = std::make_unique<store::Store>(g.db);
    for (const int64_t id : db->stale_runs_failed())
      progress.note("run " + std::to_string(id) + " was left running by a process that is gone: marked failed");
    int64_t completed = 0;
    resume = find_resume(*db, o, plan, progress, &completed);
    if (completed > 0) {
      std::fputs(report::render_results(store::load_run(*db, completed), fmt).c_str(), stdout);
      return kOk;
    }
    progress.update("measuring the device ...", true);
    if (plan.n_slots > 1) slots = make_child_slots(plan.n_slots, threads, o.devices);
    device = measure_device(o, plan, slots, threads);
    if (resume) {
      run_id = resume->run_id;
      db->resume_run(run_id, getpid(), this_host());
      results.emplace(resume->stored);
    } else {
      const store::RunInfo info = run_info(o, plan, device);
      run_id = db->begin_run(info);
      results.emplace(run_header(run_id, info));
    }
  } catch (const std::exception& e) {
    progress.clear();
    print_error(e);
    return kBadInput;
  }

  // Schedule: each case's result goes to the sinks as it ends.
  arm_stop(&g_stop, &g_signal, true);  // a second Ctrl-C stops at once
  const std::string db_dir = std::filesystem::absolute(g.db).parent_path().string();
  // Stability cases with save_weights keep their final weights next to the database.
  const RunnerEnv env{*plan.p.registry,
                      device,
                      progress,
                      "",
                      &g_stop,
                      (std::filesystem::path(db_dir) / "weights" / ("run-" + std::to_string(run_id))).string(),
                      db_dir};
  std::map<int64_t, int64_t> stored_ids;
  if (resume)
    for (const auto& c : resume->stored.cases) stored_ids[c.ordinal] = c.id;
  StoreSink store_sink(*db, run_id, stored_ids);
  ProgressSink progress_sink(progress);
  Collect collect(plan.p.cases.size());
  std::ofstream jsonl_file;
  std::unique_ptr<JsonLinesSink> jsonl;
  if (!o.jsonl.empty()) {
    if (o.jsonl != "-") jsonl_file.open(o.jsonl, std::ios::trunc);
    jsonl = std::make_unique<JsonLinesSink>(o.jsonl == "-" ? std::cout : jsonl_file);
  }
  std::vector<ResultSink*> sinks = {&store_sink, &progress_sink, &*results, &collect};
  if (jsonl) sinks.push_back(jsonl.get());
  std::vector<size_t> ran;
  try {
    const SpawnSignals spawn;
    const auto executor = make_executor(o, plan, env, slots, threads, spawn.get());
    ran = schedule(pending_jobs(plan, resume), *executor, sinks, g_stop);
  } catch (const std::exception& e) {
    progress.clear();
    print_error(e);
    db->finish_run(run_id, "failed", e.what());
    return kFailed;
  }
  progress.clear();

  // Report: the runners' figures across cases (a whole learning-rate grid: not after an
  // interruption), the run's status, and its table.
  const bool interrupted = g_stop.load();
  if (!interrupted) {
    try {
      finish_runners(plan, resume, ran, collect.results, sinks);
    } catch (const std::exception& e) {
      print_error(e);
    }
  }
  const int64_t failed = progress_sink.failed();
  store::RunData& run = results->run();
  run.status = interrupted ? "interrupted" : (failed ? "failed" : "completed");
  run.error = interrupted ? "interrupted by signal" : (failed ? std::to_string(failed) + " case(s) failed" : "");
  run.finished_at = db->finish_run(run_id, run.status, run.error);
  disarm_stop();
  try {
    if (o.jsonl != "-") std::fputs(report::render_results(run, fmt).c_str(), stdout);
  } catch (const std::exception& e) {
    print_error(e);
  }
  if (interrupted) return g_signal == SIGTERM ? kTerminated : kInterrupted;
  return failed ? kFailed : kOk;
}

int cmd_run_case(const std::string& task, const std::string& result) {
  // A child may get the same stop twice — from the terminal's process group and from its parent
  // passing it on, or from Slurm signalling every process of a job — and must still end its case
  // as interrupted: it only notes the signal.
  arm_stop(&g_stop, &g_signal, false);
  try {
    return run_case_task(task, result, &g_stop) == 0 ? kOk : kFailed;
  } catch (const std::exception& e) {
    print_error(e);
    return kFailed;
  }
}

}  // namespace bench::cli
