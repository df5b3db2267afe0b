#include "runners/sinks.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "runners/result_json.h"
#include "store/tables.h"

namespace bench {

CaseRow store_row(const Job& job, const CaseResult& r) {
  CaseRow row;
  row.ordinal = job.c->ordinal;
  row.runner = job.c->runner;
  row.label = job.c->label;
  row.variant = job.c->variant;
  row.axes_json = job.c->axes.json();
  row.config_json = resolved_json(*job.rc);
  row.seed = job.rc->seed;
  row.result = r;
  return row;
}

StoreSink::StoreSink(store::Store& db, int64_t run_id, std::map<int64_t, int64_t> stored)
    : db_(db), run_id_(run_id), ids_(std::move(stored)) {}

void StoreSink::started(const Job& job) {
  if (const auto it = ids_.find(job.c->ordinal); it != ids_.end()) {
    db_.remove_case(run_id_, job.c->ordinal);
    ids_.erase(it);
  }
}

void StoreSink::finished(const Job& job, const CaseResult& result) {
  ids_[job.c->ordinal] = db_.add_case(run_id_, store_row(job, result));
}

void StoreSink::added(const Job& job, const std::vector<Metric>& metrics) {
  db_.add_metrics(ids_.at(job.c->ordinal), metrics);
}

void ProgressSink::started(const Job& job) { progress_.update(job.prefix, true); }

void ProgressSink::finished(const Job& job, const CaseResult& result) {
  if (result.status == "failed") {
    ++failed_;
    progress_.note(job.prefix + ": failed: " + result.error);
    return;
  }
  progress_.note(job.prefix + ": " + result.status + job.runner->summary(result) + " (" +
                 std::to_string(result.wall_s).substr(0, 5) + " s)");
}

CaseRow case_data(const Job& job, const CaseResult& r) {
  CaseRow c = store_row(job, r);
  c.result = store::as_stored(std::move(c.result));
  return c;
}

CaseRow& ResultsSink::case_of(int64_t ordinal) {
  for (auto& c : run_.cases)
    if (c.ordinal == ordinal) return c;
  throw Error("no case " + std::to_string(ordinal) + " in the results");
}

void ResultsSink::finished(const Job& job, const CaseResult& result) {
  CaseRow c = case_data(job, result);
  auto& cases = run_.cases;
  const auto at = std::find_if(cases.begin(), cases.end(), [&](const auto& x) { return x.ordinal >= c.ordinal; });
  if (at != cases.end() && at->ordinal == c.ordinal)
    *at = std::move(c);
  else
    cases.insert(at, std::move(c));
}

void ResultsSink::added(const Job& job, const std::vector<Metric>& metrics) {
  std::vector<Metric>& stored = case_of(job.c->ordinal).result.metrics;
  for (Metric m : metrics) {  // as the store's INSERT OR REPLACE: a replaced metric moves to the end
    std::erase_if(stored, [&](const Metric& x) { return x.name == m.name; });
    store::as_stored(store::metric_table(), m);
    stored.push_back(std::move(m));
  }
}

void JsonLinesSink::finished(const Job& job, const CaseResult& result) {
  const nlohmann::ordered_json j = {{"ordinal", job.c->ordinal},
                                    {"runner", job.c->runner},
                                    {"label", job.c->label},
                                    {"variant", job.c->variant},
                                    {"axes", nlohmann::ordered_json::parse(job.c->axes.json())},
                                    {"config", nlohmann::ordered_json::parse(resolved_json(*job.rc))},
                                    {"result", nlohmann::ordered_json::parse(result_json(result))}};
  out_ << j.dump() << '\n' << std::flush;
}

void JsonLinesSink::added(const Job& job, const std::vector<Metric>& metrics) {
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (const Metric& m : metrics)
    added.push_back({{"name", m.name},
                     {"value", std::isfinite(m.value) ? nlohmann::ordered_json(m.value) : nullptr},
                     {"unit", m.unit}});
  out_ << nlohmann::ordered_json{{"ordinal", job.c->ordinal}, {"added", added}}.dump() << '\n' << std::flush;
}

}  // namespace bench
