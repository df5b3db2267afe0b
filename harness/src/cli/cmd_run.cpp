// `bench run FILE`: prepare every case, then run them one by one, committing each to the
// database as it finishes; print the results table at the end. `--resume RUN` runs only the cases
// RUN has not finished.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/build_info.h"
#include "bench/error.h"
#include "bench/value.h"
#include "cli/commands.h"
#include "cli/prepare.h"
#include "experiment/resolve.h"
#include "kernels/tile/parallel.h"
#include "report/report.h"
#include "runners/runner.h"
#include "store/sha256.h"

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

/// A case already stored in a resumed run: its id and status.
struct StoredCase {
  int64_t id = 0;
  std::string status;
};

/// Checks that run `run_id` can be resumed with the experiment `p` and returns its stored cases
/// by ordinal. Throws bench::Error when the run is missing, comes from another experiment text,
/// or is still running.
std::map<int64_t, StoredCase> resumable_cases(store::Store& db, int64_t run_id, const Prepared& p) {
  const auto run =
      db.query("SELECT experiment_sha256, status, pid, hostname FROM runs WHERE id = ?1", {Value::integer(run_id)});
  if (run.rows.empty())
    throw Error("--resume " + std::to_string(run_id) + ": no run " + std::to_string(run_id) + " in " + db.path());
  const auto& r = run.rows[0];
  if (r[0].as_string() != store::sha256_hex(p.file.text))
    throw Error("--resume " + std::to_string(run_id) + ": run " + std::to_string(run_id) +
                " was made from another experiment text than " + p.file.path + " (sha256 " +
                r[0].as_string().substr(0, 12) + "...); resume it with the same file");
  if (r[1].as_string() == "running")
    throw Error("--resume " + std::to_string(run_id) + ": run " + std::to_string(run_id) + " is still running (pid " +
                (r[2].is_null() ? std::string("unknown") : std::to_string(r[2].as_int())) + " on " + r[3].as_string() +
                ")");
  std::map<int64_t, StoredCase> out;
  for (const auto& row :
       db.query("SELECT ordinal, id, status FROM cases WHERE run_id = ?1", {Value::integer(run_id)}).rows)
    out[row[0].as_int()] = StoredCase{row[1].as_int(), row[2].as_string()};
  return out;
}

/// A finished case is kept by --resume: completed, or diverged (a result, and a deterministic one).
bool is_finished(const std::string& status) { return status == "completed" || status == "diverged"; }

/// How a child of --isolate ended, in words: "" when it exited 0 or 1 (it stored its case).
std::string child_failure(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (abbrev ? " (SIG" + std::string(abbrev) + ")" : "");
  }
  if (WIFEXITED(status)) return "its process exited with status " + std::to_string(WEXITSTATUS(status));
  return "its process ended abnormally";
}

/// Runs case `ordinal` of run `run_id` in a new `bench` process (the same executable, exec'd, so
/// nothing of this process's threads or plugin state is inherited); returns its wait status.
int run_case_in_child(const GlobalOptions& g, const RunOptions& o, int64_t run_id, int64_t ordinal) {
  std::vector<std::string> args = {"bench",
                                   "-q",
                                   "--db",
                                   g.db,
                                   "run",
                                   o.file,
                                   "--isolated-run",
                                   std::to_string(run_id),
                                   "--isolated-case",
                                   std::to_string(ordinal)};
  if (!o.device.empty()) args.insert(args.end(), {"--device", o.device});
  if (o.threads >= 0) args.insert(args.end(), {"--threads", std::to_string(o.threads)});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0)
    throw Error("--isolate: cannot start a child process for case " + std::to_string(ordinal));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error("--isolate: lost the child process of case " + std::to_string(ordinal));
  return status;
}

/// The child of --isolate: case `o.child_case` of run `o.child_run`, stored by this process.
int run_isolated_child(const GlobalOptions& g, const RunOptions& o, const Prepared& p) {
  size_t i = 0;
  while (i < p.cases.size() && p.cases[i].ordinal != o.child_case) ++i;
  if (i == p.cases.size()) {
    std::fprintf(stderr, "%s: no case %lld\n", o.file.c_str(), static_cast<long long>(o.child_case));
    return kBadInput;
  }
  Progress progress(true);
  try {
    store::Store db(g.db);
    const DeviceInfo device = describe_cpu(p.device_note);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    const std::string db_dir = std::filesystem::absolute(g.db).parent_path().string();
    RunnerEnv env{
        *p.registry, device,
        progress,    "",
        &g_stop,     (std::filesystem::path(db_dir) / "weights" / ("run-" + std::to_string(o.child_run))).string(),
        db_dir};
    const store::CaseRow row = run_case(p.cases[i], p.resolved[i], env);
    db.add_case(o.child_run, row);
    return row.status == "failed" ? kFailed : kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kFailed;
  }
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
  if (o.child_run > 0) return run_isolated_child(g, o, p);

  std::unique_ptr<store::Store> db;
  int64_t run_id = 0;
  DeviceInfo device;
  std::map<int64_t, StoredCase> stored;  // cases of the resumed run, by ordinal
  try {
    db = std::make_unique<store::Store>(g.db);
    for (const int64_t id : db->stale_runs_failed())
      progress.note("run " + std::to_string(id) + " was left running by a process that is gone: marked failed");
    if (o.resume > 0) stored = resumable_cases(*db, o.resume, p);
    progress.update("measuring the device ...", true);
    device = describe_cpu(p.device_note);
    if (o.resume > 0) {
      run_id = o.resume;
      db->resume_run(run_id, getpid(), hostname());
    } else {
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
      info.pid = getpid();
      run_id = db->begin_run(info);
    }
  } catch (const std::exception& e) {
    progress.clear();
    print_error(e);
    return kBadInput;
  }

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  int failed = 0;
  std::vector<GridCase> grid;
  // What lr_grid_metrics needs of a stored stability case.
  const auto add_to_grid = [&](size_t i, int64_t case_id) {
    GridCase gc{lr_group_key(p.resolved[i]), case_id, NAN, NAN, NAN};
    for (const auto& m :
         db->query("SELECT name, value FROM metrics WHERE case_id = ?1", {Value::integer(case_id)}).rows) {
      const double v = m[1].is_null() ? NAN : m[1].as_double();
      if (m[0].as_string() == "lr") gc.lr = v;
      if (m[0].as_string() == "initial_loss") gc.initial_loss = v;
      if (m[0].as_string() == "final_val_loss") gc.final_val_loss = v;
    }
    grid.push_back(gc);
  };
  for (size_t i = 0; i < p.cases.size(); ++i) {
    if (g_stop) break;
    const Case& c = p.cases[i];
    const auto before = stored.find(c.ordinal);
    if (before != stored.end() && is_finished(before->second.status)) {
      if (c.runner == "stability") add_to_grid(i, before->second.id);
      continue;
    }
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
    store::CaseRow row;
    int64_t case_id = 0;
    try {
      if (before != stored.end()) db->remove_case(run_id, c.ordinal);
      if (o.isolate) {
        const int status = run_case_in_child(g, o, run_id, c.ordinal);
        const auto found = db->query("SELECT id, status, error, wall_s FROM cases WHERE run_id = ?1 AND ordinal = ?2",
                                     {Value::integer(run_id), Value::integer(c.ordinal)});
        if (found.rows.empty()) {  // the child died before storing its case
          row.ordinal = c.ordinal;
          row.runner = c.runner;
          row.label = c.label;
          row.variant = c.variant;
          row.axes_json = c.axes.json();
          row.config_json = resolved_json(p.resolved[i]);
          row.seed = p.resolved[i].seed;
          row.status = "failed";
          row.error = child_failure(status);
          case_id = db->add_case(run_id, row);
        } else {
          const auto& f = found.rows.front();
          case_id = f[0].as_int();
          row.status = f[1].as_string();
          row.error = f[2].is_null() ? "" : f[2].as_string();
          row.wall_s = f[3].is_null() ? 0.0 : f[3].as_double();
        }
      } else {
        row = run_case(c, p.resolved[i], env);
        case_id = db->add_case(run_id, row);
      }
      if (c.runner == "stability" && (row.status == "completed" || row.status == "diverged")) add_to_grid(i, case_id);
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
