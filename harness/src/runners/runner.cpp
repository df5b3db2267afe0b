#include "runners/runner.h"

#include <chrono>

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

}  // namespace bench
