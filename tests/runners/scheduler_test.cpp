// The scheduler without spawning anything: a scripted executor (each job ends after a number of
// ticks of a virtual clock) shows how jobs go to slots, that results reach every sink once as they
// end, and what a stop does; the in-process executor runs a scripted runner.
#include "runners/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>

#include "support/toml_case.h"

namespace bench {
namespace scheduler_test {
namespace {

/// Job i runs for durations[i] ticks; wait() moves the clock to the next end. A job that is
/// running when stop() is called ends at once as "interrupted".
class ScriptedExecutor final : public Executor {
 public:
  ScriptedExecutor(size_t slots, std::vector<int> durations) : slots_(slots), durations_(std::move(durations)) {}
  size_t slots() const override { return slots_; }
  void start(size_t slot, const Job& job) override {
    if (job.index == throw_at) throw Error("cannot start job " + std::to_string(job.index));
    EXPECT_LT(slot, slots_);
    for (const Running& r : running_) EXPECT_NE(r.slot, slot) << "slot " << slot << " is busy";
    starts.push_back({job.index, slot, clock_});
    running_.push_back({job.index, slot, clock_ + durations_.at(job.index)});
    max_running = std::max(max_running, running_.size());
  }
  std::optional<std::pair<size_t, CaseResult>> wait(std::chrono::milliseconds) override {
    if (running_.empty()) {
      ADD_FAILURE() << "wait() with nothing running";
      return std::nullopt;
    }
    const auto next = std::min_element(running_.begin(), running_.end(), [](const Running& a, const Running& b) {
      return a.ends != b.ends ? a.ends < b.ends : a.slot < b.slot;
    });
    const Running r = *next;
    running_.erase(next);
    clock_ = std::max(clock_, r.ends);
    CaseResult result;
    result.status = stopped_ ? "interrupted" : (r.index % 5 == 4 ? "failed" : "completed");
    result.metrics.push_back({"index", static_cast<double>(r.index), ""});
    return std::make_pair(r.index, result);
  }
  void stop() override {
    ++stops;
    stopped_ = true;
  }

  struct Start {
    size_t index, slot;
    int at;
  };
  std::vector<Start> starts;
  size_t max_running = 0;
  int stops = 0;
  size_t throw_at = SIZE_MAX;

 private:
  struct Running {
    size_t index, slot;
    int ends;
  };
  size_t slots_;
  std::vector<int> durations_;
  std::vector<Running> running_;
  int clock_ = 0;
  bool stopped_ = false;
};

/// Records what it is told, in order; can set the stop flag after a number of results.
class RecordingSink final : public ResultSink {
 public:
  void started(const Job& job) override { events.push_back("start " + std::to_string(job.index)); }
  void finished(const Job& job, const CaseResult& r) override {
    events.push_back("end " + std::to_string(job.index) + " " + r.status);
    EXPECT_EQ(r.metric("index").value_or(-1), static_cast<double>(job.index));
    ended.push_back(job.index);
    if (stop != nullptr && ended.size() == stop_after) *stop = true;
  }
  std::vector<std::string> events;
  std::vector<size_t> ended;
  std::atomic<bool>* stop = nullptr;
  size_t stop_after = 0;
};

std::vector<Job> jobs(size_t n) {
  std::vector<Job> out;
  for (size_t i = 0; i < n; ++i) out.push_back(Job{i, nullptr, nullptr, nullptr, "[" + std::to_string(i) + "]"});
  return out;
}

TEST(Scheduler, FillsEverySlotStartsInOrderAndHandsEachResultToEverySinkOnce) {
  ScriptedExecutor ex(3, {5, 1, 3, 2, 4, 1, 1, 2});
  RecordingSink a, b;
  const std::atomic<bool> stop{false};
  const std::vector<size_t> ran = schedule(jobs(8), ex, {&a, &b}, stop);
  // Starts in job order, at most three at once, and all three slots used from the start.
  ASSERT_EQ(ex.starts.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(ex.starts[i].index, i);
  EXPECT_EQ(ex.max_running, 3u);
  EXPECT_EQ(ex.starts[2].at, 0);
  EXPECT_EQ(ex.starts[3].at, 1) << "job 3 takes the slot job 1 freed at t=1";
  EXPECT_EQ(ex.starts[3].slot, ex.starts[1].slot);
  // Results in the order the jobs ended (t=1 job 1; t=3 job 3, then job 2; t=4 job 5; t=5 job 0,
  // then job 6; t=7 job 7, then job 4: ties by slot).
  EXPECT_EQ(ran, (std::vector<size_t>{1, 3, 2, 5, 0, 6, 7, 4}));
  EXPECT_EQ(a.ended, ran);
  EXPECT_EQ(a.events, b.events);
  for (size_t i = 0; i < 8; ++i) {  // each job: started once, before it ended once
    const auto s = std::find(a.events.begin(), a.events.end(), "start " + std::to_string(i));
    const auto e = std::find_if(a.events.begin(), a.events.end(), [&](const std::string& ev) {
      return ev.rfind("end " + std::to_string(i) + " ", 0) == 0;
    });
    ASSERT_NE(s, a.events.end());
    ASSERT_NE(e, a.events.end());
    EXPECT_LT(s, e);
  }
  EXPECT_NE(std::find(a.events.begin(), a.events.end(), "end 4 failed"), a.events.end());
  EXPECT_EQ(ex.stops, 0);
}

TEST(Scheduler, OneSlotRunsOneJobAtATime) {
  ScriptedExecutor ex(1, {2, 2, 2});
  RecordingSink s;
  const std::atomic<bool> stop{false};
  EXPECT_EQ(schedule(jobs(3), ex, {&s}, stop), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(s.events, (std::vector<std::string>{"start 0", "end 0 completed", "start 1", "end 1 completed", "start 2",
                                                "end 2 completed"}));
}

TEST(Scheduler, AStopStartsNothingMoreTellsTheExecutorOnceAndWaitsForTheRunning) {
  ScriptedExecutor ex(2, {1, 3, 3, 1, 1, 1});
  RecordingSink s;
  std::atomic<bool> stop{false};
  s.stop = &stop;
  s.stop_after = 1;  // job 0 ends at t=1 while job 1 runs: job 2 never starts
  const std::vector<size_t> ran = schedule(jobs(6), ex, {&s}, stop);
  EXPECT_EQ(ex.stops, 1);
  EXPECT_EQ(ex.starts.size(), 2u) << "nothing starts after the stop";
  EXPECT_EQ(ran, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(s.events.back(), "end 1 interrupted");
}

TEST(Scheduler, AStopBeforeTheFirstJobRunsNothing) {
  ScriptedExecutor ex(2, {1, 1});
  RecordingSink s;
  const std::atomic<bool> stop{true};
  EXPECT_TRUE(schedule(jobs(2), ex, {&s}, stop).empty());
  EXPECT_TRUE(s.events.empty());
  EXPECT_EQ(ex.stops, 1);
}

TEST(Scheduler, AnExecutorErrorPropagatesAfterTheResultsThatArrived) {
  ScriptedExecutor ex(1, {1, 1, 1, 1});
  ex.throw_at = 2;
  RecordingSink s;
  const std::atomic<bool> stop{false};
  EXPECT_THROW(schedule(jobs(4), ex, {&s}, stop), Error);
  EXPECT_EQ(s.ended, (std::vector<size_t>{0, 1}));
}

/// A runner whose cases fail or complete by ordinal, noting the prefix it saw.
class ScriptedRunner final : public Runner {
 public:
  std::string_view name() const override { return "scripted"; }
  const std::vector<ParamSpec>& params() const override {
    static const std::vector<ParamSpec> none;
    return none;
  }
  CaseResult run(const Case& c, const ResolvedCase&, RunnerEnv& env) const override {
    prefixes.push_back(env.prefix);
    if (c.ordinal == 1) throw Error("case 1 cannot run");
    CaseResult r;
    r.metrics.push_back({"index", static_cast<double>(c.ordinal), ""});
    return r;
  }
  ResultsTable table() const override { return {}; }
  mutable std::vector<std::string> prefixes;
};

TEST(InProcessExecutor, RunsEachCaseWhenItStartsAndRecordsAFailureAsAResult) {
  ScriptedRunner runner;
  std::vector<Case> cases(3);
  const ResolvedCase rc;
  std::vector<Job> js;
  for (size_t i = 0; i < 3; ++i) {
    cases[i].ordinal = static_cast<int64_t>(i);
    js.push_back(Job{i, &cases[i], &rc, &runner, "[" + std::to_string(i + 1) + "/3]"});
  }
  const DeviceInfo device;
  Progress progress(true);
  InProcessExecutor ex(RunnerEnv{test::builtin_registry(), device, progress, "", nullptr, "", ""});
  class Keep final : public ResultSink {
   public:
    void finished(const Job& job, const CaseResult& r) override { results[job.index] = r; }
    std::map<size_t, CaseResult> results;
  } keep;
  const std::atomic<bool> stop{false};
  EXPECT_EQ(schedule(js, ex, {&keep}, stop), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(runner.prefixes, (std::vector<std::string>{"[1/3]", "[2/3]", "[3/3]"}));
  EXPECT_EQ(keep.results.at(0).status, "completed");
  EXPECT_EQ(keep.results.at(1).status, "failed");
  EXPECT_EQ(keep.results.at(1).error, "case 1 cannot run");
  EXPECT_EQ(keep.results.at(2).metric("index"), 2.0);
  for (const auto& [i, r] : keep.results) {
    EXPECT_EQ(r.started_at.size(), 24u) << r.started_at;  // 2026-12-01T12:34:56.789Z
    EXPECT_LE(r.started_at, r.finished_at);
    EXPECT_GE(r.wall_s, 0.0);
  }
}

}  // namespace
}  // namespace scheduler_test
}  // namespace bench
