// Store::add_case, Store::add_metrics — a case and everything it measured, written in one
// transaction, table by table and column by column as store/tables.h describes them; numbers that
// SQLite cannot hold (NaN) are refused or stored as NULL, as each column's Kept says.
#include <fmt/format.h>
#include <sqlite3.h>

#include <cmath>
#include <set>
#include <tuple>

#include "bench/error.h"
#include "store/sqlite.h"
#include "store/store.h"
#include "store/tables.h"
#include "store/write_transaction.h"

namespace bench::store {

namespace {

/// A value of a NOT NULL REAL column: SQLite would turn NaN into NULL and then reject it with a
/// message that does not say which number was bad.
double require_number(double v, int64_t ordinal, std::string_view field) {
  if (std::isnan(v)) throw Error(fmt::format("case {}: {} is NaN", ordinal, field));
  return v;
}

/// Refuses a profile row without a time and a row given twice (the table's key), naming the row:
/// SQLite's constraint message would name only the columns.
void check_profile(const CaseRow& c) {
  std::set<std::tuple<std::string_view, std::string_view, std::string_view, std::string_view, std::string_view>> keys;
  for (const ProfileRow& p : c.result.profile) {
    const auto row = [&] {
      return fmt::format("profile row (mode '{}', scope '{}', slot '{}', pass '{}', kernel '{}')", p.mode, p.scope,
                         p.slot, p.pass, p.kernel);
    };
    require_number(p.ms, c.ordinal, row() + " ms");
    if (p.calls < 0) throw Error(fmt::format("case {}: {} has {} calls", c.ordinal, row(), p.calls));
    if (!keys.emplace(p.mode, p.scope, p.slot, p.pass, p.kernel).second)
      throw Error(fmt::format("case {}: {} is given twice", c.ordinal, row()));
  }
}

/// Refuses a NaN in a NOT NULL number column of the row (Kept::kNumber), naming it as
/// "case N: <what><column> is NaN".
template <class Row>
void check_numbers(const Table<Row>& table, const Row& row, int64_t ordinal, const std::string& what) {
  for (const Column<Row>& c : table.columns)
    if (c.kept == Kept::kNumber) {
      const Value v = c.get(row);
      if (v.is_number()) require_number(v.as_double(), ordinal, what + std::string(c.name));
    }
}

/// Writes the rows of one table of a case with `verb` ("INSERT", "INSERT OR REPLACE").
template <class Row>
void insert_rows(sqlite3* db, int64_t case_id, const Table<Row>& table, const std::vector<Row>& rows,
                 std::string_view verb = "INSERT") {
  if (rows.empty()) return;
  std::string params = "?1";
  for (size_t i = 0; i < table.columns.size(); ++i) params += fmt::format(", ?{}", i + 2);
  sqlite::Statement ins(
      db, fmt::format("{} INTO {}(case_id, {}) VALUES({})", verb, table.name, column_list(table.columns, ""), params));
  for (const Row& row : rows) {
    ins.bind(1, case_id);
    for (size_t i = 0; i < table.columns.size(); ++i)
      ins.bind(static_cast<int>(i) + 2, stored_value(table.columns[i], row));
    ins.run();
  }
}

}  // namespace

int64_t Store::add_case(int64_t run_id, const CaseRow& c) {
  // Checked before the transaction, so a bad value costs no lock.
  check_numbers(case_table(), c, c.ordinal, "");
  for (const Timing& t : c.result.timings) {
    check_numbers(throughput_table(), t, c.ordinal, "throughput " + t.mode + " ");
    for (double ms : t.samples_ms) require_number(ms, c.ordinal, "throughput " + t.mode + " sample");
  }
  check_profile(c);
  const std::string now = now_utc();

  return write_transaction(fmt::format("adding case {} to run {}", c.ordinal, run_id), [&] {
    const auto& columns = case_table().columns;
    std::string params = "?1";
    for (size_t i = 0; i < columns.size(); ++i) params += fmt::format(", ?{}", i + 2);
    sqlite::Statement ins_case(
        db_.get(), fmt::format("INSERT INTO cases(run_id, {}) VALUES({})", column_list(columns, ""), params));
    ins_case.bind(1, run_id);
    for (size_t i = 0; i < columns.size(); ++i) {
      const Value v = stored_value(columns[i], c);
      const bool stamp = columns[i].kept == Kept::kNowWhenEmpty && v.as_string().empty();
      ins_case.bind(static_cast<int>(i) + 2, stamp ? Value::string(now) : v);
    }
    ins_case.run();
    const int64_t case_id = sqlite3_last_insert_rowid(db_.get());
    for_each_row_table([&](const auto& table) { insert_rows(db_.get(), case_id, table, c.result.*table.rows); });
    sqlite::Statement ins_sample(db_.get(),
                                 "INSERT INTO samples(case_id, mode, repetition, ms) VALUES(?1, ?2, ?3, ?4)");
    for (const Timing& t : c.result.timings)
      for (size_t i = 0; i < t.samples_ms.size(); ++i)
        ins_sample.bind(1, case_id).bind(2, t.mode).bind(3, static_cast<int64_t>(i)).bind(4, t.samples_ms[i]).run();
    return case_id;
  });
}

void Store::add_metrics(int64_t case_id, const std::vector<Metric>& metrics) {
  write_transaction(fmt::format("adding metrics to case {}", case_id), [&] {
    insert_rows(db_.get(), case_id, metric_table(), metrics, "INSERT OR REPLACE");
    return int64_t{0};
  });
}

}  // namespace bench::store
