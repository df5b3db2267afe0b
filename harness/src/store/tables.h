// defines: bench::store::Column, Table, Role, Kept, ColumnType, case_table, throughput_table,
// profile_table, step_table, series_table, metric_table, artifact_table, for_each_row_table,
// stored_value, as_stored — each stored table of a case described once: its name, and for each
// column its unit and the member of the record (store/record.h) it holds. The description drives
// the store's INSERTs and its reading back (store/add_case.cpp, store/run_data.cpp), the JSON
// between processes (runners/result_json.cpp), `bench export` (store/run_tables.cpp) and the
// results `bench run` keeps in memory (as_stored); tests/store/tables_test.cpp checks it against
// the schema the migrations build.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bench/value.h"
#include "store/record.h"

namespace bench::store {

/// What a column is to its row.
enum class Role {
  kIdentity,  ///< the case's identity in its run (cases only): not part of a CaseResult
  kKey,       ///< says which row this is or how it ended (mode, scope, step, status ...)
  kValue,     ///< a measured number with its unit: a row of `bench export`
};

/// How a column keeps values that SQLite cannot hold, or that mean "not known".
enum class Kept {
  kAsIs,          ///< as it is
  kNumber,        ///< a NOT NULL number: a NaN is refused (store.h)
  kFinite,        ///< NaN and +-inf stored as NULL, read back as NaN
  kNotNaN,        ///< NaN stored as NULL (+-inf kept), read back as NaN
  kNonEmpty,      ///< "" stored as NULL, read back as ""
  kPositive,      ///< an integer <= 0 (not known) stored as NULL, read back as 0
  kNonNegative,   ///< an integer < 0 (the whole model) stored as NULL, read back as -1
  kNowWhenEmpty,  ///< "" stored as the time the row is written (now_utc())
};

/// The member's type: the SQL column's type (bool: INTEGER 0/1), and how JSON text is read back.
enum class ColumnType { kReal, kInteger, kText, kBool };

/// One column of a table whose rows are `Row`s.
template <class Row>
struct Column {
  std::string_view name;
  std::string_view unit;  ///< of a kValue column; "" when it has none
  Role role = Role::kKey;
  Kept kept = Kept::kAsIs;
  ColumnType type = ColumnType::kReal;
  bool optional = false;  ///< the member is a std::optional (nullopt: NULL)
  /// The member as a Value, exactly (NaN stays NaN; nullopt is null).
  std::function<Value(const Row&)> get;
  /// Sets the member from a Value of get's kind, or from null (NaN, 0, -1, "", false or nullopt).
  std::function<void(Row&, const Value&)> set;
};

/// A table with a row per element of a CaseResult's `rows` (the case's id first, not described).
template <class Row>
struct Table {
  std::string_view name;      ///< the SQL table
  std::string_view json_key;  ///< its key in the result's JSON (result_json.h)
  std::vector<Row> CaseResult::*rows = nullptr;
  std::vector<Column<Row>> columns;
};

/// `cases`: a CaseRow, identity and result (not `id`, `run_id`, `source_uid`: the store's own).
const Table<CaseRow>& case_table();
/// `throughput`: a Timing per timed mode (its samples_ms are the rows of `samples`, throughput.h).
const Table<Timing>& throughput_table();
const Table<ProfileRow>& profile_table();
const Table<StepRecord>& step_table();
const Table<SeriesPoint>& series_table();
const Table<Metric>& metric_table();
const Table<Artifact>& artifact_table();

/// The unit of `samples.ms`, each repetition's time.
inline constexpr std::string_view kSampleUnit = "ms";

/// Where a timed mode's samples sit in its JSON array (result_json.h): after `peak_bytes`, as
/// they have since `--jsonl` began.
size_t samples_position();

/// Calls f(table) for the tables of a CaseResult's lists, in the order of the result's JSON:
/// throughput, profile, steps, series, metrics, artifacts.
template <class F>
void for_each_row_table(F&& f) {
  f(throughput_table());
  f(profile_table());
  f(step_table());
  f(series_table());
  f(metric_table());
  f(artifact_table());
}

/// The column's value as the database holds it (`kept` applied; NaN of a kNumber column stays
/// NaN: add_case refuses it). kNowWhenEmpty gives "" back: the store stamps the time.
template <class Row>
Value stored_value(const Column<Row>& c, const Row& row) {
  Value v = c.get(row);
  const bool real = v.kind() == Value::Kind::kFloat;
  const bool integer = v.kind() == Value::Kind::kInt;
  switch (c.kept) {
    case Kept::kFinite:
      return real && !std::isfinite(v.as_double()) ? Value() : v;
    case Kept::kNotNaN:
      return real && std::isnan(v.as_double()) ? Value() : v;
    case Kept::kNonEmpty:
      return v.is_string() && v.as_string().empty() ? Value() : v;
    case Kept::kPositive:
      return integer && v.as_int() <= 0 ? Value() : v;
    case Kept::kNonNegative:
      return integer && v.as_int() < 0 ? Value() : v;
    default:
      return v;
  }
}

/// "a", "b", "c" of the columns' names, each after `prefix` ("t."): a SELECT's or an INSERT's list.
template <class Row>
std::string column_list(const std::vector<Column<Row>>& columns, std::string_view prefix) {
  std::string s;
  for (const Column<Row>& c : columns)
    s += (s.empty() ? "" : ", ") + std::string(prefix) + '"' + std::string(c.name) + '"';
  return s;
}

/// The row as it reads back from the database: every column through stored_value and back.
template <class Row>
void as_stored(const Table<Row>& table, Row& row) {
  for (const Column<Row>& c : table.columns) c.set(row, stored_value(c, row));
}

/// The result as load_run reads it back after add_case wrote it: NULLs for what is not kept,
/// timed modes as sort_modes orders them and the profile as sort_profile does (run_data.h).
CaseResult as_stored(CaseResult r);

namespace detail {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {
  using Inner = T;
};

template <class T>
constexpr ColumnType type_of() {
  if constexpr (std::is_same_v<T, double>) return ColumnType::kReal;
  if constexpr (std::is_same_v<T, int64_t>) return ColumnType::kInteger;
  if constexpr (std::is_same_v<T, bool>) return ColumnType::kBool;
  if constexpr (std::is_same_v<T, std::string>) return ColumnType::kText;
}

template <class T>
Value to_value(const T& v) {
  if constexpr (IsOptional<T>::value) {
    return v ? to_value(*v) : Value();
  } else if constexpr (std::is_same_v<T, double>) {
    return Value::number(v);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return Value::integer(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return Value::boolean(v);
  } else {
    return Value::string(v);
  }
}

template <class T>
void from_value(T& out, const Value& v, int64_t null_integer) {
  if constexpr (IsOptional<T>::value) {
    if (v.is_null()) {
      out.reset();
    } else {
      typename IsOptional<T>::Inner x{};
      from_value(x, v, null_integer);
      out = x;
    }
  } else if constexpr (std::is_same_v<T, double>) {
    out = v.is_number() ? v.as_double() : std::numeric_limits<double>::quiet_NaN();
  } else if constexpr (std::is_same_v<T, int64_t>) {
    out = v.kind() == Value::Kind::kFloat ? static_cast<int64_t>(v.as_double())
                                          : (v.is_number() ? v.as_int() : null_integer);
  } else if constexpr (std::is_same_v<T, bool>) {
    out = v.kind() == Value::Kind::kBool ? v.as_bool() : (v.is_number() && v.as_double() != 0);
  } else {
    out = v.is_string() ? v.as_string() : (v.is_null() ? std::string() : v.str());
  }
}

/// A column of the member that `access(row)` names (a generic lambda returning a reference).
template <class Row, class Access>
Column<Row> column(std::string_view name, Role role, std::string_view unit, Kept kept, Access access) {
  using T = std::remove_cvref_t<decltype(access(std::declval<Row&>()))>;
  Column<Row> c;
  c.name = name;
  c.unit = unit;
  c.role = role;
  c.kept = kept;
  if constexpr (IsOptional<T>::value) {
    c.type = type_of<typename IsOptional<T>::Inner>();
    c.optional = true;
  } else {
    c.type = type_of<T>();
  }
  const int64_t null_integer = kept == Kept::kNonNegative ? -1 : 0;
  c.get = [access](const Row& r) { return to_value(access(r)); };
  c.set = [access, null_integer](Row& r, const Value& v) { from_value(access(r), v, null_integer); };
  return c;
}

}  // namespace detail

}  // namespace bench::store
