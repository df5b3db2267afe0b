// `bench run FILE`: prepare every case, then run them one by one, committing each to the
// database as it finishes; print the results table at the end.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/build_info.h"
#include "cli/commands.h"
#include "cli/prepare.h"
#include "kernels/tile/parallel.h"
#include "report/report.h"
#include "runners/runner.h"

namespace bench::cli {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

extern "C" void on_signal(int sig) {
  if (g_stop.exchange(true)) {
    std::signal(sig, SIG_DFL);  // a second Ctrl-C stops at once
    std::raise(sig);
    return;
  }
  g_signal = sig;
}

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace

int cmd_run(const GlobalOptions& g, const RunOptions& o) {
  Progress progress(g.quiet);
  Prepared p;
  try {
    if (o.threads >= 0) tile::set_num_threads(static_cast<int>(o.threads));
    p = prepare(o.file, o.device);
    if (o.threads < 0 && p.file.threads > 0) tile::set_num_threads(static_cast<int>(p.file.threads));
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
  int64_t n_tp = 0, n_st = 0;
  for (const auto& c : p.cases) (c.runner == "throughput" ? n_tp : n_st) += 1;
  const size_t avail = available_memory();
  progress.note(p.file.name + ": " + std::to_string(p.cases.size()) + " cases (" + std::to_string(n_tp) +
                " throughput, " + std::to_string(n_st) + " stability) on " + p.device + " with " +
                std::to_string(tile::num_threads()) + " threads; largest model needs " +
                mib(static_cast<double>(p.max_model_bytes)) + " (" + mib(static_cast<double>(avail)) + " available)");
  try {
    check_memory(p, avail);
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }

  std::unique_ptr<store::Store> db;
  int64_t run_id = 0;
  DeviceInfo device;
  try {
    db = std::make_unique<store::Store>(g.db);
    progress.update("measuring the device ...", true);
    device = describe_cpu(p.device_note);
    store::RunInfo info;
    info.experiment_name = p.file.name;
    info.experiment_path = o.file;
    info.experiment_text = p.file.text;
    info.git_sha = build_info().git_sha;
    info.harness_version = build_info().version;
    nlohmann::json plugins = nlohmann::json::array();
    for (const auto& pl : p.registry->plugins())
      plugins.push_back({{"name", pl.name}, {"version", pl.version}, {"path", pl.path}});
    info.plugins_json = plugins.dump();
    info.device = device.kind;
    info.device_json = device.json();
    info.compiler = build_info().compiler;
    info.build_flags = build_info().flags;
    info.seed = p.resolved.empty() ? 0 : p.resolved.front().seed;
    info.command_line = "bench run " + o.file;
    info.hostname = hostname();
    info.n_cases = static_cast<int64_t>(p.cases.size());
    run_id = db->begin_run(info);
  } catch (const std::exception& e) {
    progress.clear();
    print_error(e);
    return kBadInput;
  }

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  int failed = 0;
  std::vector<GridCase> grid;
  for (size_t i = 0; i < p.cases.size(); ++i) {
    if (g_stop) break;
    const Case& c = p.cases[i];
    // Stability cases with save_weights keep their final weights next to the database.
    const std::string db_dir = std::filesystem::absolute(g.db).parent_path().string();
    RunnerEnv env{*p.registry,
                  device,
                  progress,
                  "[" + std::to_string(i + 1) + "/" + std::to_string(p.cases.size()) + "] " + c.runner + " " + c.label,
                  &g_stop,
                  (std::filesystem::path(db_dir) / "weights" / ("run-" + std::to_string(run_id))).string(),
                  db_dir};
    progress.update(env.prefix, true);
    store::CaseRow row = run_case(c, p.resolved[i], env);
    try {
      const int64_t case_id = db->add_case(run_id, row);
      if (c.runner == "stability" && (row.status == "completed" || row.status == "diverged")) {
        GridCase gc{lr_group_key(p.resolved[i]), case_id, NAN, NAN, NAN};
        for (const auto& m : row.metrics) {
          if (m.name == "lr") gc.lr = m.value;
          if (m.name == "initial_loss") gc.initial_loss = m.value;
          if (m.name == "final_val_loss") gc.final_val_loss = m.value;
        }
        grid.push_back(gc);
      }
    } catch (const std::exception& e) {
      progress.clear();
      print_error(e);
      db->finish_run(run_id, "failed", e.what());
      return kFailed;
    }
    if (row.status == "failed") {
      ++failed;
      progress.note(env.prefix + ": failed: " + row.error);
    } else {
      std::string summary = env.prefix + ": " + row.status;
      for (const auto& m : row.metrics)
        if (m.name == "final_loss") summary += ", final loss " + std::to_string(m.value).substr(0, 6);
      for (const auto& t : row.throughput)
        if (t.mode == "train_step") summary += ", train step " + std::to_string(t.median_ms).substr(0, 6) + " ms";
      summary += " (" + std::to_string(row.wall_s).substr(0, 5) + " s)";
      progress.note(summary);
    }
  }
  progress.clear();
  const bool interrupted = g_stop.load();
  // Learning-rate sensitivity needs the whole grid: only for a run that was not interrupted.
  if (!interrupted) {
    try {
      for (const auto& [case_id, metrics] : lr_grid_metrics(grid)) db->add_metrics(case_id, metrics);
    } catch (const std::exception& e) {
      print_error(e);
    }
  }
  db->finish_run(run_id, interrupted ? "interrupted" : (failed ? "failed" : "completed"),
                 interrupted ? "interrupted by signal" : (failed ? std::to_string(failed) + " case(s) failed" : ""));
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  try {
    const auto fmt = report::parse_format(o.format).value_or(report::Format::kTable);
    std::fputs(report::render_results(*db, run_id, fmt).c_str(), stdout);
  } catch (const std::exception& e) {
    print_error(e);
  }
  if (interrupted) return g_signal == SIGTERM ? kTerminated : kInterrupted;
  return failed ? kFailed : kOk;
}

}  // namespace bench::cli
