// defines: bench::ChildSlot, make_child_slots, ChildOptions, ChildExecutor, CaseTask,
// run_case_task — cases in child processes (bench run --isolate, --jobs, --devices): each child
// is this program exec'd afresh (nothing of the parent's threads or plugin state is inherited),
// receives its one resolved case in a JSON file and writes its result to another; the parent,
// the only writer of the database, hands the result to its sinks
#pragma once

#include <sched.h>
#include <spawn.h>
#include <sys/types.h>

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "runners/scheduler.h"

namespace bench {

/// Where the cases of `--jobs K` / `--devices LIST` run: each slot a process at a time, with its own
/// threads, its own cores (the CPU affinity it inherits) and, for a device, only that device.
struct ChildSlot {
  std::string placement;     ///< stored with the case: "job 2/4, cores 4-7", "CUDA device 1, cores 0-3"
  std::string cuda_visible;  ///< CUDA_VISIBLE_DEVICES for its processes; empty: inherited
  cpu_set_t cpus{};          ///< its cores
  bool pinned = false;       ///< whether `cpus` applies
};

/// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus();

/// `n_slots` slots, each with `threads` cores of its own (wrapping around when there are not
/// enough: then the slots share cores). With `devices`, slot i sees only CUDA device devices[i].
std::vector<ChildSlot> make_child_slots(int64_t n_slots, int64_t threads, const std::vector<int64_t>& devices);

/// What every child of a run gets besides its case.
struct ChildOptions {
  std::vector<std::string> command;          ///< the program and the arguments before TASK RESULT
  const posix_spawnattr_t* spawn = nullptr;  ///< signal mask and dispositions of the children
  std::vector<ChildSlot> slots;              ///< empty: one unpinned slot (--isolate)
  std::vector<std::string> plugin_paths;     ///< the experiment's, loaded after the defaults
  std::string device_json;                   ///< the run's measured device (DeviceInfo::json)
  int64_t threads = -1;                      ///< worker threads of each child; < 0: its default
  std::string weights_dir, db_dir;           ///< as RunnerEnv's
  const std::atomic<bool>* stop = nullptr;   ///< a child that died after a stop is "interrupted"
};

/// Runs each job in a child process: `command... TASK RESULT`, TASK a file holding the case and
/// ChildOptions' part of its environment (CaseTask), RESULT the file the child writes its
/// CaseResult to. A child that ends without a result fails its case with how it ended.
class ChildExecutor final : public Executor {
 public:
  explicit ChildExecutor(ChildOptions options);
  /// Stops (SIGTERM) and waits for the children still running, and removes the task files.
  ~ChildExecutor() override;
  ChildExecutor(const ChildExecutor&) = delete;
  ChildExecutor& operator=(const ChildExecutor&) = delete;
  size_t slots() const override { return options_.slots.empty() ? 1 : options_.slots.size(); }
  void start(size_t slot, const Job& job) override;
  std::optional<std::pair<size_t, CaseResult>> wait(std::chrono::milliseconds timeout) override;
  void stop() override;

 private:
  struct Running {
    size_t index;
    size_t slot;
    std::string task, result;
  };
  ChildOptions options_;
  std::string dir_;  // private temporary directory of the task and result files
  std::map<pid_t, Running> running_;
};

/// How a child process ended, in words: "killed by signal 9 (SIGKILL)".
std::string child_failure(int wait_status);

/// A child's task as it reads it (ChildExecutor writes it).
struct CaseTask {
  std::string case_json;  ///< experiment/case_json.h
  std::vector<std::string> plugin_paths;
  std::string device_json;
  int64_t threads = -1;
  std::string weights_dir, db_dir;
};

/// The task as JSON text, and back (throws bench::Error).
std::string task_json(const CaseTask& t);
CaseTask task_from_json(const std::string& text);

/// The child's side: reads the task at `task_path`, loads the plugins, runs the case and writes its
/// result to `result_path` (an error before the case could run is written as a failed result).
/// Returns 0, or 1 when the case failed. Throws bench::Error only when the result cannot be written.
int run_case_task(const std::string& task_path, const std::string& result_path, const std::atomic<bool>* stop);

}  // namespace bench
