#include "runners/child.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/error.h"
#include "experiment/case_json.h"
#include "kernels/tile/threads.h"
#include "plugins/registry.h"
#include "runners/registry.h"
#include "runners/result_json.h"
#include "runners/threads.h"

namespace bench {

namespace fs = std::filesystem;

namespace {

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

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Writes `text` to `path` whole or not at all (a reader never sees half of it).
void write_whole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".part";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw Error("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot write " + path + ": " + ec.message());
}

}  // namespace

std::vector<int> allowed_cpus() {
  // The process's set, not the calling thread's: a pinned team narrows the caller to one CPU.
  std::vector<int> out = tile::available_cpus();
  if (out.empty())
    for (int c = 0; c < static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); ++c) out.push_back(c);
  return out;
}

std::vector<ChildSlot> make_child_slots(int64_t n_slots, int64_t threads, const std::vector<int64_t>& devices) {
  const std::vector<int> cpus = allowed_cpus();
  std::vector<ChildSlot> slots(static_cast<size_t>(n_slots));
  for (int64_t i = 0; i < n_slots; ++i) {
    ChildSlot& s = slots[static_cast<size_t>(i)];
    std::vector<int> mine;
    for (int64_t t = 0; t < threads; ++t)
      mine.push_back(cpus[static_cast<size_t>((i * threads + t) % static_cast<int64_t>(cpus.size()))]);
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    CPU_ZERO(&s.cpus);
    for (const int c : mine) CPU_SET(c, &s.cpus);
    s.pinned = true;
    const std::string cores = (mine.size() == 1 ? "core " : "cores ") + cpu_list(mine);
    if (!devices.empty()) {
      s.cuda_visible = std::to_string(devices[static_cast<size_t>(i)]);
      s.placement = "CUDA device " + s.cuda_visible + ", " + cores;
    } else {
      s.placement = "job " + std::to_string(i + 1) + "/" + std::to_string(n_slots) + ", " + cores;
    }
  }
  return slots;
}

std::string child_failure(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (abbrev ? " (SIG" + std::string(abbrev) + ")" : "");
  }
  if (WIFEXITED(status)) return "its process exited with status " + std::to_string(WEXITSTATUS(status));
  return "its process ended abnormally";
}

ChildExecutor::ChildExecutor(ChildOptions options) : options_(std::move(options)) {
  const fs::path base = [] {
    std::error_code ec;
    const fs::path t = fs::temp_directory_path(ec);
    return ec ? fs::path("/tmp") : t;
  }();
  std::string pattern = (base / "bench-run-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr)
    throw Error("cannot create a directory for the cases of child processes under " + base.string() + ": " +
                std::strerror(errno));
  dir_ = pattern;
}

ChildExecutor::~ChildExecutor() {
  // Children still running (the run ended on an error): stopped, and waited for, before their
  // files go.
  for (const auto& [pid, r] : running_) kill(pid, SIGTERM);
  for (const auto& [pid, r] : running_) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void ChildExecutor::start(size_t slot, const Job& job) {
  const ChildSlot* where = options_.slots.empty() ? nullptr : &options_.slots.at(slot);
  const std::string stem = (fs::path(dir_) / ("case-" + std::to_string(job.c->ordinal))).string();
  Running r{job.index, slot, stem + ".json", stem + ".result.json"};
  CaseTask task{case_json(*job.c, *job.rc), options_.plugin_paths, options_.device_json,
                options_.threads,           options_.weights_dir,  options_.db_dir};
  write_whole(r.task, task_json(task));
  std::error_code ec;
  fs::remove(r.result, ec);

  std::vector<std::string> args = options_.command;
  args.insert(args.end(), {r.task, r.result});
  std::vector<char*> argv;
  for (size_t i = 1; i < args.size(); ++i) argv.push_back(args[i].data());  // args[0] is the program's path
  argv.push_back(nullptr);
  // The child's environment: ours, with CUDA_VISIBLE_DEVICES set for a device slot.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e)
    if (where == nullptr || where->cuda_visible.empty() || std::string_view(*e).rfind("CUDA_VISIBLE_DEVICES=", 0) != 0)
      env_strings.emplace_back(*e);
  if (where != nullptr && !where->cuda_visible.empty())
    env_strings.push_back("CUDA_VISIBLE_DEVICES=" + where->cuda_visible);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  // The child inherits the CPU affinity of the thread that spawns it: set this thread to the
  // slot's cores for the spawn, then give it back its own. Without a slot (--isolate, --jobs 1)
  // the child gets every CPU this process may use: the spawning thread may be thread 0 of a
  // pinned team, held to one CPU, and the child would inherit that one CPU.
  cpu_set_t mine, target;
  CPU_ZERO(&mine);
  CPU_ZERO(&target);
  if (where != nullptr && where->pinned) {
    target = where->cpus;
  } else {
    for (const int c : allowed_cpus()) CPU_SET(c, &target);
  }
  const bool pin = sched_getaffinity(0, sizeof mine, &mine) == 0;
  if (pin) sched_setaffinity(0, sizeof target, &target);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args.front().c_str(), nullptr, options_.spawn, argv.data(), envp.data());
  if (pin) sched_setaffinity(0, sizeof mine, &mine);
  if (rc != 0) throw Error("cannot start a child process for case " + std::to_string(job.c->ordinal));
  running_.emplace(pid, std::move(r));
}

std::optional<std::pair<size_t, CaseResult>> ChildExecutor::wait(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(-1, &status, WNOHANG);
    if (done < 0 && errno != EINTR && errno != ECHILD) throw Error("lost the child processes of the run");
    const auto it = done > 0 ? running_.find(done) : running_.end();
    if (it != running_.end()) {
      const Running r = it->second;
      running_.erase(it);
      CaseResult result;
      std::error_code ec;
      try {
        result = result_from_json(read_all(r.result));
      } catch (const Error&) {  // it died before it wrote its result
        result = CaseResult{};
        result.status = options_.stop != nullptr && options_.stop->load() ? "interrupted" : "failed";
        result.error = child_failure(status);
      }
      result.placement = options_.slots.empty() ? "" : options_.slots[r.slot].placement;
      fs::remove(r.task, ec);
      fs::remove(r.result, ec);
      return std::make_pair(r.index, std::move(result));
    }
    if (done > 0) continue;  // not one of ours
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void ChildExecutor::stop() {
  for (const auto& [pid, r] : running_) kill(pid, SIGTERM);
}

std::string task_json(const CaseTask& t) {
  const nlohmann::ordered_json j = {{"case", nlohmann::ordered_json::parse(t.case_json)},
                                    {"plugin_paths", t.plugin_paths},
                                    {"device", nlohmann::ordered_json::parse(t.device_json)},
                                    {"threads", t.threads},
                                    {"weights_dir", t.weights_dir},
                                    {"db_dir", t.db_dir}};
  return j.dump();
}

CaseTask task_from_json(const std::string& text) {
  CaseTask t;
  try {
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
    t.case_json = j.at("case").dump();
    t.plugin_paths = j.at("plugin_paths").get<std::vector<std::string>>();
    t.device_json = j.at("device").dump();
    t.threads = j.at("threads").get<int64_t>();
    t.weights_dir = j.at("weights_dir").get<std::string>();
    t.db_dir = j.at("db_dir").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("not a case task: ") + e.what());
  }
  return t;
}

int run_case_task(const std::string& task_path, const std::string& result_path, const std::atomic<bool>* stop) {
  CaseResult result;
  try {
    const CaseTask task = task_from_json(read_all(task_path));
    Registry registry;
    registry.load_defaults();
    for (const auto& dir : task.plugin_paths) registry.load_directory(dir, true);
    const auto [c, rc] = case_from_json(task.case_json, registry, runner_sections());
    // The parent decided the count (cli/run_setup.cpp: child_threads); -1: the default.
    use_threads({static_cast<int>(std::max<int64_t>(task.threads, 0)), task.threads > 0 ? "the parent's" : "", {}},
                true);
    const DeviceInfo device = device_from_json(task.device_json);
    Progress progress(true);
    RunnerEnv env{registry, device, progress, "", stop, task.weights_dir, task.db_dir};
    result = run_case(runner_of(c), c, rc, env);
  } catch (const std::exception& e) {
    result = CaseResult{};
    result.status = "failed";
    result.error = e.what();
  }
  write_whole(result_path, result_json(result));
  return result.status == "failed" ? 1 : 0;
}

}  // namespace bench
