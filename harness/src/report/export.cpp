// render_export(): every number of a run in one long table (one observation per row), built from
// the store's rows of the run (store/run_tables.h).
#include "report/export.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "bench/error.h"
#include "report/sheet.h"
#include "store/run_tables.h"

namespace bench::report {

namespace {

Value axis_value(const nlohmann::ordered_json& v) {
  if (v.is_string()) return Value::string(v.get<std::string>());
  if (v.is_number_integer()) return Value::integer(v.get<int64_t>());
  if (v.is_number()) return Value::number(v.get<double>());
  if (v.is_boolean()) return Value::boolean(v.get<bool>());
  return Value::string(v.dump());
}

struct CaseInfo {
  std::vector<Value> fixed;  ///< run_id, case_id, ordinal, runner, variant, label, case_status, case_seed
  nlohmann::ordered_json axes;
};

}  // namespace

std::string render_export(const store::Store& db, int64_t run_id, Format f) {
  const store::RunTables tables = store::load_run_tables(db, run_id);
  const auto& run = tables.run;
  const auto& cases = tables.cases;

  // Axis columns: every swept key of the run, in the order they first appear.
  std::vector<std::string> axis_keys;
  std::map<int64_t, CaseInfo> info;
  for (const auto& row : cases.rows) {
    CaseInfo ci;
    ci.fixed = {Value::integer(run_id), row[0], row[1], row[2], row[3], row[4], row[5], row[6]};
    ci.axes = nlohmann::ordered_json::parse(row[7].is_string() ? row[7].as_string() : "{}", nullptr, false);
    if (!ci.axes.is_object()) ci.axes = nlohmann::ordered_json::object();
    for (const auto& [k, v] : ci.axes.items())
      if (std::find(axis_keys.begin(), axis_keys.end(), k) == axis_keys.end()) axis_keys.push_back(k);
    info[row[0].as_int()] = std::move(ci);
  }

  Sheet s;
  for (const char* c : {"run_id", "case_id", "ordinal", "runner", "variant", "label", "case_status", "case_seed"})
    s.columns.push_back({c, c, false});
  for (const auto& k : axis_keys) s.columns.push_back({k, k, false});
  for (const char* c : {"kind", "mode", "step", "repetition", "name", "value", "unit"})
    s.columns.push_back({c, c, false});

  const auto add = [&](int64_t case_id, const char* kind, const Value& mode, const Value& step, const Value& rep,
                       std::string_view name, const Value& value, std::string_view unit) {
    const CaseInfo& ci = info.at(case_id);
    std::vector<SheetCell> cells;
    for (const Value& v : ci.fixed) cells.push_back({v, ""});
    for (const auto& k : axis_keys) cells.push_back({ci.axes.contains(k) ? axis_value(ci.axes[k]) : Value(), ""});
    for (const Value& v : {Value::string(kind), mode, step, rep, Value::string(std::string(name)), value,
                           Value::string(std::string(unit))})
      cells.push_back({v, ""});
    s.rows.push_back(std::move(cells));
  };

  const auto case_columns = store::value_columns(store::case_table());
  for (const auto& row : tables.case_values.rows)
    for (size_t i = 0; i < case_columns.size(); ++i)
      if (!row[i + 1].is_null())
        add(row[0].as_int(), "case", {}, {}, {}, case_columns[i].name, row[i + 1], case_columns[i].unit);
  const auto throughput_columns = store::value_columns(store::throughput_table());
  for (const auto& row : tables.throughput.rows)
    for (size_t i = 0; i < throughput_columns.size(); ++i)
      add(row[0].as_int(), "throughput", row[1], {}, {}, throughput_columns[i].name, row[i + 2],
          throughput_columns[i].unit);
  for (const auto& row : tables.samples.rows)
    add(row[0].as_int(), "sample", row[1], {}, row[2], "ms", row[3], store::kSampleUnit);
  // A profile row as one row per number, named "<column>/<scope>/<slot>/<component>/<pass>/<kernel>":
  // the kernel last, since its readable name is free text.
  const auto profile_columns = store::value_columns(store::profile_table());
  for (const auto& row : tables.profile.rows) {
    std::string key;
    for (size_t i = 2; i <= 6; ++i) key += "/" + row[i].as_string();
    for (size_t i = 0; i < profile_columns.size(); ++i)
      add(row[0].as_int(), "profile", row[1], {}, {}, std::string(profile_columns[i].name) + key, row[i + 7],
          profile_columns[i].unit);
  }
  const auto step_columns = store::value_columns(store::step_table());
  for (const auto& row : tables.steps.rows)
    for (size_t i = 0; i < step_columns.size(); ++i)
      add(row[0].as_int(), "step", {}, row[1], {}, step_columns[i].name, row[i + 2], step_columns[i].unit);
  for (const auto& row : tables.series.rows)
    add(row[0].as_int(), "series", {}, row[1], {}, row[2].as_string(), row[3], "");
  for (const auto& row : tables.metrics.rows)
    add(row[0].as_int(), "metric", {}, {}, {}, row[1].as_string(), row[2],
        row[3].is_string() ? row[3].as_string() : "");

  if (f != Format::kJson) return sheet_csv(s);

  nlohmann::ordered_json j;
  auto& r = j["run"];
  for (size_t c = 0; c < run.columns.size(); ++c) r[run.columns[c]] = json_of(run.rows[0][c]);
  j["cases"] = nlohmann::ordered_json::array();
  for (const auto& row : cases.rows) {
    nlohmann::ordered_json c;
    c["case_id"] = row[0].as_int();
    c["ordinal"] = row[1].as_int();
    c["runner"] = json_of(row[2]);
    c["variant"] = json_of(row[3]);
    c["label"] = json_of(row[4]);
    c["status"] = json_of(row[5]);
    c["seed"] = json_of(row[6]);
    c["error"] = json_of(row[9]);
    c["notes"] = json_of(row[10]);
    c["axes"] = nlohmann::ordered_json::parse(row[7].is_string() ? row[7].as_string() : "{}", nullptr, false);
    c["config"] = nlohmann::ordered_json::parse(row[8].is_string() ? row[8].as_string() : "{}", nullptr, false);
    j["cases"].push_back(std::move(c));
  }
  j["measurements"] = sheet_json(s);
  return dump_json(j);
}

}  // namespace bench::report
