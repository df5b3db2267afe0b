#include "store/runs.h"

#include <fmt/format.h>

#include "bench/error.h"

namespace bench::store {

namespace {

std::optional<std::string> text_or_null(const Value& v) {
  return v.is_null() ? std::nullopt : std::optional<std::string>(v.as_string());
}
std::optional<int64_t> int_or_null(const Value& v) {
  return v.is_null() ? std::nullopt : std::optional<int64_t>(v.as_int());
}

}  // namespace

std::optional<RunIdentity> run_identity(const Store& db, int64_t run_id) {
  const auto r = db.query(
      "SELECT experiment_sha256, status, pid, hostname, sweep, shard_index, shard_count FROM runs WHERE id = ?1",
      {Value::integer(run_id)});
  if (r.rows.empty()) return std::nullopt;
  const auto& row = r.rows[0];
  return RunIdentity{row[0].as_string(),   row[1].as_string(),  row[3].as_string(), int_or_null(row[2]),
                     text_or_null(row[4]), int_or_null(row[5]), int_or_null(row[6])};
}

std::vector<std::pair<int64_t, StoredCase>> stored_cases(const Store& db, int64_t run_id) {
  std::vector<std::pair<int64_t, StoredCase>> out;
  for (const auto& row :
       db.query("SELECT ordinal, id, status FROM cases WHERE run_id = ?1", {Value::integer(run_id)}).rows)
    out.emplace_back(row[0].as_int(), StoredCase{row[1].as_int(), row[2].as_string()});
  return out;
}

std::optional<std::pair<int64_t, std::string>> latest_matching_run(const Store& db,
                                                                   const std::string& experiment_sha256,
                                                                   const std::optional<std::string>& sweep,
                                                                   int64_t shard_index) {
  const auto found = db.query(
      "SELECT id, status FROM runs WHERE experiment_sha256 = ?1 AND "
      "((?2 IS NULL AND sweep IS NULL) OR (sweep = ?2 AND shard_index = ?3)) ORDER BY id DESC LIMIT 1",
      {Value::string(experiment_sha256), sweep ? Value::string(*sweep) : Value(),
       sweep ? Value::integer(shard_index) : Value()});
  if (found.rows.empty()) return std::nullopt;
  return std::make_pair(found.rows[0][0].as_int(), found.rows[0][1].as_string());
}

std::optional<int64_t> latest_run_of(const Store& db, const std::string& name) {
  const auto r = db.query("SELECT max(id) FROM runs WHERE experiment_name = ?1", {Value::string(name)});
  if (r.rows.empty() || r.rows[0][0].is_null()) return std::nullopt;
  return r.rows[0][0].as_int();
}

bool has_run(const Store& db, int64_t run_id) {
  return !db.query("SELECT 1 FROM runs WHERE id = ?1", {Value::integer(run_id)}).rows.empty();
}

RunSummary run_summary(const Store& db, int64_t run_id) {
  const auto r = db.query(
      "SELECT experiment_name, status, ifnull(error, ''), n_cases, ifnull(sweep, ''), shard_count, "
      "(SELECT count(*) FROM cases WHERE run_id = runs.id), "
      "(SELECT count(*) FROM cases WHERE run_id = runs.id AND status IN ('completed', 'diverged')) "
      "FROM runs WHERE id = ?1",
      {Value::integer(run_id)});
  if (r.rows.empty()) throw Error(fmt::format("no run {} in {}", run_id, db.path()));
  const auto& row = r.rows[0];
  return RunSummary{row[0].as_string(), row[1].as_string(), row[2].as_string(),
                    row[4].as_string(), row[3].as_int(),    row[5].is_null() ? 0 : row[5].as_int(),
                    row[6].as_int(),    row[7].as_int()};
}

bool shard_completed(const Store& db, const std::string& sweep, int64_t index) {
  return !db.query("SELECT 1 FROM runs WHERE sweep = ?1 AND shard_index = ?2 AND status = 'completed'",
                   {Value::string(sweep), Value::integer(index)})
              .rows.empty();
}

}  // namespace bench::store
