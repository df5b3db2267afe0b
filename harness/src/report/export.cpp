// render_export(): every number of a run in one long table (one observation per row), built from
// the store's tables with bound parameters.
#include "report/export.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "bench/error.h"
#include "report/sheet.h"

namespace bench::report {

namespace {

/// A numeric column of a store table exported as one row per value, with its unit.
struct Column {
  std::string_view name, unit;
};
constexpr Column kCaseColumns[] = {
    {"n_params", "params"}, {"n_params_embedding", "params"}, {"flops_per_token", "FLOP/token"}, {"wall_s", "s"}};
constexpr Column kThroughputColumns[] = {{"repetitions", ""},
                                         {"iterations", ""},
                                         {"median_ms", "ms"},
                                         {"mean_ms", "ms"},
                                         {"min_ms", "ms"},
                                         {"max_ms", "ms"},
                                         {"stddev_ms", "ms"},
                                         {"mad_ms", "ms"},
                                         {"tokens_per_s", "tokens/s"},
                                         {"flops_per_iter", "FLOP"},
                                         {"gflops_per_s", "GFLOP/s"},
                                         {"mfu", ""},
                                         {"peak_bytes", "bytes"}};
constexpr Column kStepColumns[] = {{"lr", ""},         {"loss", "nats"},   {"grad_norm", ""}, {"max_attn_logit", ""},
                                   {"z_mean", "nats"}, {"z_loss", "nats"}, {"ms", "ms"}};

std::string select_list(const auto& columns) {
  std::string s;
  for (const Column& c : columns) s += fmt::format("{}\"{}\"", s.empty() ? "" : ", ", c.name);
  return s;
}

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
  const auto run = db.query("SELECT * FROM runs WHERE id = ?1", {Value::integer(run_id)});
  if (run.rows.empty()) throw Error(fmt::format("no run {} in {}", run_id, db.path()));
  const auto cases = db.query(
      "SELECT id, ordinal, runner, variant, label, status, seed, axes_json, config_json, error FROM cases "
      "WHERE run_id = ?1 ORDER BY ordinal",
      {Value::integer(run_id)});

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

  const Value id = Value::integer(run_id);
  for (const auto& row :
       db.query("SELECT id, " + select_list(kCaseColumns) + " FROM cases WHERE run_id = ?1 ORDER BY ordinal", {id})
           .rows)
    for (size_t i = 0; i < std::size(kCaseColumns); ++i)
      if (!row[i + 1].is_null())
        add(row[0].as_int(), "case", {}, {}, {}, kCaseColumns[i].name, row[i + 1], kCaseColumns[i].unit);
  for (const auto& row : db.query("SELECT t.case_id, t.mode, " + select_list(kThroughputColumns) +
                                      " FROM throughput t JOIN cases c ON c.id = t.case_id WHERE c.run_id = ?1 "
                                      "ORDER BY c.ordinal, t.mode",
                                  {id})
                             .rows)
    for (size_t i = 0; i < std::size(kThroughputColumns); ++i)
      add(row[0].as_int(), "throughput", row[1], {}, {}, kThroughputColumns[i].name, row[i + 2],
          kThroughputColumns[i].unit);
  for (const auto& row : db.query("SELECT s.case_id, s.mode, s.repetition, s.ms FROM samples s JOIN cases c ON "
                                  "c.id = s.case_id WHERE c.run_id = ?1 ORDER BY c.ordinal, s.mode, s.repetition",
                                  {id})
                             .rows)
    add(row[0].as_int(), "sample", row[1], {}, row[2], "ms", row[3], "ms");
  for (const auto& row : db.query("SELECT s.case_id, s.step, " + select_list(kStepColumns) +
                                      " FROM steps s JOIN cases c ON c.id = s.case_id WHERE c.run_id = ?1 "
                                      "ORDER BY c.ordinal, s.step",
                                  {id})
                             .rows)
    for (size_t i = 0; i < std::size(kStepColumns); ++i)
      add(row[0].as_int(), "step", {}, row[1], {}, kStepColumns[i].name, row[i + 2], kStepColumns[i].unit);
  // Named series: per-layer values as "name/layer" (grad_rms/0); step -1 is "at initialization".
  for (const auto& row :
       db.query("SELECT s.case_id, s.step, s.name || ifnull('/' || s.layer, ''), s.value FROM series s "
                "JOIN cases c ON c.id = s.case_id WHERE c.run_id = ?1 "
                "ORDER BY c.ordinal, s.name, s.layer, s.step",
                {id})
           .rows)
    add(row[0].as_int(), "series", {}, row[1], {}, row[2].as_string(), row[3], "");
  for (const auto& row : db.query("SELECT m.case_id, m.name, m.value, m.unit FROM metrics m JOIN cases c ON "
                                  "c.id = m.case_id WHERE c.run_id = ?1 ORDER BY c.ordinal, m.name",
                                  {id})
                             .rows)
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
    c["axes"] = nlohmann::ordered_json::parse(row[7].is_string() ? row[7].as_string() : "{}", nullptr, false);
    c["config"] = nlohmann::ordered_json::parse(row[8].is_string() ? row[8].as_string() : "{}", nullptr, false);
    j["cases"].push_back(std::move(c));
  }
  j["measurements"] = sheet_json(s);
  return dump_json(j);
}

}  // namespace bench::report
