#include "store/run_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "bench/error.h"
#include "store/tables.h"

namespace bench::store {

namespace {

std::string text(const Value& v) { return v.is_string() ? v.as_string() : (v.is_null() ? std::string() : v.str()); }
double number(const Value& v) { return v.is_number() ? v.as_double() : std::numeric_limits<double>::quiet_NaN(); }
int mode_rank(const std::string& mode) {
  if (mode == "forward") return 0;
  if (mode == "forward_backward") return 1;
  if (mode == "train_step") return 2;
  return 3;
}

}  // namespace

void sort_modes(std::vector<Timing>& modes) {
  std::stable_sort(modes.begin(), modes.end(), [](const Timing& x, const Timing& y) {
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
  const Value run = Value::integer(run_id);
  const auto& case_columns = case_table().columns;
  const auto cases = db.query(
      fmt::format("SELECT id, {} FROM cases WHERE run_id = ?1 ORDER BY ordinal", column_list(case_columns, "")), {run});
  std::map<int64_t, size_t> index;
  for (const auto& row : cases.rows) {
    CaseRow c;
    c.id = row[0].as_int();
    for (size_t i = 0; i < case_columns.size(); ++i) case_columns[i].set(c, row[i + 1]);
    index[c.id] = d.cases.size();
    d.cases.push_back(std::move(c));
  }
  for_each_row_table([&](const auto& table) {
    const auto rows = db.query(fmt::format("SELECT t.case_id, {} FROM {} t JOIN cases c ON c.id = t.case_id WHERE "
                                           "c.run_id = ?1 ORDER BY t.case_id, t.rowid",
                                           column_list(table.columns, "t."), table.name),
                               {run});
    for (const auto& row : rows.rows) {
      auto& list = d.cases[index.at(row[0].as_int())].result.*table.rows;
      list.emplace_back();
      for (size_t i = 0; i < table.columns.size(); ++i) table.columns[i].set(list.back(), row[i + 1]);
    }
  });
  const auto samples = db.query(
      "SELECT s.case_id, s.mode, s.ms FROM samples s JOIN cases c ON c.id = s.case_id WHERE c.run_id = ?1 "
      "ORDER BY s.case_id, s.mode, s.repetition",
      {run});
  for (const auto& row : samples.rows)
    for (Timing& t : d.cases[index.at(row[0].as_int())].result.timings)
      if (t.mode == text(row[1]) && row[2].is_number()) t.samples_ms.push_back(row[2].as_double());
  for (CaseRow& c : d.cases) {
    sort_modes(c.result.timings);
    sort_profile(c.result.profile);
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
  const auto& columns = profile_table().columns;
  const auto q = db.query(fmt::format("SELECT {} FROM profile WHERE case_id = ?1", column_list(columns, "")),
                          {Value::integer(case_id)});
  std::vector<ProfileRow> out;
  for (const auto& row : q.rows) {
    ProfileRow& p = out.emplace_back();
    for (size_t i = 0; i < columns.size(); ++i) columns[i].set(p, row[i]);
  }
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
