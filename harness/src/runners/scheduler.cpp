#include "runners/scheduler.h"

#include <algorithm>

#include "bench/error.h"

namespace bench {

ResultSink::~ResultSink() = default;
void ResultSink::started(const Job& /*job*/) {}
void ResultSink::added(const Job& /*job*/, const std::vector<Metric>& /*metrics*/) {}

Executor::~Executor() = default;

const std::vector<MetricSpec>& budget_metrics() {
  static const std::vector<MetricSpec> specs = {
      MetricSpec("params_non_embedding", "params"),
      MetricSpec("params_total", "params"),
      MetricSpec("flops_per_token", "FLOP/token"),
      MetricSpec("train_tokens", "tokens"),
      MetricSpec("train_flops_total", "FLOP"),
      MetricSpec("match_target").any_unit(),  // params or FLOP: what the experiment matched
      MetricSpec("match_gap"),
  };
  return specs;
}

namespace {

// What the case spends (and for a matched experiment, what it was held to), stored as metrics with
// every case whatever became of it: the budget is the case's configuration, not a measurement.
void add_budget_metrics(const Budget& b, CaseResult& r) {
  const auto add = [&](const char* name, double value, const char* unit) {
    if (!r.metric(name)) r.metrics.push_back(Metric{name, value, unit});
  };
  if (b.params_total == 0) return;  // not measured (a case run outside prepare)
  add("params_non_embedding", static_cast<double>(b.params_non_embedding), "params");
  add("params_total", static_cast<double>(b.params_total), "params");
  add("flops_per_token", b.flops_per_token, "FLOP/token");
  if (b.train_tokens > 0) {
    add("train_tokens", static_cast<double>(b.train_tokens), "tokens");
    add("train_flops_total", b.train_flops_total, "FLOP");
  }
  if (!b.match.empty()) {
    add("match_target", b.match_target, b.match == "params" ? "params" : "FLOP");
    add("match_gap", b.match_gap, "");
  }
}

}  // namespace

void InProcessExecutor::start(size_t /*slot*/, const Job& job) {
  if (done_) throw Error("InProcessExecutor: a job was started before the last one was collected");
  env_.prefix = job.prefix;
  done_.emplace(job.index, run_case(*job.runner, *job.c, *job.rc, env_));
}

std::optional<std::pair<size_t, CaseResult>> InProcessExecutor::wait(std::chrono::milliseconds /*timeout*/) {
  std::optional<std::pair<size_t, CaseResult>> out;
  out.swap(done_);
  return out;
}

std::vector<size_t> schedule(const std::vector<Job>& jobs, Executor& executor, const std::vector<ResultSink*>& sinks,
                             const std::atomic<bool>& stop) {
  const size_t n_slots = std::max<size_t>(1, executor.slots());
  std::vector<std::optional<size_t>> slot_job(n_slots);  // the position in `jobs` each slot runs
  size_t next = 0, running = 0;
  bool told = false;
  std::vector<size_t> ran;
  while (next < jobs.size() || running > 0) {
    while (!stop && next < jobs.size() && running < n_slots) {
      const size_t slot =
          static_cast<size_t>(std::find(slot_job.begin(), slot_job.end(), std::nullopt) - slot_job.begin());
      const Job& job = jobs[next];
      for (ResultSink* s : sinks) s->started(job);
      slot_job[slot] = next++;
      ++running;
      executor.start(slot, job);
    }
    if (stop && !told) {
      executor.stop();
      told = true;
    }
    if (running == 0) break;  // stopped before the rest started
    auto done = executor.wait(std::chrono::milliseconds(20));
    if (!done) continue;
    const auto it = std::find_if(slot_job.begin(), slot_job.end(),
                                 [&](const std::optional<size_t>& j) { return j && jobs[*j].index == done->first; });
    if (it == slot_job.end()) throw Error("the executor returned a job it was not running");
    const Job& job = jobs[**it];
    it->reset();
    --running;
    ran.push_back(job.index);
    if (job.rc != nullptr) add_budget_metrics(job.rc->budget, done->second);
    for (ResultSink* s : sinks) s->finished(job, done->second);
  }
  return ran;
}

}  // namespace bench
