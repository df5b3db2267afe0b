// Child processes without `bench`: ChildExecutor runs /bin/sh scripts in its place, which read the
// task file it writes and write (or do not write) a result file. What reaches the caller: the
// result the child wrote, with the slot's placement; a child that died without one fails its case
// saying how; after a stop, a child killed by it is "interrupted"; a device slot sees only its device.
#include "runners/child.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>

#include <atomic>
#include <fstream>

#include "experiment/case_json.h"
#include "runners/result_json.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace child_test {
namespace {

const char* const kToml =
    "[model]\nd_model = 16\nn_heads = 2\nn_layers = 1\nseq_len = 8\nbatch_size = 2\n[stability]\n";

/// Spawn attributes that give a child the default SIGINT and SIGTERM and an empty mask, as `bench
/// run` gives its children (cli/signals.h): the test may run under a parent that blocks them.
class DefaultSignals {
 public:
  DefaultSignals() {
    posix_spawnattr_init(&attr_);
    sigset_t empty, stop;
    sigemptyset(&empty);
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    posix_spawnattr_setsigmask(&attr_, &empty);
    posix_spawnattr_setsigdefault(&attr_, &stop);
    posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  ~DefaultSignals() { posix_spawnattr_destroy(&attr_); }
  DefaultSignals(const DefaultSignals&) = delete;
  DefaultSignals& operator=(const DefaultSignals&) = delete;
  const posix_spawnattr_t* get() const { return &attr_; }

 private:
  posix_spawnattr_t attr_{};
};

/// Runs one job whose child is `sh -c script` (TASK and RESULT as $1 and $2) and returns its result.
struct OneChild {
  explicit OneChild(const std::string& script, std::vector<ChildSlot> slots = {}) {
    cases = test::cases_of(kToml);
    rc = test::resolve(cases.at(0));
    ChildOptions o;
    o.command = {"/bin/sh", "sh", "-c", script, "sh"};
    o.spawn = signals.get();
    o.slots = std::move(slots);
    o.device_json = DeviceInfo{}.json();
    o.stop = &stop;
    executor = std::make_unique<ChildExecutor>(std::move(o));
    job = Job{7, &cases.at(0), &rc, nullptr, "[1/1]"};
  }
  CaseResult run(bool stop_first = false) {
    executor->start(0, job);
    if (stop_first) {
      stop = true;
      executor->stop();
    }
    for (;;)
      if (auto done = executor->wait(std::chrono::milliseconds(200))) {
        EXPECT_EQ(done->first, 7u);
        return done->second;
      }
  }
  DefaultSignals signals;
  std::vector<Case> cases;
  ResolvedCase rc;
  std::atomic<bool> stop{false};
  std::unique_ptr<ChildExecutor> executor;
  Job job;
};

TEST(ChildExecutor, TheChildsResultComesBackWithItsSlotsPlacement) {
  CaseResult written;
  written.status = "diverged";
  written.error = "non-finite loss at step 3";
  written.metrics = {{"final_loss", std::numeric_limits<double>::quiet_NaN(), "nats"}, {"lr", 0.1 + 0.2, ""}};
  written.steps = {{0, 1e-3, 5.5, std::numeric_limits<double>::infinity(), 1.0, 2.0, 0.0, 3.25}};
  const std::string copy = test::write_temp("child_task_copy.json", "");
  // The child keeps a copy of its task (to check below) and writes the result.
  OneChild child("cp \"$1\" " + copy + " && printf '%s' '" + result_json(written) + "' > \"$2\"",
                 make_child_slots(2, 1, {}));
  const CaseResult r = child.run();
  EXPECT_EQ(r.status, "diverged");
  EXPECT_EQ(r.error, written.error);
  EXPECT_TRUE(std::isnan(r.metric("final_loss").value()));
  EXPECT_EQ(r.metric("lr"), 0.1 + 0.2);
  EXPECT_TRUE(std::isinf(r.steps.at(0).grad_norm));
  EXPECT_EQ(r.placement.rfind("job 1/2, core", 0), 0u) << r.placement;
  // The task: the case itself, resolved, not the experiment file.
  const CaseTask task = task_from_json(test::read_file(copy));
  const auto [c, rc] = case_from_json(task.case_json, test::builtin_registry(), runner_sections());
  EXPECT_EQ(c.ordinal, child.cases[0].ordinal);
  EXPECT_EQ(c.label, child.cases[0].label);
  EXPECT_EQ(resolved_json(rc), resolved_json(child.rc));
  EXPECT_EQ(task.device_json, DeviceInfo{}.json());
}

TEST(ChildExecutor, AChildThatDiesWithoutAResultFailsItsCaseSayingHow) {
  EXPECT_EQ(OneChild("exit 3").run().error, "its process exited with status 3");
  const CaseResult killed = OneChild("kill -9 $$").run();
  EXPECT_EQ(killed.status, "failed");
  EXPECT_EQ(killed.error, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(OneChild("printf 'not json' > \"$2\"").run().status, "failed");
}

TEST(ChildExecutor, AStopIsPassedOnAndTheCaseIsInterrupted) {
  const CaseResult r = OneChild("exec sleep 30").run(/*stop_first=*/true);
  EXPECT_EQ(r.status, "interrupted");
  EXPECT_EQ(r.error, "killed by signal 15 (SIGTERM)");
}

TEST(ChildExecutor, ADeviceSlotSeesOnlyItsDevice) {
  const std::string out = test::write_temp("child_cuda_visible.txt", "");
  const CaseResult r =
      OneChild("printf '%s' \"$CUDA_VISIBLE_DEVICES\" > " + out + "; exit 0", make_child_slots(2, 1, {5, 3})).run();
  EXPECT_EQ(test::read_file(out), "5");
  EXPECT_EQ(r.placement.rfind("CUDA device 5, core", 0), 0u) << r.placement;
  EXPECT_EQ(r.error, "its process exited with status 0");  // it wrote no result
}

TEST(ChildSlots, EachSlotHasItsOwnCoresWhileThereAreEnough) {
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  const auto slots = make_child_slots(2, 1, {});
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_TRUE(CPU_ISSET(cpus[0], &slots[0].cpus));
  EXPECT_EQ(CPU_COUNT(&slots[0].cpus), 1);
  if (cpus.size() >= 2) {
    EXPECT_FALSE(CPU_ISSET(cpus[0], &slots[1].cpus));
  }
  EXPECT_EQ(slots[1].placement.rfind("job 2/2, core", 0), 0u);
}

}  // namespace
}  // namespace child_test
}  // namespace bench
