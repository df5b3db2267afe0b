#include "runners/sinks.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "runners/result_json.h"

namespace bench {

store::CaseRow store_row(const Job& job, const CaseResult& r) {
  store::CaseRow row;
  row.ordinal = job.c->ordinal;
  row.runner = job.c->runner;
  row.label = job.c->label;
  row.variant = job.c->variant;
  row.axes_json = job.c->axes.json();
  row.config_json = resolved_json(*job.rc);
  row.seed = job.rc->seed;
  row.status = r.status;
  row.error = r.error;
  row.placement = r.placement;
  row.started_at = r.started_at;
  row.finished_at = r.finished_at;
  row.wall_s = r.wall_s;
  row.n_params = r.n_params;
  row.n_params_embedding = r.n_params_embedding;
  row.flops_per_token = r.flops_per_token;
  for (const Timing& t : r.timings) {
    store::ThroughputRow tp;
    tp.mode = t.mode;
    tp.repetitions = t.repetitions, tp.iterations = t.iterations;
    tp.median_ms = t.median_ms, tp.mean_ms = t.mean_ms, tp.min_ms = t.min_ms, tp.max_ms = t.max_ms;
    tp.stddev_ms = t.stddev_ms, tp.mad_ms = t.mad_ms, tp.tokens_per_s = t.tokens_per_s;
    tp.flops_per_iter = t.flops_per_iter, tp.gflops_per_s = t.gflops_per_s, tp.mfu = t.mfu;
    tp.peak_bytes = t.peak_bytes, tp.samples_ms = t.samples_ms;
    tp.noise = t.noise, tp.max_noise = t.max_noise, tp.noisy = t.noisy;
    tp.load_avg = t.load_avg, tp.steal = t.steal, tp.other_busy = t.other_busy, tp.cores = t.cores;
    row.throughput.push_back(std::move(tp));
  }
  for (const ProfileRow& p : r.profile)
    row.profile.push_back({p.mode, p.scope, p.slot, p.component, p.pass, p.kernel, p.calls, p.ms, p.bytes, p.flops});
  for (const StepRecord& s : r.steps)
    row.steps.push_back({s.step, s.lr, s.loss, s.grad_norm, s.max_attn_logit, s.z_mean, s.z_loss, s.ms});
  for (const SeriesPoint& s : r.series) row.series.push_back({s.name, s.layer, s.step, s.value});
  for (const Metric& m : r.metrics) row.metrics.push_back({m.name, m.value, m.unit});
  for (const Artifact& a : r.artifacts) row.artifacts.push_back({a.kind, a.path, a.bytes, a.sha256});
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
  std::vector<store::MetricRow> rows;
  for (const Metric& m : metrics) rows.push_back({m.name, m.value, m.unit});
  db_.add_metrics(ids_.at(job.c->ordinal), rows);
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

store::CaseData case_data(const Job& job, const CaseResult& r) {
  store::CaseData c;
  c.ordinal = job.c->ordinal;
  c.seed = job.rc->seed;
  c.runner = job.c->runner;
  c.label = job.c->label;
  c.variant = job.c->variant;
  c.status = r.status;
  c.error = r.error;
  for (const Timing& t : r.timings) {
    store::ModeData m;
    m.mode = t.mode;
    m.samples_ms = t.samples_ms;
    m.median_ms = t.median_ms, m.mad_ms = t.mad_ms, m.min_ms = t.min_ms, m.max_ms = t.max_ms;
    m.tokens_per_s = t.tokens_per_s, m.flops_per_iter = t.flops_per_iter, m.gflops_per_s = t.gflops_per_s;
    if (t.mfu && !std::isnan(*t.mfu)) m.mfu = t.mfu;  // the store keeps NaN as NULL
    m.peak_bytes = t.peak_bytes;
    // As the store gives them back: NULL for what is not a finite number.
    const auto known = [](double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; };
    m.noise = known(t.noise), m.max_noise = known(t.max_noise), m.noisy = t.noisy;
    m.load_avg = known(t.load_avg), m.steal = known(t.steal), m.other_busy = known(t.other_busy);
    if (t.cores > 0) m.cores = t.cores;
    c.modes.push_back(std::move(m));
  }
  store::sort_modes(c.modes);
  for (const ProfileRow& p : r.profile) {
    // As the store gives them back: NaN where a number is not finite (stored as NULL).
    const auto known = [](double v) { return std::isfinite(v) ? v : std::nan(""); };
    c.profile.push_back(
        {p.mode, p.scope, p.slot, p.component, p.pass, p.kernel, p.calls, p.ms, known(p.bytes), known(p.flops)});
  }
  store::sort_profile(c.profile);
  for (const Metric& m : r.metrics) {
    c.metrics[m.name] = store::MetricData{m.value, m.unit};
    c.metric_order.push_back(m.name);
  }
  return c;
}

store::CaseData& ResultsSink::case_of(int64_t ordinal) {
  for (auto& c : run_.cases)
    if (c.ordinal == ordinal) return c;
  throw Error("no case " + std::to_string(ordinal) + " in the results");
}

void ResultsSink::finished(const Job& job, const CaseResult& result) {
  store::CaseData c = case_data(job, result);
  auto& cases = run_.cases;
  const auto at = std::find_if(cases.begin(), cases.end(), [&](const auto& x) { return x.ordinal >= c.ordinal; });
  if (at != cases.end() && at->ordinal == c.ordinal)
    *at = std::move(c);
  else
    cases.insert(at, std::move(c));
}

void ResultsSink::added(const Job& job, const std::vector<Metric>& metrics) {
  store::CaseData& c = case_of(job.c->ordinal);
  for (const Metric& m : metrics) {  // as the store's INSERT OR REPLACE: a replaced metric moves to the end
    c.metrics[m.name] = store::MetricData{m.value, m.unit};
    std::erase(c.metric_order, m.name);
    c.metric_order.push_back(m.name);
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
