// defines: bench::store::RunTables, load_run_tables — every stored row of one run, table by table:
// what `bench export` turns into one long table, with the value columns and units store/tables.h
// declares
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "store/store.h"
#include "store/tables.h"

namespace bench::store {

/// One run's rows. Every table but `run` is ordered by case ordinal, then as noted.
struct RunTables {
  QueryResult run;          ///< SELECT * FROM runs: its one row
  QueryResult cases;        ///< id, ordinal, runner, variant, label, status, seed, axes_json, config_json, error
  QueryResult case_values;  ///< id, then value_columns(case_table())
  QueryResult throughput;   ///< case_id, mode, then value_columns(throughput_table()); by mode
  QueryResult samples;      ///< case_id, mode, repetition, ms; by mode and repetition
  /// case_id, mode, scope, slot, component, pass, kernel, then value_columns(profile_table()); by mode,
  /// then the longest kernel first (ties by scope, slot, pass, kernel)
  QueryResult profile;
  QueryResult steps;    ///< case_id, step, then value_columns(step_table()); by step
  QueryResult series;   ///< case_id, step, "name" or "name/layer", value; by name, layer, step
  QueryResult metrics;  ///< case_id, name, value, unit; by name
};

/// The value columns (Role::kValue) of a table, in order.
template <class Row>
std::vector<Column<Row>> value_columns(const Table<Row>& table) {
  std::vector<Column<Row>> out;
  for (const Column<Row>& c : table.columns)
    if (c.role == Role::kValue) out.push_back(c);
  return out;
}

/// Throws bench::Error naming the database when there is no run `run_id`.
RunTables load_run_tables(const Store& db, int64_t run_id);

}  // namespace bench::store
