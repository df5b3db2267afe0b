// `bench run FILE`: prepare every case, then run them — one by one in this process, or each in a
// process of its own (--isolate), several at once (--jobs K, --devices LIST) — committing each to
// the database as it finishes; print the results table at the end. `--resume RUN` runs only the
// cases RUN has not finished; `--shard I/N` only shard I of N (experiment/shard.h).
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "bench/build_info.h"
#include "bench/error.h"
#include "bench/value.h"
#include "cli/commands.h"
#include "cli/prepare.h"
#include "cli/signals.h"
#include "experiment/resolve.h"
#include "experiment/shard.h"
#include "kernels/tile/parallel.h"
#include "report/report.h"
#include "runners/runner.h"
#include "store/sha256.h"

namespace bench::cli {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

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
std::map<int64_t, StoredCase> resumable_cases(store::Store& db, int64_t run_id, const Prepared& p,
                                              const std::string& sweep, std::optional<ShardSpec> shard) {
  const auto run = db.query(
      "SELECT experiment_sha256, status, pid, hostname, sweep, shard_index, shard_count FROM runs WHERE id = ?1",
      {Value::integer(run_id)});
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
  const std::string its_shard =
      r[5].is_null() ? "" : std::to_string(r[5].as_int()) + "/" + std::to_string(r[6].as_int());
  const std::string our_shard = shard ? std::to_string(shard->index) + "/" + std::to_string(shard->count) : "";
  if (its_shard != our_shard || (shard && r[4].as_string() != sweep))
    throw Error("--resume " + std::to_string(run_id) + ": run " + std::to_string(run_id) + " is " +
                (its_shard.empty() ? "not a shard" : "shard " + its_shard + " of sweep " + r[4].as_string()) +
                ", not " + (our_shard.empty() ? "a whole run" : "shard " + our_shard + " of sweep " + sweep) +
                "; resume it with the same --shard" + (its_shard.empty() ? "" : " " + its_shard));
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

/// Where the cases of `--jobs K` / `--devices LIST` run: each slot a process at a time, with its own
/// threads, its own cores (the CPU affinity it inherits) and, for a device, only that device.
struct Slot {
  std::string placement;     ///< stored with the case: "job 2/4, cores 4-7", "CUDA device 1, cores 0-3"
  std::string cuda_visible;  ///< CUDA_VISIBLE_DEVICES for its processes; empty: inherited
  cpu_set_t cpus{};          ///< its cores
  bool pinned = false;       ///< whether `cpus` applies
};

/// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  if (out.empty())
    for (int c = 0; c < static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); ++c) out.push_back(c);
  return out;
}

/// "4-7" or "0,2".
std::string cpu_list(const std::vector<int>& cpus) {
  if (cpus.empty()) return "";
  bool contiguous = true;
  for (size_t i = 1; i < cpus.size(); ++i) contiguous = contiguous && cpus[i] == cpus[i - 1] + 1;
  if (contiguous)
    return cpus.size() == 1 ? std::to_string(cpus[0])
                            : std::to_string(cpus.front()) + "-" + std::to_string(cpus.back());
  std::string out;
  for (const int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

/// The slots of --jobs / --devices, each with `threads` cores of its own (wrapping around when
/// there are not enough: then the slots share cores, and the run's device note says so).
std::vector<Slot> make_slots(const RunOptions& o, int64_t n_slots, int64_t threads) {
  const std::vector<int> cpus = allowed_cpus();
  std::vector<Slot> slots(static_cast<size_t>(n_slots));
  for (int64_t i = 0; i < n_slots; ++i) {
    Slot& s = slots[static_cast<size_t>(i)];
    std::vector<int> mine;
    for (int64_t t = 0; t < threads; ++t)
      mine.push_back(cpus[static_cast<size_t>((i * threads + t) % static_cast<int64_t>(cpus.size()))]);
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    CPU_ZERO(&s.cpus);
    for (const int c : mine) CPU_SET(c, &s.cpus);
    s.pinned = true;
    const std::string cores = (mine.size() == 1 ? "core " : "cores ") + cpu_list(mine);
    if (!o.devices.empty()) {
      s.cuda_visible = std::to_string(o.devices[static_cast<size_t>(i)]);
      s.placement = "CUDA device " + s.cuda_visible + ", " + cores;
    } else {
      s.placement = "job " + std::to_string(i + 1) + "/" + std::to_string(n_slots) + ", " + cores;
    }
  }
  return slots;
}

/// Starts case `ordinal` of run `run_id` in a new `bench` process (the same executable, exec'd, so
/// nothing of this process's threads or plugin state is inherited) in `slot` (none: --isolate);
/// returns its pid.
pid_t start_child(const GlobalOptions& g, const RunOptions& o, int64_t run_id, int64_t ordinal,
                  const std::string& device_json, int64_t threads, const Slot* slot) {
  std::vector<std::string> args = {"bench",
                                   "-q",
                                   "--db",
                                   g.db,
                                   "run",
                                   o.file,
                                   "--isolated-run",
                                   std::to_string(run_id),
                                   "--isolated-case",
                                   std::to_string(ordinal),
                                   "--isolated-device",
                                   device_json};
  if (!o.device.empty()) args.insert(args.end(), {"--device", o.device});
  if (threads >= 0) args.insert(args.end(), {"--threads", std::to_string(threads)});
  if (slot != nullptr) args.insert(args.end(), {"--isolated-placement", slot->placement});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child's environment: ours, with CUDA_VISIBLE_DEVICES set for a device slot.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e)
    if (slot == nullptr || slot->cuda_visible.empty() || std::string_view(*e).rfind("CUDA_VISIBLE_DEVICES=", 0) != 0)
      env_strings.emplace_back(*e);
  if (slot != nullptr && !slot->cuda_visible.empty())
    env_strings.push_back("CUDA_VISIBLE_DEVICES=" + slot->cuda_visible);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  // The child inherits the CPU affinity of the thread that spawns it: pin this thread to the
  // slot's cores for the spawn, then give it back its own.
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const bool pin = slot != nullptr && slot->pinned && sched_getaffinity(0, sizeof mine, &mine) == 0;
  if (pin) sched_setaffinity(0, sizeof slot->cpus, &slot->cpus);
  pid_t pid = 0;
  const SpawnSignals attrs;
  const int rc = posix_spawn(&pid, "/proc/self/exe", nullptr, attrs.get(), argv.data(), envp.data());
  if (pin) sched_setaffinity(0, sizeof mine, &mine);
  if (rc != 0) throw Error("cannot start a child process for case " + std::to_string(ordinal));
  return pid;
}

/// The child of --isolate / --jobs: case `o.child_case` of run `o.child_run`, stored by this process.
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
    const DeviceInfo device =
        o.child_device.empty() ? describe_device(p.device, p.device_note) : device_from_json(o.child_device);
    // A child may get the same stop twice — from the terminal's process group and from its parent
    // passing it on, or from Slurm signalling every process of a job — and must still store its
    // case as interrupted: it only notes the signal.
    arm_stop(&g_stop, &g_signal, false);
    const std::string db_dir = std::filesystem::absolute(g.db).parent_path().string();
    RunnerEnv env{
        *p.registry, device,
        progress,    "",
        &g_stop,     (std::filesystem::path(db_dir) / "weights" / ("run-" + std::to_string(o.child_run))).string(),
        db_dir};
    store::CaseRow row = run_case(p.cases[i], p.resolved[i], env);
    row.placement = o.child_placement;
    db.add_case(o.child_run, row);
    return row.status == "failed" ? kFailed : kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kFailed;
  }
}

/// The run --resume auto continues: the latest run in `db` of this experiment text and shard
/// (both unsharded, or the same sweep and shard index). nullopt: none.
std::optional<std::pair<int64_t, std::string>> latest_matching_run(store::Store& db, const Prepared& p,
                                                                   const std::string& sweep,
                                                                   std::optional<ShardSpec> shard) {
  const auto found = db.query(
      "SELECT id, status FROM runs WHERE experiment_sha256 = ?1 AND "
      "((?2 IS NULL AND sweep IS NULL) OR (sweep = ?2 AND shard_index = ?3)) ORDER BY id DESC LIMIT 1",
      {Value::string(store::sha256_hex(p.file.text)), shard ? Value::string(sweep) : Value(),
       shard ? Value::integer(shard->index) : Value()});
  if (found.rows.empty()) return std::nullopt;
  return std::make_pair(found.rows[0][0].as_int(), found.rows[0][1].as_string());
}

}  // namespace

std::string default_sweep_id(const std::string& experiment_name, const std::string& experiment_text, int64_t shards) {
  std::string name;
  for (const char ch : experiment_name) name += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ? ch : '_';
  return name + "-" + store::sha256_hex(experiment_text).substr(0, 12) + "-of" + std::to_string(shards);
}

int cmd_run(const GlobalOptions& g, const RunOptions& o) {
  Progress progress(g.quiet);
  Prepared p;
  std::optional<ShardSpec> shard;
  int64_t sweep_cases = 0;
  std::string sweep;
  int64_t n_slots = 0;  // processes at once: 0 in this process, 1 with --isolate, else --jobs / --devices
  try {
    if (!o.devices.empty() && o.jobs > 0) throw Error("--jobs and --devices exclude each other");
    if (!o.sweep.empty() && o.shard.empty()) throw Error("--sweep names the sweep of a shard: give --shard I/N too");
    if (!o.devices.empty()) {
      const std::set<int64_t> distinct(o.devices.begin(), o.devices.end());
      if (distinct.size() != o.devices.size()) throw Error("--devices: a device is listed twice");
    }
    n_slots = !o.devices.empty() ? static_cast<int64_t>(o.devices.size()) : o.jobs > 0 ? o.jobs : (o.isolate ? 1 : 0);
    if (o.threads >= 0) tile::set_num_threads(static_cast<int>(o.threads));
    if (!o.shard.empty()) shard = parse_shard(o.shard);
    p = prepare(o.file, o.device);
    if (o.threads < 0 && p.file.threads > 0) tile::set_num_threads(static_cast<int>(p.file.threads));
    if (o.child_run > 0) {
      // A child of --isolate / --jobs: only its own case (the parent checked the rest).
      std::vector<bool> mine(p.cases.size());
      for (size_t i = 0; i < p.cases.size(); ++i) mine[i] = p.cases[i].ordinal == o.child_case;
      p.keep_only(mine);
    } else if (shard) {
      sweep_cases = static_cast<int64_t>(p.cases.size());
      const std::vector<int64_t> owner = shard_of(p.cases, p.resolved, shard->count);
      std::vector<bool> mine(owner.size());
      for (size_t i = 0; i < owner.size(); ++i) mine[i] = owner[i] == shard->index;
      p.keep_only(mine);
      sweep = o.sweep.empty() ? default_sweep_id(p.file.name, p.file.text, shard->count) : o.sweep;
    }
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
  int64_t n_tp = 0, n_st = 0;
  for (const auto& c : p.cases) (c.runner == "throughput" ? n_tp : n_st) += 1;
  const size_t avail = available_memory(p.device);
  // Each of --jobs' processes holds its own model: the memory check counts them all (but each
  // process of --devices has a GPU of its own).
  const int64_t at_once = p.device == "cuda" && !o.devices.empty()
                              ? 1
                              : std::max<int64_t>(1, std::min<int64_t>(n_slots, static_cast<int64_t>(p.cases.size())));
  if (o.child_run == 0) {
    std::string what = std::to_string(p.cases.size()) + " cases (" + std::to_string(n_tp) + " throughput, " +
                       std::to_string(n_st) + " stability)";
    if (shard)
      what = "shard " + std::to_string(shard->index) + "/" + std::to_string(shard->count) + " of sweep " + sweep +
             ": " + what + " of " + std::to_string(sweep_cases);
    progress.note(p.file.name + ": " + what + " on " + p.device + " with " + std::to_string(tile::num_threads()) +
                  " threads; largest model needs " + mib(static_cast<double>(p.max_model_bytes)) +
                  (at_once > 1 ? " (x" + std::to_string(at_once) + " processes at once)" : "") + " (" +
                  mib(static_cast<double>(avail)) + " available" + (p.device == "cuda" ? " on the GPU)" : ")"));
  }
  try {
    check_memory(p, avail, at_once);
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
  if (o.child_run > 0) return run_isolated_child(g, o, p);

  std::unique_ptr<store::Store> db;
  int64_t run_id = 0;
  int64_t resume_id = 0;
  DeviceInfo device;
  std::vector<Slot> slots;
  int64_t child_threads = o.threads;
  std::map<int64_t, StoredCase> stored;  // cases of the resumed run, by ordinal
  try {
    db = std::make_unique<store::Store>(g.db);
    for (const int64_t id : db->stale_runs_failed())
      progress.note("run " + std::to_string(id) + " was left running by a process that is gone: marked failed");
    if (o.resume == "auto") {
      if (const auto last = latest_matching_run(*db, p, sweep, shard)) {
        if (last->second == "completed") {
          progress.note("run " + std::to_string(last->first) + " of this experiment" + (shard ? " shard" : "") +
                        " already completed: nothing to do");
          const auto fmt = report::parse_format(o.format).value_or(report::Format::kTable);
          std::fputs(report::render_results(*db, last->first, fmt).c_str(), stdout);
          return kOk;
        }
        resume_id = last->first;
        progress.note("resuming run " + std::to_string(resume_id) + " (" + last->second + ")");
      }
    } else if (!o.resume.empty()) {
      try {
        size_t used = 0;
        resume_id = std::stoll(o.resume, &used);
        if (used != o.resume.size() || resume_id <= 0) throw std::invalid_argument("");
      } catch (const std::logic_error&) {
        throw Error("--resume '" + o.resume + "': expected a run id or auto");
      }
    }
    if (resume_id > 0) stored = resumable_cases(*db, resume_id, p, sweep, shard);
    progress.update("measuring the device ...", true);
    if (n_slots > 1) {
      // Each process gets its own cores: --threads each, else an equal share of ours.
      const auto cpus = static_cast<int64_t>(allowed_cpus().size());
      child_threads = o.threads > 0        ? o.threads
                      : p.file.threads > 0 ? p.file.threads
                                           : std::max<int64_t>(1, cpus / n_slots);
      slots = make_slots(o, n_slots, child_threads);
      // The ceilings (MFU's denominator) as one process sees them: on one slot's cores with its threads.
      cpu_set_t mine;
      CPU_ZERO(&mine);
      const bool pinned = sched_getaffinity(0, sizeof mine, &mine) == 0;
      if (pinned) sched_setaffinity(0, sizeof slots[0].cpus, &slots[0].cpus);
      const int before = tile::num_threads();
      tile::set_num_threads(static_cast<int>(child_threads));
      device = describe_cpu(p.device_note + "; " + std::to_string(n_slots) + " processes at once (" +
                            (o.devices.empty() ? "--jobs" : "--devices") + "), each with " +
                            std::to_string(child_threads) + " threads on its own cores" +
                            (n_slots * child_threads > cpus
                                 ? " (more than the " + std::to_string(cpus) + " cores: they share cores)"
                                 : ""));
      tile::set_num_threads(before);
      if (pinned) sched_setaffinity(0, sizeof mine, &mine);
    } else {
      device = describe_device(p.device, p.device_note);
    }
    // On GPUs the ceilings are the device's (each process of --devices has one of its own).
    if (n_slots > 1 && p.device == "cuda")
      device = describe_cuda(p.device_note + "; " + std::to_string(n_slots) + " processes at once");
    if (resume_id > 0) {
      run_id = resume_id;
      db->resume_run(run_id, getpid(), hostname());
    } else {
      store::RunInfo info;
      info.experiment_name = p.file.name;
      info.experiment_path = o.file;
      info.experiment_text = p.file.text;
      info.git_sha = build_info().git_sha;
      info.harness_version = build_info().version;
      nlohmann::json plugins = nlohmann::json::array();
      for (const auto& pl : p.registry->plugins()) {
        nlohmann::json entry = {{"name", pl.name}, {"version", pl.version}, {"path", pl.path}};
        std::ifstream lib(pl.path, std::ios::binary);
        if (lib) entry["sha256"] = store::sha256_hex(std::string(std::istreambuf_iterator<char>(lib), {}));
        plugins.push_back(entry);
      }
      info.plugins_json = plugins.dump();
      info.device = device.kind;
      info.device_json = device.json();
      info.compiler = build_info().compiler;
      info.build_flags = build_info().flags;
      info.seed = p.resolved.empty() ? 0 : p.resolved.front().seed;
      info.command_line = "bench run " + o.file;
      if (shard) info.command_line += " --shard " + o.shard + " --sweep " + sweep;
      if (o.jobs > 0) info.command_line += " --jobs " + std::to_string(o.jobs);
      if (!o.devices.empty()) {
        info.command_line += " --devices ";
        for (size_t i = 0; i < o.devices.size(); ++i)
          info.command_line += (i ? "," : "") + std::to_string(o.devices[i]);
      }
      if (o.isolate) info.command_line += " --isolate";
      info.hostname = hostname();
      info.n_cases = static_cast<int64_t>(p.cases.size());
      info.pid = getpid();
      if (shard) {
        info.sweep = sweep;
        info.shard_index = shard->index;
        info.shard_count = shard->count;
        info.sweep_cases = sweep_cases;
      }
      run_id = db->begin_run(info);
    }
  } catch (const std::exception& e) {
    progress.clear();
    print_error(e);
    return kBadInput;
  }

  arm_stop(&g_stop, &g_signal, true);  // a second Ctrl-C stops at once
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
  const std::string db_dir = std::filesystem::absolute(g.db).parent_path().string();
  const auto prefix_of = [&](size_t i) {
    return "[" + std::to_string(i + 1) + "/" + std::to_string(p.cases.size()) + "] " + p.cases[i].runner + " " +
           p.cases[i].label;
  };
  // After case i ended (stored as `row`, or with the fields read back from the database).
  const auto report_case = [&](size_t i, const store::CaseRow& row, int64_t case_id) {
    if (p.cases[i].runner == "stability" && (row.status == "completed" || row.status == "diverged"))
      add_to_grid(i, case_id);
    const std::string prefix = prefix_of(i);
    if (row.status == "failed") {
      ++failed;
      progress.note(prefix + ": failed: " + row.error);
      return;
    }
    std::string summary = prefix + ": " + row.status;
    for (const auto& m : row.metrics)
      if (m.name == "final_loss") summary += ", final loss " + std::to_string(m.value).substr(0, 6);
    for (const auto& t : row.throughput)
      if (t.mode == "train_step") summary += ", train step " + std::to_string(t.median_ms).substr(0, 6) + " ms";
    summary += " (" + std::to_string(row.wall_s).substr(0, 5) + " s)";
    progress.note(summary);
  };
  // A child ended: read back what it stored, or store the case failed with how the child died.
  const auto collect_child = [&](size_t i, int status, const std::string& placement) {
    const Case& c = p.cases[i];
    store::CaseRow row;
    int64_t case_id = 0;
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
      row.status = g_stop ? "interrupted" : "failed";
      row.error = child_failure(status);
      row.placement = placement;
      case_id = db->add_case(run_id, row);
    } else {
      const auto& f = found.rows.front();
      case_id = f[0].as_int();
      row.status = f[1].as_string();
      row.error = f[2].is_null() ? "" : f[2].as_string();
      row.wall_s = f[3].is_null() ? 0.0 : f[3].as_double();
    }
    report_case(i, row, case_id);
  };

  std::vector<size_t> pending;
  for (size_t i = 0; i < p.cases.size(); ++i) {
    const auto before = stored.find(p.cases[i].ordinal);
    if (before != stored.end() && is_finished(before->second.status)) {
      if (p.cases[i].runner == "stability") add_to_grid(i, before->second.id);
      continue;
    }
    pending.push_back(i);
  }
  try {
    if (n_slots == 0) {
      for (const size_t i : pending) {
        if (g_stop) break;
        const Case& c = p.cases[i];
        // Stability cases with save_weights keep their final weights next to the database.
        RunnerEnv env{
            *p.registry, device,
            progress,    prefix_of(i),
            &g_stop,     (std::filesystem::path(db_dir) / "weights" / ("run-" + std::to_string(run_id))).string(),
            db_dir};
        progress.update(env.prefix, true);
        if (stored.count(c.ordinal)) db->remove_case(run_id, c.ordinal);
        const store::CaseRow row = run_case(c, p.resolved[i], env);
        report_case(i, row, db->add_case(run_id, row));
      }
    } else {
      // Up to n_slots children at once; each stores its own case. Polled, so that a signal to this
      // process is seen at once and passed on to the children.
      struct Running {
        pid_t pid;
        size_t index;
        size_t slot;
      };
      std::vector<Running> running;
      std::vector<bool> busy(static_cast<size_t>(n_slots), false);
      size_t next = 0;
      bool forwarded = false;
      const std::string device_json = device.json();
      while (next < pending.size() || !running.empty()) {
        while (!g_stop && next < pending.size() && running.size() < static_cast<size_t>(n_slots)) {
          const size_t i = pending[next++];
          const size_t slot = static_cast<size_t>(std::find(busy.begin(), busy.end(), false) - busy.begin());
          if (stored.count(p.cases[i].ordinal)) db->remove_case(run_id, p.cases[i].ordinal);
          progress.update(prefix_of(i), true);
          const pid_t pid =
              start_child(g, o, run_id, p.cases[i].ordinal, device_json, n_slots > 1 ? child_threads : o.threads,
                          slots.empty() ? nullptr : &slots[slot]);
          busy[slot] = true;
          running.push_back({pid, i, slot});
        }
        if (g_stop && !forwarded) {
          for (const auto& r : running) kill(r.pid, SIGTERM);
          forwarded = true;
        }
        if (g_stop && running.empty()) break;
        int status = 0;
        const pid_t done = waitpid(-1, &status, WNOHANG);
        if (done <= 0) {
          if (done < 0 && errno != EINTR && errno != ECHILD) throw Error("lost the child processes of the run");
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
        const auto it = std::find_if(running.begin(), running.end(), [&](const Running& r) { return r.pid == done; });
        if (it == running.end()) continue;
        const Running r = *it;
        running.erase(it);
        busy[r.slot] = false;
        collect_child(r.index, status, slots.empty() ? "" : slots[r.slot].placement);
      }
    }
  } catch (const std::exception& e) {
    progress.clear();
    print_error(e);
    db->finish_run(run_id, "failed", e.what());
    return kFailed;
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
  disarm_stop();
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
