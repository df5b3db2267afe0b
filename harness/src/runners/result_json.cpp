#include "runners/result_json.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "bench/error.h"
#include "store/tables.h"

namespace bench {

namespace {

using Json = nlohmann::ordered_json;

/// A double as JSON: a number, or "nan", "inf", "-inf" (JSON has none of them).
Json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double num_of(const Json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  throw Error("not a number: " + s);
}

/// A column's value as JSON: numbers with their bits (num), null for nullopt.
Json json_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      return nullptr;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int();
    case Value::Kind::kFloat:
      return num(v.as_double());
    default:
      return v.as_string();
  }
}

/// A column's value from its JSON, read as the column's type.
template <class Row>
Value value_of(const store::Column<Row>& c, const Json& j) {
  if (j.is_null()) return Value();
  switch (c.type) {
    case store::ColumnType::kReal:
      return Value::number(num_of(j));
    case store::ColumnType::kInteger:
      return Value::integer(j.get<int64_t>());
    case store::ColumnType::kBool:
      return Value::boolean(j.get<bool>());
    case store::ColumnType::kText:
      return Value::string(j.get<std::string>());
  }
  return Value();
}

/// A row as an array of its columns' values, in the table's order.
template <class Row>
Json row_json(const store::Table<Row>& table, const Row& row) {
  Json a = Json::array();
  for (const auto& c : table.columns) a.push_back(json_of(c.get(row)));
  return a;
}

template <class Row>
Row row_of(const store::Table<Row>& table, const Json& a) {
  Row row;
  for (size_t i = 0; i < table.columns.size(); ++i) table.columns[i].set(row, value_of(table.columns[i], a.at(i)));
  return row;
}

}  // namespace

std::string result_json(const CaseResult& r) {
  Json j = Json::object();
  CaseRow row;
  row.result = r;
  for (const auto& c : store::case_table().columns)
    if (c.role != store::Role::kIdentity) j[std::string(c.name)] = json_of(c.get(row));
  store::for_each_row_table([&](const auto& table) {
    Json rows = Json::array();
    for (const auto& x : r.*table.rows) rows.push_back(row_json(table, x));
    j[std::string(table.json_key)] = std::move(rows);
  });
  // Each timed mode's samples, in their place in its array.
  const size_t at = store::samples_position();
  for (size_t i = 0; i < r.timings.size(); ++i) {
    Json samples = Json::array();
    for (double s : r.timings[i].samples_ms) samples.push_back(num(s));
    Json& timing = j["timings"][i];
    timing.insert(timing.begin() + static_cast<std::ptrdiff_t>(at), std::move(samples));
  }
  return j.dump();
}

CaseResult result_from_json(const std::string& text) {
  CaseRow row;
  try {
    const Json j = Json::parse(text);
    for (const auto& c : store::case_table().columns)
      if (c.role != store::Role::kIdentity) c.set(row, value_of(c, j.at(std::string(c.name))));
    // A timed mode's samples sit inside its array: taken out before its columns are read.
    Json timings = j.at("timings");
    std::vector<std::vector<double>> samples;
    const size_t at = store::samples_position();
    for (Json& t : timings) {
      samples.emplace_back();
      for (const Json& s : t.at(at)) samples.back().push_back(num_of(s));
      t.erase(at);
    }
    store::for_each_row_table([&](const auto& table) {
      const Json& rows = table.json_key == "timings" ? timings : j.at(std::string(table.json_key));
      for (const Json& x : rows) (row.result.*table.rows).push_back(row_of(table, x));
    });
    for (size_t i = 0; i < samples.size(); ++i) row.result.timings[i].samples_ms = std::move(samples[i]);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("not a case result: ") + e.what());
  }
  return std::move(row.result);
}

}  // namespace bench
