#include "runners/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "bench/sha256.h"
#include "plugins/registry.h"
#include "store/store.h"

namespace bench {

Runner::~Runner() = default;

void Runner::resolve(const Params& /*settings*/, ModelSpec& /*model*/) const {}

std::string Runner::group_key(const ResolvedCase& rc) const { return resolved_json(rc); }

std::vector<CaseMetrics> Runner::finish(const std::vector<FinishedCase>& /*cases*/) const { return {}; }

std::string Runner::summary(const CaseResult& /*result*/) const { return ""; }

std::string Runner::mode_note(const Timing& /*t*/) const { return ""; }

const std::vector<MetricSpec>& Runner::metrics() const {
  static const std::vector<MetricSpec> none;
  return none;
}

namespace {
bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
}  // namespace

bool MetricSpec::matches(std::string_view stored) const {
  if (stored.size() <= name.size() || stored.compare(0, name.size(), name) != 0)
    return stored == name && !layered && !numbered;
  const std::string_view rest = stored.substr(name.size());
  if (layered) return rest.size() > 2 && rest.substr(0, 2) == "_L" && all_digits(rest.substr(2));
  if (numbered) return all_digits(rest);
  return name.back() == '/';
}

std::string MetricSpec::pattern() const {
  if (layered) return name + "_L<n>";
  if (numbered) return name + "<n>";
  return name.back() == '/' ? name + "<mode>" : name;
}

const MetricSpec* Runner::declaration(std::string_view stored) const {
  for (const std::vector<MetricSpec>* list : {&metrics(), &budget_metrics()})
    for (const MetricSpec& m : *list)
      if (m.matches(stored)) return &m;
  return nullptr;
}

const std::vector<ModeMetric>& Runner::mode_metrics() const {
  static const std::vector<ModeMetric> none;
  return none;
}

const std::vector<CurveSpec>& Runner::curves() const {
  static const std::vector<CurveSpec> none;
  return none;
}

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

std::unique_ptr<Dataset> create_dataset(const ResolvedCase& rc, const RunnerEnv& env) {
  namespace fs = std::filesystem;
  std::unique_ptr<Component> c = env.registry.create(*rc.data.info, rc.data.params);
  auto* typed = dynamic_cast<Dataset*>(c.get());
  if (typed == nullptr)
    throw Error("plugin " + env.registry.origin(rc.data.info) + ": dataset '" + rc.data.info->name +
                "' does not implement bench::Dataset");
  std::unique_ptr<Dataset> ds(typed);
  (void)c.release();  // ownership moved to `ds`
  const fs::path base = env.db_dir.empty() ? fs::temp_directory_path() / "bench" : fs::path(env.db_dir);
  ds->set_cache_dir((base / "tokenizers").string());
  return ds;
}

Artifact file_artifact(const std::string& kind, const std::string& path, const RunnerEnv& env) {
  namespace fs = std::filesystem;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path rel = env.db_dir.empty() ? fs::path(path) : fs::path(path).lexically_relative(env.db_dir);
  return {kind, rel.empty() || *rel.begin() == ".." ? fs::absolute(path).string() : rel.string(),
          static_cast<int64_t>(bytes.size()), sha256_hex(bytes)};
}

double bits_per_byte(double loss_nats_per_token, int64_t tokens, int64_t bytes) {
  if (bytes <= 0) return NAN;
  return loss_nats_per_token / std::numbers::ln2 * (static_cast<double>(tokens) / static_cast<double>(bytes));
}

}  // namespace bench
