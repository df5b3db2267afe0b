#include "cli/run_setup.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "bench/build_info.h"
#include "bench/error.h"
#include "bench/sha256.h"
#include "kernels/tile/parallel.h"
#include "kernels/tile/threads.h"
#include "runners/registry.h"
#include "runners/threads.h"
#include "store/runs.h"

namespace bench::cli {

namespace {

std::string prefix_of(const RunPlan& plan, size_t i) {
  const Case& c = plan.p.cases[i];
  return "[" + std::to_string(i + 1) + "/" + std::to_string(plan.p.cases.size()) + "] " + c.runner + " " + c.label;
}

Job job_of(const RunPlan& plan, size_t i) {
  return Job{i, &plan.p.cases[i], &plan.p.resolved[i], &runner_of(plan.p.cases[i]), prefix_of(plan, i)};
}

}  // namespace

std::string default_sweep_id(const std::string& experiment_name, const std::string& experiment_text, int64_t shards) {
  std::string name;
  for (const char ch : experiment_name) name += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ? ch : '_';
  return name + "-" + sha256_hex(experiment_text).substr(0, 12) + "-of" + std::to_string(shards);
}

RunPlan prepare_run(const RunOptions& o) {
  RunPlan plan;
  if (!o.devices.empty() && o.jobs > 0) throw Error("--jobs and --devices exclude each other");
  if (!o.sweep.empty() && o.shard.empty()) throw Error("--sweep names the sweep of a shard: give --shard I/N too");
  if (!o.devices.empty()) {
    const std::set<int64_t> distinct(o.devices.begin(), o.devices.end());
    if (distinct.size() != o.devices.size()) throw Error("--devices: a device is listed twice");
  }
  plan.n_slots = !o.devices.empty() ? static_cast<int64_t>(o.devices.size())
                 : o.jobs > 0       ? o.jobs
                                    : (o.isolate ? 1 : 0);
  if (!o.shard.empty()) plan.shard = parse_shard(o.shard);
  plan.p = prepare(o.file, o.device);
  Prepared& p = plan.p;
  // This process's team (with --jobs the children's is child_threads'; this one only measures).
  use_threads(thread_request(o.threads, p.file.threads, p.file.path, 1, usable_cpus()), plan.n_slots > 1);
  if (plan.shard) {
    plan.sweep_cases = static_cast<int64_t>(p.cases.size());
    std::vector<std::string> keys;
    for (size_t i = 0; i < p.cases.size(); ++i) keys.push_back(shard_unit_key(p.cases[i], p.resolved[i]));
    const std::vector<int64_t> owner = shard_of(keys, plan.shard->count);
    std::vector<bool> mine(owner.size());
    for (size_t i = 0; i < owner.size(); ++i) mine[i] = owner[i] == plan.shard->index;
    p.keep_only(mine);
    plan.sweep = o.sweep.empty() ? default_sweep_id(p.file.name, p.file.text, plan.shard->count) : o.sweep;
  }
  // Each of --jobs' processes holds its own model: the memory check counts them all.
  plan.at_once = p.device == "cuda" && !o.devices.empty()
                     ? 1
                     : std::max<int64_t>(1, std::min<int64_t>(plan.n_slots, static_cast<int64_t>(p.cases.size())));
  return plan;
}

std::string RunPlan::note() const {
  std::string what = p.case_counts();
  if (shard)
    what = "shard " + std::to_string(shard->index) + "/" + std::to_string(shard->count) + " of sweep " + sweep + ": " +
           what + " of " + std::to_string(sweep_cases);
  const size_t avail = available_memory(p.device);
  return p.file.name + ": " + what + " on " + p.device + " with " + tile::team().why + "; largest model needs " +
         mib(static_cast<double>(p.max_model_bytes)) +
         (at_once > 1 ? " (x" + std::to_string(at_once) + " processes at once)" : "") + " (" +
         mib(static_cast<double>(avail)) + " available" + (p.device == "cuda" ? " on the GPU)" : ")");
}

std::optional<Resume> find_resume(const store::Store& db, const RunOptions& o, const RunPlan& plan, Progress& progress,
                                  int64_t* completed) {
  const std::string sha = sha256_hex(plan.p.file.text);
  int64_t run_id = 0;
  if (o.resume == "auto") {
    const auto last =
        store::latest_matching_run(db, sha, plan.shard ? std::optional<std::string>(plan.sweep) : std::nullopt,
                                   plan.shard ? plan.shard->index : 0);
    if (!last) return std::nullopt;
    if (last->second == "completed") {
      progress.note("run " + std::to_string(last->first) + " of this experiment" + (plan.shard ? " shard" : "") +
                    " already completed: nothing to do");
      *completed = last->first;
      return std::nullopt;
    }
    run_id = last->first;
    progress.note("resuming run " + std::to_string(run_id) + " (" + last->second + ")");
  } else if (!o.resume.empty()) {
    try {
      size_t used = 0;
      run_id = std::stoll(o.resume, &used);
      if (used != o.resume.size() || run_id <= 0) throw std::invalid_argument("");
    } catch (const std::logic_error&) {
      throw Error("--resume '" + o.resume + "': expected a run id or auto");
    }
  } else {
    return std::nullopt;
  }
  // The run must come from this experiment text and shard, and must not be running.
  const std::string what = "--resume " + std::to_string(run_id) + ": run " + std::to_string(run_id);
  const auto r = store::run_identity(db, run_id);
  if (!r) throw Error("--resume " + std::to_string(run_id) + ": no run " + std::to_string(run_id) + " in " + db.path());
  if (r->experiment_sha256 != sha)
    throw Error(what + " was made from another experiment text than " + plan.p.file.path + " (sha256 " +
                r->experiment_sha256.substr(0, 12) + "...); resume it with the same file");
  if (r->status == "running")
    throw Error(what + " is still running (pid " + (r->pid ? std::to_string(*r->pid) : std::string("unknown")) +
                " on " + r->hostname + ")");
  const std::string its_shard =
      r->shard_index ? std::to_string(*r->shard_index) + "/" + std::to_string(r->shard_count.value_or(0)) : "";
  const std::string our_shard =
      plan.shard ? std::to_string(plan.shard->index) + "/" + std::to_string(plan.shard->count) : "";
  const std::string its_sweep = r->sweep.value_or("");
  if (its_shard != our_shard || (plan.shard && its_sweep != plan.sweep))
    throw Error(what + " is " + (its_shard.empty() ? "not a shard" : "shard " + its_shard + " of sweep " + its_sweep) +
                ", not " + (our_shard.empty() ? "a whole run" : "shard " + our_shard + " of sweep " + plan.sweep) +
                "; resume it with the same --shard" + (its_shard.empty() ? "" : " " + its_shard));
  return Resume{run_id, store::load_run(db, run_id)};
}

int64_t child_threads(const RunOptions& o, const RunPlan& plan) {
  const tile::TeamRequest r =
      thread_request(o.threads, plan.p.file.threads, plan.p.file.path, plan.n_slots, usable_cpus());
  return r.threads > 0 ? r.threads : -1;
}

DeviceInfo measure_device(const RunOptions& o, const RunPlan& plan, const std::vector<ChildSlot>& slots,
                          int64_t threads) {
  const Prepared& p = plan.p;
  if (plan.n_slots <= 1) return describe_device(p.device, p.device_note);
  // On GPUs the ceilings are the device's (each process of --devices has one of its own).
  if (p.device == "cuda")
    return describe_cuda(p.device_note + "; " + std::to_string(plan.n_slots) + " processes at once");
  // The ceilings (MFU's denominator) as one process sees them: on one slot's cores with its threads.
  tile::TeamRequest r = thread_request(o.threads, p.file.threads, p.file.path, plan.n_slots, usable_cpus());
  r.threads = static_cast<int>(threads);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &slots[0].cpus)) r.within.push_back(c);
  const auto cpus = static_cast<int64_t>(allowed_cpus().size());
  const tile::TeamRequest before = tile::team_request();
  tile::set_team(r);
  DeviceInfo device = describe_cpu(
      p.device_note + "; " + std::to_string(plan.n_slots) + " processes at once (" +
      (o.devices.empty() ? "--jobs" : "--devices") + "), each with " + std::to_string(threads) +
      " threads on its own cores" +
      (plan.n_slots * threads > cpus ? " (more than the " + std::to_string(cpus) + " cores: they share cores)" : ""));
  tile::set_team(before);
  return device;
}

store::RunInfo run_info(const RunOptions& o, const RunPlan& plan, const DeviceInfo& device) {
  const Prepared& p = plan.p;
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
    if (lib) entry["sha256"] = sha256_hex(std::string(std::istreambuf_iterator<char>(lib), {}));
    plugins.push_back(entry);
  }
  info.plugins_json = plugins.dump();
  info.device = device.kind;
  info.device_json = device.json();
  info.compiler = build_info().compiler;
  info.build_flags = build_info().flags;
  info.seed = p.resolved.empty() ? 0 : p.resolved.front().seed;
  info.command_line = "bench run " + o.file;
  if (plan.shard) info.command_line += " --shard " + o.shard + " --sweep " + plan.sweep;
  if (o.jobs > 0) info.command_line += " --jobs " + std::to_string(o.jobs);
  if (!o.devices.empty()) {
    info.command_line += " --devices ";
    for (size_t i = 0; i < o.devices.size(); ++i) info.command_line += (i ? "," : "") + std::to_string(o.devices[i]);
  }
  if (o.isolate) info.command_line += " --isolate";
  info.hostname = this_host();
  info.n_cases = static_cast<int64_t>(p.cases.size());
  info.pid = getpid();
  if (plan.shard) {
    info.sweep = plan.sweep;
    info.shard_index = plan.shard->index;
    info.shard_count = plan.shard->count;
    info.sweep_cases = plan.sweep_cases;
  }
  info.started_at = store::now_utc();
  return info;
}

store::RunData run_header(int64_t run_id, const store::RunInfo& info) {
  store::RunData r;
  r.id = run_id;
  r.seed = info.seed;
  r.n_cases = info.n_cases;
  r.experiment_name = info.experiment_name;
  r.experiment_path = info.experiment_path;
  r.experiment_text = info.experiment_text;
  r.status = "running";
  r.started_at = info.started_at;
  r.git_sha = info.git_sha;
  r.harness_version = info.harness_version;
  r.plugins_json = info.plugins_json;
  r.device = info.device;
  r.device_json = info.device_json;
  r.compiler = info.compiler;
  r.build_flags = info.build_flags;
  r.command_line = info.command_line;
  r.hostname = info.hostname;
  return r;
}

std::string this_host() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

std::unique_ptr<Executor> make_executor(const RunOptions& /*o*/, const RunPlan& plan, const RunnerEnv& env,
                                        const std::vector<ChildSlot>& slots, int64_t threads,
                                        const posix_spawnattr_t* spawn) {
  if (plan.n_slots == 0) return std::make_unique<InProcessExecutor>(env);
  ChildOptions c;
  c.command = {"/proc/self/exe", "bench", "-q", "run-case"};
  c.spawn = spawn;
  c.slots = slots;
  c.plugin_paths = plan.p.file.plugin_paths;
  c.device_json = env.device.json();
  c.threads = threads;
  c.weights_dir = env.weights_dir;
  c.db_dir = env.db_dir;
  c.stop = env.stop;
  return std::make_unique<ChildExecutor>(std::move(c));
}

std::vector<Job> pending_jobs(const RunPlan& plan, const std::optional<Resume>& resume) {
  std::vector<Job> jobs;
  for (size_t i = 0; i < plan.p.cases.size(); ++i) {
    const bool done =
        resume && std::any_of(resume->stored.cases.begin(), resume->stored.cases.end(), [&](const auto& c) {
          return c.ordinal == plan.p.cases[i].ordinal && c.result.finished();
        });
    if (!done) jobs.push_back(job_of(plan, i));
  }
  return jobs;
}

void finish_runners(const RunPlan& plan, const std::optional<Resume>& resume, const std::vector<size_t>& ran,
                    const std::vector<CaseResult>& results, const std::vector<ResultSink*>& sinks) {
  const auto& cases = plan.p.cases;
  std::vector<CaseResult> stored(cases.size());
  std::vector<size_t> order;  // finished before (in case order), then in the order they ended now
  if (resume)
    for (size_t i = 0; i < cases.size(); ++i)
      for (const CaseRow& c : resume->stored.cases)
        if (c.ordinal == cases[i].ordinal && c.result.finished() && std::find(ran.begin(), ran.end(), i) == ran.end()) {
          stored[i] = c.result;
          order.push_back(i);
        }
  for (const size_t i : ran)
    if (results[i].finished()) order.push_back(i);
  for (const Runner* r : runners()) {
    std::vector<FinishedCase> mine;
    for (const size_t i : order)
      if (cases[i].runner == r->name())
        mine.push_back(
            {i, &plan.p.resolved[i], std::find(ran.begin(), ran.end(), i) != ran.end() ? &results[i] : &stored[i]});
    for (const CaseMetrics& m : r->finish(mine)) {
      const Job job = job_of(plan, m.index);
      for (ResultSink* s : sinks) s->added(job, m.metrics);
    }
  }
}

}  // namespace bench::cli
