// The one description of the stored tables (store/tables.h) against what it drives: the schema the
// migrations build has exactly the declared columns, with their types; a record with every member
// set comes back from the database and from the JSON between processes as it went in; the results
// `bench run` keeps in memory equal what the database gives back; export reads the declared value
// columns.
#include "store/tables.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "runners/result_json.h"
#include "store/run_data.h"
#include "store/run_tables.h"
#include "store/store.h"

namespace bench::store {
namespace tables_test {
namespace {

namespace fs = std::filesystem;

/// Columns of the schema that no member holds: the store's own keys and merge's provenance.
const std::set<std::string> kStoreOwn = {"id", "run_id", "case_id", "source_uid"};

std::string sql_type(ColumnType t) {
  switch (t) {
    case ColumnType::kReal:
      return "REAL";
    case ColumnType::kText:
      return "TEXT";
    default:
      return "INTEGER";
  }
}

class TablesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bench_tables_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string db_path() const { return (dir_ / "bench.db").string(); }
  fs::path dir_;
};

/// Checks one table's declaration against the migrated schema: every column declared once, with
/// its SQL type, and nothing of the schema left undeclared.
template <class Row>
void expect_schema(const Store& db, const Table<Row>& table) {
  std::map<std::string, std::string> schema;
  for (const auto& row :
       db.query("SELECT name, type FROM pragma_table_info(?1)", {Value::string(std::string(table.name))}).rows)
    if (kStoreOwn.count(row[0].as_string()) == 0) schema[row[0].as_string()] = row[1].as_string();
  std::set<std::string> declared;
  for (const Column<Row>& c : table.columns) {
    const std::string name(c.name);
    EXPECT_TRUE(declared.insert(name).second) << table.name << "." << name << " is declared twice";
    ASSERT_EQ(schema.count(name), 1U) << table.name << "." << name << " is declared but not in the schema";
    EXPECT_EQ(schema[name], sql_type(c.type)) << table.name << "." << name;
    EXPECT_TRUE(c.role == Role::kValue || c.unit.empty()) << table.name << "." << name << ": a unit on a key";
  }
  for (const auto& [name, type] : schema)
    EXPECT_EQ(declared.count(name), 1U) << table.name << "." << name << " is in the schema but declared nowhere";
}

TEST_F(TablesTest, EveryStoredColumnIsDeclaredOnceWithItsType) {
  const Store db(db_path());
  expect_schema(db, case_table());
  for_each_row_table([&](const auto& table) { expect_schema(db, table); });
}

/// A distinct, exactly representable value per column: 0.5 + i for reals (or a non-finite one
/// where `special`), i + 1 for integers, "t<i>" for text, true for booleans.
template <class Row>
void fill(const Table<Row>& table, Row& row, int base, double special = 0.5) {
  for (size_t i = 0; i < table.columns.size(); ++i) {
    const Column<Row>& c = table.columns[i];
    const int k = base + static_cast<int>(i);
    switch (c.type) {
      case ColumnType::kReal:
        c.set(row, Value::number(c.kept == Kept::kFinite && special != 0.5 ? special : 0.5 + k));
        break;
      case ColumnType::kInteger:
        c.set(row, Value::integer(k + 1));
        break;
      case ColumnType::kText:
        c.set(row, Value::string("t" + std::to_string(k)));
        break;
      case ColumnType::kBool:
        c.set(row, Value::boolean(true));
        break;
    }
  }
}

/// Whether two Values are the same, bit for bit for numbers (NaN equals NaN).
bool same(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return a.is_number() && b.is_number() && a.as_double() == b.as_double();
  if (a.kind() == Value::Kind::kFloat) {
    const double x = a.as_double(), y = b.as_double();
    return std::memcmp(&x, &y, sizeof x) == 0 || (std::isnan(x) && std::isnan(y));
  }
  return a.str() == b.str();
}

template <class Row>
void expect_rows(const Table<Row>& table, const std::vector<Row>& got, const std::vector<Row>& want) {
  ASSERT_EQ(got.size(), want.size()) << table.name;
  for (size_t r = 0; r < got.size(); ++r)
    for (const Column<Row>& c : table.columns)
      EXPECT_TRUE(same(c.get(got[r]), c.get(want[r]))) << table.name << " row " << r << " " << c.name << ": "
                                                       << c.get(got[r]).str() << " != " << c.get(want[r]).str();
}

/// A record with every member of every table set, two rows each (the second with NaN where a
/// column keeps non-finite values as NULL).
CaseRow full_record() {
  CaseRow c;
  fill(case_table(), c, 0);
  c.axes_json = "{}";
  c.config_json = "{}";
  c.result.status = "completed";
  c.result.started_at = "2026-12-04T00:00:00.000Z";
  c.result.finished_at = "2026-12-04T00:00:01.000Z";
  for_each_row_table([&](const auto& table) {
    auto& rows = c.result.*table.rows;
    rows.resize(2);
    fill(table, rows[0], 100);
    fill(table, rows[1], 200, std::numeric_limits<double>::quiet_NaN());
  });
  c.result.timings[0].mode = "forward";
  c.result.timings[1].mode = "train_step";
  c.result.timings[0].samples_ms = {1.25, 1.5, 0.1 + 0.2};
  c.result.timings[1].samples_ms = {2.0};
  c.result.timings[1].mfu.reset();
  c.result.steps[1].step = c.result.steps[0].step + 1;
  c.result.series[1].layer = -1;  // the whole model
  return c;
}

TEST_F(TablesTest, ARecordWithEveryMemberSetComesBackFromTheDatabase) {
  Store db(db_path());
  RunInfo info;
  info.experiment_name = "tables";
  const int64_t run = db.begin_run(info);
  const CaseRow c = full_record();
  db.add_case(run, c);
  const RunData d = load_run(db, run);
  ASSERT_EQ(d.cases.size(), 1U);
  const CaseRow& back = d.cases[0];
  for (const Column<CaseRow>& col : case_table().columns)
    EXPECT_TRUE(same(col.get(back), col.get(c))) << col.name << ": " << col.get(back).str();
  // What the store gives back is what as_stored makes of the record in memory (ResultsSink).
  const CaseResult stored = as_stored(c.result);
  for_each_row_table([&](const auto& table) { expect_rows(table, back.result.*table.rows, stored.*table.rows); });
  ASSERT_EQ(back.result.timings.size(), 2U);
  EXPECT_EQ(back.result.timings[0].samples_ms, c.result.timings[0].samples_ms);
  EXPECT_EQ(back.result.timings[1].samples_ms, c.result.timings[1].samples_ms);
  // The NaN of a column kept as NULL comes back as NaN; its first row as it went in.
  EXPECT_TRUE(std::isnan(back.result.steps[1].loss));
  EXPECT_EQ(back.result.steps[0].loss, c.result.steps[0].loss);
  EXPECT_EQ(back.result.series[1].layer, -1);
}

TEST(Tables, ARecordWithEveryMemberSetRoundTripsThroughItsJson) {
  CaseRow c = full_record();
  c.result.timings[1].max_noise = std::numeric_limits<double>::infinity();
  c.result.metrics[1].value = -std::numeric_limits<double>::infinity();
  const CaseResult back = result_from_json(result_json(c.result));
  CaseRow row;
  row.result = back;
  for (const Column<CaseRow>& col : case_table().columns) {
    if (col.role != Role::kIdentity) {
      EXPECT_TRUE(same(col.get(row), col.get(c))) << col.name;
    }
  }
  for_each_row_table([&](const auto& table) { expect_rows(table, back.*table.rows, c.result.*table.rows); });
  EXPECT_EQ(back.timings[0].samples_ms, c.result.timings[0].samples_ms);
  // A timed mode's array is where readers of --jsonl have found it: 21 columns, the samples 15th.
  const auto j = nlohmann::json::parse(result_json(c.result));
  ASSERT_EQ(j["timings"][0].size(), 22U);
  EXPECT_EQ(j["timings"][0][13], 114);  // peak_bytes: 100 + its index 13, plus 1
  EXPECT_EQ(j["timings"][0][14], nlohmann::json::array({1.25, 1.5, 0.1 + 0.2}));
  EXPECT_EQ(j["timings"][0][15], 114.5);  // noise
}

TEST_F(TablesTest, ExportReadsTheDeclaredValueColumns) {
  Store db(db_path());
  RunInfo info;
  info.experiment_name = "tables";
  const int64_t run = db.begin_run(info);
  db.add_case(run, full_record());
  const RunTables t = load_run_tables(db, run);
  std::vector<std::string> want = {"case_id", "mode"};
  for (const auto& c : value_columns(throughput_table())) want.emplace_back(c.name);
  EXPECT_EQ(t.throughput.columns, want);
  want = {"case_id", "step"};
  for (const auto& c : value_columns(step_table())) want.emplace_back(c.name);
  EXPECT_EQ(t.steps.columns, want);
  ASSERT_EQ(t.case_values.rows.size(), 1U);
  EXPECT_EQ(t.case_values.columns.size(), 1 + value_columns(case_table()).size());
}

}  // namespace
}  // namespace tables_test
}  // namespace bench::store
