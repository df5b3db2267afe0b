#include "runners/runner.h"

#include <chrono>

#include "store/store.h"

namespace bench {

Runner::~Runner() = default;

void Runner::resolve(const Params& /*settings*/, ModelSpec& /*model*/) const {}

std::string Runner::group_key(const ResolvedCase& rc) const { return resolved_json(rc); }

std::vector<CaseMetrics> Runner::finish(const std::vector<FinishedCase>& /*cases*/) const { return {}; }

std::string Runner::summary(const CaseResult& /*result*/) const { return ""; }

CaseResult run_case(const Runner& runner, const Case& c, const ResolvedCase& rc, RunnerEnv& env) {
  const std::string started = store::now_utc();
  const auto t0 = std::chrono::steady_clock::now();
  CaseResult result;
  try {
    result = runner.run(c, rc, env);
  } catch (const std::exception& e) {
    result = CaseResult{};
    result.status = "failed";
    result.error = e.what();
  }
  result.started_at = started;
  result.finished_at = store::now_utc();
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace bench
