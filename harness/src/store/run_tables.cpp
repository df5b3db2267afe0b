#include "store/run_tables.h"

#include <fmt/format.h>

#include "bench/error.h"

namespace bench::store {

RunTables load_run_tables(const Store& db, int64_t run_id) {
  RunTables t;
  const Value id = Value::integer(run_id);
  t.run = db.query("SELECT * FROM runs WHERE id = ?1", {id});
  if (t.run.rows.empty()) throw Error(fmt::format("no run {} in {}", run_id, db.path()));
  t.cases = db.query(
      "SELECT id, ordinal, runner, variant, label, status, seed, axes_json, config_json, error, notes FROM cases "
      "WHERE run_id = ?1 ORDER BY ordinal",
      {id});
  t.case_values = db.query(
      "SELECT id, " + column_list(value_columns(case_table()), "") + " FROM cases WHERE run_id = ?1 ORDER BY ordinal",
      {id});
  t.throughput = db.query("SELECT t.case_id, t.mode, " + column_list(value_columns(throughput_table()), "t.") +
                              " FROM throughput t JOIN cases c ON c.id = t.case_id WHERE c.run_id = ?1 "
                              "ORDER BY c.ordinal, t.mode",
                          {id});
  t.samples = db.query(
      "SELECT s.case_id, s.mode, s.repetition, s.ms FROM samples s JOIN cases c ON "
      "c.id = s.case_id WHERE c.run_id = ?1 ORDER BY c.ordinal, s.mode, s.repetition",
      {id});
  t.profile = db.query("SELECT p.case_id, p.mode, p.scope, p.slot, p.component, p.pass, p.kernel, " +
                           column_list(value_columns(profile_table()), "p.") +
                           " FROM profile p JOIN cases c ON c.id = p.case_id WHERE c.run_id = ?1 "
                           "ORDER BY c.ordinal, p.mode, p.ms DESC, p.scope, p.slot, p.pass, p.kernel",
                       {id});
  t.steps = db.query("SELECT s.case_id, s.step, " + column_list(value_columns(step_table()), "s.") +
                         " FROM steps s JOIN cases c ON c.id = s.case_id WHERE c.run_id = ?1 "
                         "ORDER BY c.ordinal, s.step",
                     {id});
  // Named series: per-layer values as "name/layer" (grad_rms/0); step -1 is "at initialization".
  t.series = db.query(
      "SELECT s.case_id, s.step, s.name || ifnull('/' || s.layer, ''), s.value FROM series s "
      "JOIN cases c ON c.id = s.case_id WHERE c.run_id = ?1 "
      "ORDER BY c.ordinal, s.name, s.layer, s.step",
      {id});
  t.metrics = db.query(
      "SELECT m.case_id, m.name, m.value, m.unit FROM metrics m JOIN cases c ON "
      "c.id = m.case_id WHERE c.run_id = ?1 ORDER BY c.ordinal, m.name",
      {id});
  return t;
}

}  // namespace bench::store
