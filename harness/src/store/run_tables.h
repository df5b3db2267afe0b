// defines: bench::store::ColumnUnit, RunTables, load_run_tables — every stored row of one run, table
// by table, with the numeric columns' units: what `bench export` turns into one long table
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace bench::store {

/// A numeric column of a table and its unit ("" when it has none).
struct ColumnUnit {
  std::string_view name, unit;
};

/// The numeric columns of `cases`, `throughput`, `profile` and `steps` that load_run_tables reads, in order.
const std::vector<ColumnUnit>& case_value_columns();
const std::vector<ColumnUnit>& throughput_value_columns();
const std::vector<ColumnUnit>& profile_value_columns();
const std::vector<ColumnUnit>& step_value_columns();

/// One run's rows. Every table but `run` is ordered by case ordinal, then as noted.
struct RunTables {
  QueryResult run;          ///< SELECT * FROM runs: its one row
  QueryResult cases;        ///< id, ordinal, runner, variant, label, status, seed, axes_json, config_json, error
  QueryResult case_values;  ///< id, then case_value_columns()
  QueryResult throughput;   ///< case_id, mode, then throughput_value_columns(); by mode
  QueryResult samples;      ///< case_id, mode, repetition, ms; by mode and repetition
  /// case_id, mode, scope, slot, component, pass, kernel, then profile_value_columns(); by mode,
  /// then the longest kernel first (ties by scope, slot, pass, kernel)
  QueryResult profile;
  QueryResult steps;    ///< case_id, step, then step_value_columns(); by step
  QueryResult series;   ///< case_id, step, "name" or "name/layer", value; by name, layer, step
  QueryResult metrics;  ///< case_id, name, value, unit; by name
};

/// Throws bench::Error naming the database when there is no run `run_id`.
RunTables load_run_tables(const Store& db, int64_t run_id);

}  // namespace bench::store
