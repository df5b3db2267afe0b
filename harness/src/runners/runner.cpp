#include "runners/runner.h"

#include <chrono>
#include <map>
#include <set>

#include "runners/stats.h"

namespace bench {

store::CaseRow run_case(const Case& c, const ResolvedCase& rc, RunnerEnv& env) {
  const std::string started = store::now_utc();
  const auto t0 = std::chrono::steady_clock::now();
  store::CaseRow row;
  try {
    row = c.runner == "throughput" ? run_throughput(c, rc, env) : run_stability(c, rc, env);
  } catch (const std::exception& e) {
    row = store::CaseRow{};
    row.status = "failed";
    row.error = e.what();
  }
  row.ordinal = c.ordinal;
  row.runner = c.runner;
  row.label = c.label;
  row.variant = c.variant;
  row.axes_json = c.axes.json();
  row.config_json = resolved_json(rc);
  row.seed = rc.seed;
  row.started_at = started;
  row.finished_at = store::now_utc();
  row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return row;
}

std::vector<std::pair<int64_t, std::vector<store::MetricRow>>> lr_grid_metrics(const std::vector<GridCase>& cases) {
  std::map<std::string, std::vector<const GridCase*>> groups;
  for (const GridCase& c : cases) groups[c.key].push_back(&c);
  std::vector<std::pair<int64_t, std::vector<store::MetricRow>>> out;
  for (const auto& [key, members] : groups) {
    std::set<double> lrs;
    std::vector<double> finals;
    double l0 = 0;
    for (const GridCase* c : members) {
      lrs.insert(c->lr);
      finals.push_back(c->final_val_loss);
      l0 += c->initial_loss / static_cast<double>(members.size());
    }
    if (lrs.size() < 2) continue;
    const double sensitivity = lr_sensitivity(finals, l0);
    for (const GridCase* c : members)
      out.push_back({c->case_id,
                     {{"lr_sensitivity", sensitivity, "nats"}, {"lr_grid_size", static_cast<double>(lrs.size()), ""}}});
  }
  return out;
}

}  // namespace bench
