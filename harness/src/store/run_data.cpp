#include "store/run_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "bench/error.h"

namespace bench::store {

namespace {

/// The columns profile_row reads: the case id, then a ProfileRow.
constexpr const char* kProfileColumns =
    "p.case_id, p.mode, p.scope, p.slot, p.component, p.pass, p.kernel, p.calls, p.ms, p.bytes, p.flops";

std::string text(const Value& v) { return v.is_string() ? v.as_string() : (v.is_null() ? std::string() : v.str()); }
double number(const Value& v) { return v.is_number() ? v.as_double() : std::numeric_limits<double>::quiet_NaN(); }
int mode_rank(const std::string& mode) {
  if (mode == "forward") return 0;
  if (mode == "forward_backward") return 1;
  if (mode == "train_step") return 2;
  return 3;
}

/// A row of a query of kProfileColumns, from its second column on.
ProfileRow profile_row(const std::vector<Value>& row) {
  ProfileRow p;
  p.mode = text(row[1]);
  p.scope = text(row[2]);
  p.slot = text(row[3]);
  p.component = text(row[4]);
  p.pass = text(row[5]);
  p.kernel = text(row[6]);
  p.calls = row[7].is_number() ? row[7].as_int() : 0;
  p.ms = number(row[8]);
  p.bytes = number(row[9]);
  p.flops = number(row[10]);
  return p;
}

}  // namespace

std::optional<double> CaseData::metric(const std::string& name) const {
  const auto it = metrics.find(name);
  if (it == metrics.end() || !std::isfinite(it->second.value)) return std::nullopt;
  return it->second.value;
}

void sort_modes(std::vector<ModeData>& modes) {
  std::stable_sort(modes.begin(), modes.end(), [](const ModeData& x, const ModeData& y) {
    return mode_rank(x.mode) != mode_rank(y.mode) ? mode_rank(x.mode) < mode_rank(y.mode) : x.mode < y.mode;
  });
}

void sort_profile(std::vector<ProfileRow>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& x, const ProfileRow& y) {
    if (x.mode != y.mode)
      return mode_rank(x.mode) != mode_rank(y.mode) ? mode_rank(x.mode) < mode_rank(y.mode) : x.mode < y.mode;
    if (x.ms != y.ms) return x.ms > y.ms;
    return std::tie(x.scope, x.slot, x.pass, x.kernel) < std::tie(y.scope, y.slot, y.pass, y.kernel);
  });
}

RunData load_run_header(const Store& db, int64_t run_id) {
  const auto run = db.query(
      "SELECT id, seed, n_cases, experiment_name, experiment_path, experiment_text, status, error, started_at, "
      "finished_at, git_sha, harness_version, plugins_json, device, device_json, compiler, build_flags, command_line, "
      "hostname FROM runs WHERE id = ?1",
      {Value::integer(run_id)});
  if (run.rows.empty()) throw Error(fmt::format("no run {} in {}", run_id, db.path()));
  const auto& r = run.rows.front();
  RunData d;
  d.id = r[0].as_int();
  d.seed = r[1].is_null() ? 0 : r[1].as_int();
  d.n_cases = r[2].is_null() ? 0 : r[2].as_int();
  std::string* fields[] = {&d.experiment_name, &d.experiment_path, &d.experiment_text, &d.status,
                           &d.error,           &d.started_at,      &d.finished_at,     &d.git_sha,
                           &d.harness_version, &d.plugins_json,    &d.device,          &d.device_json,
                           &d.compiler,        &d.build_flags,     &d.command_line,    &d.hostname};
  for (size_t i = 0; i < std::size(fields); ++i) *fields[i] = text(r[i + 3]);
  return d;
}

RunData load_run(const Store& db, int64_t run_id) {
  RunData d = load_run_header(db, run_id);
  const auto cases = db.query(
      "SELECT id, ordinal, seed, runner, label, variant, status, error FROM cases WHERE run_id = ?1 ORDER BY ordinal",
      {Value::integer(run_id)});
  std::map<int64_t, size_t> index;
  for (const auto& row : cases.rows) {
    CaseData c;
    c.id = row[0].as_int();
    c.ordinal = row[1].as_int();
    c.seed = row[2].is_null() ? 0 : row[2].as_int();
    c.runner = text(row[3]);
    c.label = text(row[4]);
    c.variant = text(row[5]);
    c.status = text(row[6]);
    c.error = text(row[7]);
    index[c.id] = d.cases.size();
    d.cases.push_back(std::move(c));
  }

  const auto tp = db.query(
      "SELECT t.case_id, t.mode, t.median_ms, t.mad_ms, t.min_ms, t.max_ms, t.tokens_per_s, t.flops_per_iter, "
      "t.gflops_per_s, t.mfu, t.peak_bytes, t.noise, t.max_noise, t.noisy, t.load_avg, t.steal, t.other_busy, t.cores "
      "FROM throughput t JOIN cases c ON c.id = t.case_id WHERE c.run_id = ?1",
      {Value::integer(run_id)});
  for (const auto& row : tp.rows) {
    ModeData m;
    m.mode = text(row[1]);
    m.median_ms = number(row[2]);
    m.mad_ms = number(row[3]);
    m.min_ms = number(row[4]);
    m.max_ms = number(row[5]);
    m.tokens_per_s = number(row[6]);
    m.flops_per_iter = number(row[7]);
    m.gflops_per_s = number(row[8]);
    if (row[9].is_number()) m.mfu = row[9].as_double();
    if (row[10].is_number()) m.peak_bytes = row[10].as_int();
    const auto optional_number = [](const Value& v) {
      return v.is_number() ? std::optional<double>(v.as_double()) : std::nullopt;
    };
    m.noise = optional_number(row[11]);
    m.max_noise = optional_number(row[12]);
    m.noisy = row[13].is_number() && row[13].as_int() != 0;
    m.load_avg = optional_number(row[14]);
    m.steal = optional_number(row[15]);
    m.other_busy = optional_number(row[16]);
    if (row[17].is_number()) m.cores = row[17].as_int();
    d.cases[index.at(row[0].as_int())].modes.push_back(std::move(m));
  }
  for (auto& c : d.cases) sort_modes(c.modes);

  const auto samples = db.query(
      "SELECT s.case_id, s.mode, s.ms FROM samples s JOIN cases c ON c.id = s.case_id WHERE c.run_id = ?1 "
      "ORDER BY s.case_id, s.mode, s.repetition",
      {Value::integer(run_id)});
  for (const auto& row : samples.rows) {
    CaseData& c = d.cases[index.at(row[0].as_int())];
    for (ModeData& m : c.modes)
      if (m.mode == text(row[1]) && row[2].is_number()) m.samples_ms.push_back(row[2].as_double());
  }

  const auto profile = db.query(
      fmt::format("SELECT {} FROM profile p JOIN cases c ON c.id = p.case_id WHERE c.run_id = ?1", kProfileColumns),
      {Value::integer(run_id)});
  for (const auto& row : profile.rows) d.cases[index.at(row[0].as_int())].profile.push_back(profile_row(row));
  for (auto& c : d.cases) sort_profile(c.profile);

  const auto metrics = db.query(
      "SELECT m.case_id, m.name, m.value, m.unit FROM metrics m JOIN cases c ON c.id = m.case_id WHERE c.run_id = ?1 "
      "ORDER BY m.case_id, m.rowid",
      {Value::integer(run_id)});
  for (const auto& row : metrics.rows) {
    CaseData& c = d.cases[index.at(row[0].as_int())];
    c.metrics[text(row[1])] = MetricData{number(row[2]), text(row[3])};
    c.metric_order.push_back(text(row[1]));
  }
  return d;
}

Steps load_steps(const Store& db, int64_t case_id) {
  const auto q =
      db.query("SELECT step, lr, loss, grad_norm, max_attn_logit, z_mean FROM steps WHERE case_id = ?1 ORDER BY step",
               {Value::integer(case_id)});
  Steps s;
  for (const auto& row : q.rows) {
    s.step.push_back(number(row[0]));
    s.lr.push_back(number(row[1]));
    s.loss.push_back(number(row[2]));
    s.grad_norm.push_back(number(row[3]));
    s.max_attn_logit.push_back(number(row[4]));
    s.z_mean.push_back(number(row[5]));
  }
  const auto named = db.query(
      "SELECT name, step, value FROM series WHERE case_id = ?1 AND layer IS NULL AND step >= 0 ORDER BY name, step",
      {Value::integer(case_id)});
  for (const auto& row : named.rows) {
    auto& [steps, values] = s.named[row[0].as_string()];
    steps.push_back(number(row[1]));
    values.push_back(number(row[2]));
  }
  return s;
}

std::vector<ProfileRow> load_profile(const Store& db, int64_t case_id) {
  const auto q = db.query(fmt::format("SELECT {} FROM profile p WHERE p.case_id = ?1", kProfileColumns),
                          {Value::integer(case_id)});
  std::vector<ProfileRow> out;
  for (const auto& row : q.rows) out.push_back(profile_row(row));
  sort_profile(out);
  return out;
}

std::vector<std::pair<double, double>> load_layers(const Store& db, int64_t case_id, const std::string& name,
                                                   int64_t step) {
  const auto q = db.query(
      "SELECT layer, value FROM series WHERE case_id = ?1 AND name = ?2 AND step = ?3 AND layer IS NOT NULL "
      "ORDER BY layer",
      {Value::integer(case_id), Value::string(name), Value::integer(step)});
  std::vector<std::pair<double, double>> out;
  for (const auto& row : q.rows) out.emplace_back(number(row[0]), number(row[1]));
  return out;
}

}  // namespace bench::store
