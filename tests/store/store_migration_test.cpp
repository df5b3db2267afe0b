// The store's migrations: databases of older schema versions gain what each version added
// (timings without noise, the profile, artifacts), and the profile's rows round trip.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>
#include <tuple>

#include "bench/error.h"
#include "bench/sha256.h"
#include "store/run_data.h"
#include "store/schema.h"
#include "store/store.h"
#include "store_rig.h"
#include "support/errors.h"

namespace bench::store {
namespace store_migration_test {
namespace {

namespace fs = std::filesystem;
using namespace rig;  // the rig's helpers and fixture (store_rig.h)

/// SQL that takes a current database back to version 6: without the table version 7 added and the
/// column version 8 added.
constexpr const char* kBackToVersion6 =
    "ALTER TABLE cases DROP COLUMN notes; DROP TABLE profile; PRAGMA user_version = 6;";

/// SQL that takes a current database back to version 5: without what versions 6 to 8 added.
constexpr const char* kBackToVersion5 =
    "ALTER TABLE cases DROP COLUMN notes; DROP TABLE profile; ALTER TABLE throughput DROP COLUMN noise; ALTER TABLE "
    "throughput DROP COLUMN max_noise; "
    "ALTER TABLE throughput DROP COLUMN noisy; ALTER TABLE throughput DROP COLUMN load_avg; "
    "ALTER TABLE throughput DROP COLUMN steal; ALTER TABLE throughput DROP COLUMN other_busy; "
    "ALTER TABLE throughput DROP COLUMN cores; PRAGMA user_version = 5;";

TEST_F(StoreTest, MigratesAVersionOneDatabase) {
  {
    Store db(db_path());
    db.begin_run(sample_run());
  }
  raw_exec(db_path(),
           std::string(kBackToVersion5) +
               "DROP INDEX runs_uid; DROP INDEX runs_sweep; DROP TABLE run_sources; ALTER TABLE runs DROP COLUMN uid; "
               "ALTER TABLE runs DROP COLUMN sweep; ALTER TABLE runs DROP COLUMN shard_index; "
               "ALTER TABLE runs DROP COLUMN shard_count; ALTER TABLE runs DROP COLUMN sweep_cases; "
               "ALTER TABLE cases DROP COLUMN placement; ALTER TABLE cases DROP COLUMN source_uid; "
               "ALTER TABLE runs DROP COLUMN pid; DROP TABLE artifacts; DROP INDEX series_key; DROP TABLE series; "
               "PRAGMA user_version = 1;");
  Store db(db_path());
  EXPECT_EQ(db.schema_version(), 8);
  EXPECT_TRUE(db.query("SELECT pid FROM runs").rows.at(0).at(0).is_null());
  // Version 5 gives every existing run a uid of its own: 32 hex digits.
  const std::string uid = db.query("SELECT uid FROM runs").rows.at(0).at(0).as_string();
  EXPECT_EQ(uid.size(), 32U);
  EXPECT_EQ(uid.find_first_not_of("0123456789abcdef"), std::string::npos) << uid;
  EXPECT_EQ(db.query("SELECT count(*) FROM runs").rows[0][0].as_int(), 1);
  EXPECT_EQ(db.query("SELECT count(*) FROM series").rows[0][0].as_int(), 0);
}

TEST_F(StoreTest, MigratesAVersionFiveDatabaseItsTimingsWithoutNoise) {
  int64_t run = 0;
  {
    Store db(db_path());
    run = db.begin_run(sample_run());
    db.add_case(run, throughput_case(0));
  }
  raw_exec(db_path(), kBackToVersion5);
  Store db(db_path());
  EXPECT_EQ(db.schema_version(), 8);
  // The old rows are kept, with NULL where version 5 knew nothing.
  const QueryResult r = db.query(
      "SELECT mode, median_ms, noise, max_noise, noisy, load_avg, steal, other_busy, cores FROM throughput "
      "ORDER BY mode");
  ASSERT_EQ(r.rows.size(), 2U);
  EXPECT_EQ(r.rows[0][0].as_string(), "forward");
  EXPECT_DOUBLE_EQ(r.rows[0][1].as_double(), 2.0);
  for (size_t i = 2; i < r.rows[0].size(); ++i) EXPECT_TRUE(r.rows[0][i].is_null()) << r.columns[i];
  const RunData d = load_run(db, run);
  ASSERT_EQ(d.cases.at(0).result.timings.size(), 2U);
  EXPECT_TRUE(std::isnan(d.cases[0].result.timings[0].noise));
  EXPECT_FALSE(d.cases[0].result.timings[0].noisy);
  // New cases write the new columns.
  CaseRow c = throughput_case(1);
  c.result.timings[0].noise = 0.031;
  c.result.timings[0].max_noise = 0.02;
  c.result.timings[0].noisy = true;
  c.result.timings[0].load_avg = 2.5;
  c.result.timings[0].steal = 0.01;
  c.result.timings[0].other_busy = 0.45;
  c.result.timings[0].cores = 2;
  db.add_case(run, c);
  const QueryResult n = db.query(
      "SELECT t.noise, t.max_noise, t.noisy, t.load_avg, t.steal, t.other_busy, t.cores FROM throughput t JOIN cases "
      "c ON c.id = t.case_id WHERE c.ordinal = 1 ORDER BY t.mode");
  ASSERT_EQ(n.rows.size(), 2U);
  EXPECT_DOUBLE_EQ(n.rows[0][0].as_double(), 0.031);
  EXPECT_DOUBLE_EQ(n.rows[0][1].as_double(), 0.02);
  EXPECT_EQ(n.rows[0][2].as_int(), 1);
  EXPECT_DOUBLE_EQ(n.rows[0][3].as_double(), 2.5);
  EXPECT_DOUBLE_EQ(n.rows[0][4].as_double(), 0.01);
  EXPECT_DOUBLE_EQ(n.rows[0][5].as_double(), 0.45);
  EXPECT_EQ(n.rows[0][6].as_int(), 2);
  // The second mode left them unset: NaN and 0 are NULL, noisy is 0.
  EXPECT_TRUE(n.rows[1][0].is_null());
  EXPECT_EQ(n.rows[1][2].as_int(), 0);
  EXPECT_TRUE(n.rows[1][6].is_null());
  const RunData after = load_run(db, run);
  const Timing& m = after.cases.at(1).result.timings.at(0);
  EXPECT_EQ(m.mode, "forward");
  EXPECT_EQ(m.noise, 0.031);
  EXPECT_TRUE(m.noisy);
  EXPECT_EQ(m.other_busy, 0.45);
  EXPECT_EQ(m.cores, 2);
}

// docs/results.md names the schema version this build writes everywhere it names it.
TEST(StoreDocs, ResultsPageStatesTheCurrentSchemaVersion) {
  std::ifstream in(std::string(BENCH_SOURCE_DIR) + "/docs/results.md");
  ASSERT_TRUE(in) << "docs/results.md";
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  const std::string v = std::to_string(kSchemaVersion);
  for (const std::string& phrase :
       {"its schema (version " + v + ")", "## Schema (version " + v + ")", "the schema version, `" + v + "`",
        "newer than this build knows (" + v + ")", "\n| " + v + " | "})
    EXPECT_NE(doc.find(phrase), std::string::npos) << phrase;
  // No later version is described as this one's.
  EXPECT_EQ(doc.find("\n| " + std::to_string(kSchemaVersion + 1) + " | "), std::string::npos);
}

TEST_F(StoreTest, MigratesAVersionSixDatabaseWhichGainsTheProfile) {
  int64_t run = 0;
  {
    Store db(db_path());
    run = db.begin_run(sample_run());
    db.add_case(run, throughput_case(0));
  }
  raw_exec(db_path(), kBackToVersion6);
  EXPECT_NE(error_of([&] { Store ro(db_path(), Store::Mode::kReadOnly); }).find("has results schema version 6"),
            std::string::npos);
  Store db(db_path());
  EXPECT_EQ(db.schema_version(), 8);
  // The table as docs/results.md documents it: name, type, NOT NULL, position in the key.
  const QueryResult cols =
      db.query("SELECT name, type, \"notnull\", pk FROM pragma_table_info('profile') ORDER BY cid");
  const std::vector<std::tuple<std::string, std::string, int64_t, int64_t>> want = {
      {"case_id", "INTEGER", 1, 1}, {"mode", "TEXT", 1, 2},  {"scope", "TEXT", 1, 3},  {"slot", "TEXT", 1, 4},
      {"component", "TEXT", 1, 0},  {"pass", "TEXT", 1, 5},  {"kernel", "TEXT", 1, 6}, {"calls", "INTEGER", 1, 0},
      {"ms", "REAL", 1, 0},         {"bytes", "REAL", 0, 0}, {"flops", "REAL", 0, 0}};
  ASSERT_EQ(cols.rows.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(std::make_tuple(cols.rows[i][0].as_string(), cols.rows[i][1].as_string(), cols.rows[i][2].as_int(),
                              cols.rows[i][3].as_int()),
              want[i])
        << i;
  // The old case is kept as it was, without a profile.
  const RunData before = load_run(db, run);
  ASSERT_EQ(before.cases.size(), 1U);
  EXPECT_EQ(before.cases[0].result.timings.size(), 2U);
  EXPECT_TRUE(before.cases[0].result.profile.empty());
  // New cases write theirs.
  CaseRow c = throughput_case(1);
  c.result.profile = profile_rows();
  const int64_t id = db.add_case(run, c);
  EXPECT_EQ(db.query("SELECT count(*) FROM profile WHERE case_id = ?1", {Value::integer(id)}).rows[0][0].as_int(), 5);
  expect_same_profile(load_run(db, run).cases.at(1).result.profile, sorted_profile_rows());
}

TEST_F(StoreTest, ProfileRowsRoundTripWithNullWhereNothingWasDeclared) {
  Store db(db_path());
  const int64_t run = db.begin_run(sample_run());
  CaseRow c = throughput_case(0);
  c.result.profile = profile_rows();
  const int64_t id = db.add_case(run, c);
  const int64_t other = db.add_case(run, stability_case(1));

  // As SQL sees them: NULL bytes and flops where the kernel declared none.
  const QueryResult r = db.query(
      "SELECT mode, scope, slot, component, pass, kernel, calls, ms, bytes, flops FROM profile WHERE case_id = ?1 "
      "ORDER BY mode, ms DESC, scope",
      {Value::integer(id)});
  ASSERT_EQ(r.rows.size(), 5U);
  const auto& gemm = r.rows[0];
  EXPECT_EQ(gemm[0].as_string(), "forward");
  EXPECT_EQ(gemm[1].as_string(), "blocks.0.ffn");
  EXPECT_EQ(gemm[2].as_string(), "ffn");
  EXPECT_EQ(gemm[3].as_string(), "swiglu");
  EXPECT_EQ(gemm[4].as_string(), "forward");
  EXPECT_EQ(gemm[5].as_string(), "gemm NT");
  EXPECT_EQ(gemm[6].as_int(), 2);
  EXPECT_EQ(gemm[7].as_double(), 0.75);
  EXPECT_EQ(gemm[8].as_double(), 3.0e6);
  EXPECT_EQ(gemm[9].as_double(), 2.5e8);
  const auto& attention = r.rows[1];
  EXPECT_EQ(attention[5].as_string(), "attention backward (materializing)");
  EXPECT_EQ(attention[8].as_double(), 1.0e6);
  EXPECT_TRUE(attention[9].is_null());
  const auto& host = r.rows[4];
  EXPECT_EQ(host[1].as_string(), "");
  EXPECT_EQ(host[2].as_string(), "model");
  EXPECT_EQ(host[3].as_string(), "");
  EXPECT_EQ(host[4].as_string(), "step");
  EXPECT_EQ(host[5].as_string(), "(host)");
  EXPECT_EQ(host[6].as_int(), 0);
  EXPECT_EQ(host[7].as_double(), 0.0625);
  EXPECT_TRUE(host[8].is_null());
  EXPECT_TRUE(host[9].is_null());

  // The typed readers give them back in sort_profile's order, NULL as NaN; a case without any: none.
  const RunData d = load_run(db, run);
  ASSERT_EQ(d.cases.size(), 2U);
  expect_same_profile(d.cases[0].result.profile, sorted_profile_rows());
  EXPECT_TRUE(d.cases[1].result.profile.empty());
  expect_same_profile(load_profile(db, id), sorted_profile_rows());
  EXPECT_TRUE(load_profile(db, other).empty());

  // Removing the case removes its profile.
  db.remove_case(run, 0);
  EXPECT_EQ(db.query("SELECT count(*) FROM profile").rows[0][0].as_int(), 0);
}

TEST_F(StoreTest, RefusesAProfileRowWithoutATimeOrGivenTwice) {
  Store db(db_path());
  const int64_t run = db.begin_run(sample_run());
  CaseRow c = throughput_case(0);
  c.result.profile = profile_rows();
  c.result.profile[1].ms = kNaN;
  std::string message = error_of([&] { db.add_case(run, c); });
  EXPECT_NE(message.find("case 0: profile row (mode 'train_step', scope 'blocks.0.ffn', slot 'ffn', pass 'forward', "
                         "kernel 'gemm NT') ms is NaN"),
            std::string::npos)
      << message;
  c.result.profile = profile_rows();
  c.result.profile.push_back(c.result.profile[2]);
  c.result.profile.back().ms = 1;
  message = error_of([&] { db.add_case(run, c); });
  EXPECT_NE(message.find("case 0: profile row (mode 'train_step', scope '', slot 'model', pass 'step', kernel "
                         "'(host)') is given twice"),
            std::string::npos)
      << message;
  c.result.profile = profile_rows();
  c.result.profile[0].calls = -1;
  EXPECT_NE(error_of([&] { db.add_case(run, c); }).find("has -1 calls"), std::string::npos);
  for (const char* table : {"cases", "throughput", "profile"})
    EXPECT_EQ(db.query(std::string("SELECT count(*) FROM ") + table).rows[0][0].as_int(), 0) << table;
}

TEST_F(StoreTest, MigrationsEndAtTheSchemaVersion) {
  ASSERT_FALSE(migrations().empty());
  for (size_t i = 0; i < migrations().size(); ++i) EXPECT_EQ(migrations()[i].version, static_cast<int>(i) + 1);
  EXPECT_EQ(migrations().back().version, kSchemaVersion);
}

TEST_F(StoreTest, VersionOneDatabaseGainsArtifacts) {
  // A database as version 1 left it, with a run and a case in it.
  raw_exec(db_path(),
           std::string(migrations().at(0).sql) + "PRAGMA application_id = 1111838275; PRAGMA user_version = 1;");
  raw_exec(db_path(),
           "INSERT INTO runs(started_at, status, experiment_name, experiment_path, experiment_text, "
           "experiment_sha256, git_sha, harness_version, plugins_json, device, device_json, compiler, build_flags, "
           "seed, command_line, hostname, n_cases) VALUES('t', 'completed', 'old', 'p', 'x', 'h', 'g', 'v', '[]', "
           "'cpu', '{}', 'c', 'f', 0, 'bench run', 'host', 1);");
  Store db(db_path());
  EXPECT_EQ(db.schema_version(), 8);
  EXPECT_EQ(db.query("SELECT experiment_name FROM runs").rows.at(0).at(0).as_string(), "old");
  CaseRow c = stability_case(0);
  c.result.artifacts.push_back({"weights", "weights/run-1/case-0.safetensors", 1234, std::string(64, 'a')});
  const int64_t id = db.add_case(1, c);
  const QueryResult r = db.query("SELECT case_id, kind, path, bytes, sha256 FROM artifacts");
  ASSERT_EQ(r.rows.size(), 1U);
  EXPECT_EQ(r.rows[0][0].as_int(), id);
  EXPECT_EQ(r.rows[0][1].as_string(), "weights");
  EXPECT_EQ(r.rows[0][2].as_string(), "weights/run-1/case-0.safetensors");
  EXPECT_EQ(r.rows[0][3].as_int(), 1234);
  EXPECT_EQ(r.rows[0][4].as_string(), std::string(64, 'a'));
}

}  // namespace
}  // namespace store_migration_test
}  // namespace bench::store
