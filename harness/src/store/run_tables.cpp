#include "store/run_tables.h"

#include <fmt/format.h>

#include "bench/error.h"

namespace bench::store {

namespace {

std::string select_list(const std::vector<ColumnUnit>& columns) {
  std::string s;
  for (const ColumnUnit& c : columns) s += fmt::format("{}\"{}\"", s.empty() ? "" : ", ", c.name);
  return s;
}

}  // namespace

const std::vector<ColumnUnit>& case_value_columns() {
  static const std::vector<ColumnUnit> columns = {
      {"n_params", "params"}, {"n_params_embedding", "params"}, {"flops_per_token", "FLOP/token"}, {"wall_s", "s"}};
  return columns;
}

const std::vector<ColumnUnit>& throughput_value_columns() {
  static const std::vector<ColumnUnit> columns = {{"repetitions", ""},
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
                                                  {"peak_bytes", "bytes"},
                                                  {"noise", ""},
                                                  {"max_noise", ""},
                                                  {"noisy", ""},
                                                  {"load_avg", ""},
                                                  {"steal", ""},
                                                  {"other_busy", ""},
                                                  {"cores", ""}};
  return columns;
}

const std::vector<ColumnUnit>& profile_value_columns() {
  static const std::vector<ColumnUnit> columns = {{"calls", ""}, {"ms", "ms"}, {"bytes", "bytes"}, {"flops", "FLOP"}};
  return columns;
}

const std::vector<ColumnUnit>& step_value_columns() {
  static const std::vector<ColumnUnit> columns = {
      {"lr", ""},         {"loss", "nats"},   {"grad_norm", ""}, {"max_attn_logit", ""},
      {"z_mean", "nats"}, {"z_loss", "nats"}, {"ms", "ms"}};
  return columns;
}

RunTables load_run_tables(const Store& db, int64_t run_id) {
  RunTables t;
  const Value id = Value::integer(run_id);
  t.run = db.query("SELECT * FROM runs WHERE id = ?1", {id});
  if (t.run.rows.empty()) throw Error(fmt::format("no run {} in {}", run_id, db.path()));
  t.cases = db.query(
      "SELECT id, ordinal, runner, variant, label, status, seed, axes_json, config_json, error FROM cases "
      "WHERE run_id = ?1 ORDER BY ordinal",
      {id});
  t.case_values = db.query(
      "SELECT id, " + select_list(case_value_columns()) + " FROM cases WHERE run_id = ?1 ORDER BY ordinal", {id});
  t.throughput = db.query("SELECT t.case_id, t.mode, " + select_list(throughput_value_columns()) +
                              " FROM throughput t JOIN cases c ON c.id = t.case_id WHERE c.run_id = ?1 "
                              "ORDER BY c.ordinal, t.mode",
                          {id});
  t.samples = db.query(
      "SELECT s.case_id, s.mode, s.repetition, s.ms FROM samples s JOIN cases c ON "
      "c.id = s.case_id WHERE c.run_id = ?1 ORDER BY c.ordinal, s.mode, s.repetition",
      {id});
  t.profile = db.query("SELECT p.case_id, p.mode, p.scope, p.slot, p.component, p.pass, p.kernel, " +
                           select_list(profile_value_columns()) +
                           " FROM profile p JOIN cases c ON c.id = p.case_id WHERE c.run_id = ?1 "
                           "ORDER BY c.ordinal, p.mode, p.ms DESC, p.scope, p.slot, p.pass, p.kernel",
                       {id});
  t.steps = db.query("SELECT s.case_id, s.step, " + select_list(step_value_columns()) +
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
