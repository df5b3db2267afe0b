// The store: a run's round trip, the database it writes (pragmas, schema version), refusals of
// files that are not ours or are newer, read-only access, queries, cases all or nothing, series
// and metrics rows; the hashes and clocks it stamps runs with.
#include "store/store.h"

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
#include "store_rig.h"
#include "support/errors.h"

namespace bench::store {
namespace store_test {
namespace {

namespace fs = std::filesystem;
using namespace rig;  // the rig's helpers and fixture (store_rig.h)

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1'000'000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55, 56 and 64 bytes: the padding boundaries.
  EXPECT_EQ(sha256_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(NowUtc, IsoWithMilliseconds) {
  const std::string t = now_utc();
  const std::string shape = "dddd-dd-ddTdd:dd:dd.dddZ";
  ASSERT_EQ(t.size(), shape.size()) << t;
  for (size_t i = 0; i < t.size(); ++i)
    EXPECT_TRUE(shape[i] == 'd' ? std::isdigit(static_cast<unsigned char>(t[i])) != 0 : t[i] == shape[i]) << t;
  EXPECT_GE(t.substr(0, 4), "2024");
}

TEST_F(StoreTest, RoundTripOfARunWithTwoCases) {
  Store db(db_path());
  EXPECT_FALSE(db.latest_run().has_value());
  const int64_t run = db.begin_run(sample_run());
  const int64_t c1 = db.add_case(run, throughput_case(0));
  const int64_t c2 = db.add_case(run, stability_case(1));
  db.finish_run(run, "completed");
  EXPECT_EQ(db.latest_run(), run);

  auto r = db.query(
      "SELECT status, finished_at IS NOT NULL, error, experiment_sha256, seed, n_cases FROM runs "
      "WHERE id = ?1",
      {Value::integer(run)});
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.columns[0], "status");
  EXPECT_EQ(r.rows[0][0].as_string(), "completed");
  EXPECT_EQ(r.rows[0][1].as_int(), 1);
  EXPECT_TRUE(r.rows[0][2].is_null());
  EXPECT_EQ(r.rows[0][3].as_string(), sha256_hex("abc"));
  EXPECT_EQ(r.rows[0][4].as_int(), 1234);
  EXPECT_EQ(r.rows[0][5].as_int(), 2);

  r = db.query(
      "SELECT id, ordinal, runner, status, error, n_params, n_params_embedding, flops_per_token, axes_json "
      "FROM cases ORDER BY ordinal");
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0][0].as_int(), c1);
  EXPECT_EQ(r.rows[1][0].as_int(), c2);
  EXPECT_EQ(r.rows[0][2].as_string(), "throughput");
  EXPECT_EQ(r.rows[1][3].as_string(), "diverged");
  EXPECT_TRUE(r.rows[0][4].is_null());
  EXPECT_EQ(r.rows[0][5].as_int(), 1000);
  EXPECT_TRUE(r.rows[0][6].is_null());
  EXPECT_DOUBLE_EQ(r.rows[0][7].as_double(), 6000.0);
  EXPECT_EQ(r.rows[0][8].as_string(), R"({"d_model":256})");

  r = db.query("SELECT mode, repetitions, median_ms, mfu, peak_bytes FROM throughput WHERE case_id = ?1 ORDER BY mode",
               {Value::integer(c1)});
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0][0].as_string(), "forward");
  EXPECT_EQ(r.rows[0][1].as_int(), 3);
  EXPECT_DOUBLE_EQ(r.rows[0][2].as_double(), 2.0);
  EXPECT_DOUBLE_EQ(r.rows[0][3].as_double(), 0.25);
  EXPECT_EQ(r.rows[0][4].as_int(), 1 << 20);
  EXPECT_TRUE(r.rows[1][3].is_null());
  EXPECT_TRUE(r.rows[1][4].is_null());

  r = db.query("SELECT mode, repetition, ms FROM samples WHERE case_id = ?1 ORDER BY mode, repetition",
               {Value::integer(c1)});
  ASSERT_EQ(r.rows.size(), 5u);
  EXPECT_EQ(r.rows[2][0].as_string(), "forward");
  EXPECT_EQ(r.rows[2][1].as_int(), 2);
  EXPECT_DOUBLE_EQ(r.rows[2][2].as_double(), 2.4);
  EXPECT_DOUBLE_EQ(r.rows[4][2].as_double(), 6.5);

  r = db.query("SELECT step, lr, loss, grad_norm, max_attn_logit, ms FROM steps WHERE case_id = ?1 ORDER BY step",
               {Value::integer(c2)});
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(r.rows[0][2].as_double(), 5.5);
  EXPECT_TRUE(r.rows[1][2].is_null()) << "NaN loss is stored as NULL";
  EXPECT_TRUE(r.rows[1][3].is_null()) << "inf grad norm is stored as NULL";
  EXPECT_DOUBLE_EQ(r.rows[1][4].as_double(), 3.5);
  EXPECT_DOUBLE_EQ(r.rows[1][5].as_double(), 4.1);

  r = db.query("SELECT name, value, unit FROM metrics WHERE case_id = ?1 ORDER BY name", {Value::integer(c2)});
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0][0].as_string(), "best_loss");
  EXPECT_EQ(r.rows[1][0].as_string(), "diverged_step");
  EXPECT_DOUBLE_EQ(r.rows[1][1].as_double(), 1.0);
  EXPECT_EQ(r.rows[2][0].as_string(), "final_loss");
  EXPECT_TRUE(r.rows[2][1].is_null()) << "NaN metric is stored as NULL";
  EXPECT_EQ(r.rows[2][2].as_string(), "nats");

  // The convenience view: one row per (case, metric).
  r = db.query("SELECT variant, value FROM results WHERE run_id = ?1 AND metric = 'best_loss'", {Value::integer(run)});
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][0].as_string(), "post_layernorm");
}

TEST_F(StoreTest, PragmasAndSchemaVersion) {
  Store db(db_path());
  EXPECT_EQ(db.schema_version(), kSchemaVersion);
  EXPECT_EQ(db.schema_version(), 8);
  EXPECT_EQ(db.query("PRAGMA journal_mode").rows.at(0).at(0).as_string(), "wal");
  EXPECT_EQ(db.query("PRAGMA user_version").rows.at(0).at(0).as_int(), 8);
  EXPECT_EQ(db.query("PRAGMA application_id").rows.at(0).at(0).as_int(), 0x42454E43);
  EXPECT_EQ(db.query("PRAGMA foreign_keys").rows.at(0).at(0).as_int(), 1);
  EXPECT_EQ(db.query("PRAGMA synchronous").rows.at(0).at(0).as_int(), 1);  // NORMAL
  EXPECT_EQ(db.query("PRAGMA busy_timeout").rows.at(0).at(0).as_int(), 10000);
  EXPECT_EQ(db.path(), db_path());
}

TEST_F(StoreTest, ReopeningKeepsDataAndDoesNotMigrateAgain) {
  int64_t run = 0;
  {
    Store db(db_path());
    run = db.begin_run(sample_run());
    db.add_case(run, throughput_case(0));
  }
  Store db(db_path());
  EXPECT_EQ(db.latest_run(), run);
  EXPECT_EQ(db.query("SELECT count(*) FROM cases").rows[0][0].as_int(), 1);
  EXPECT_EQ(db.query("SELECT status FROM runs").rows[0][0].as_string(), "running");
}

TEST_F(StoreTest, CreatesParentDirectories) {
  const fs::path nested = dir_ / "a" / "b" / "results.db";
  { Store db(nested.string()); }
  EXPECT_TRUE(fs::exists(nested));
}

TEST_F(StoreTest, InMemoryDatabase) {
  Store db(":memory:");
  const int64_t run = db.begin_run(sample_run());
  db.add_case(run, stability_case(0));
  EXPECT_EQ(db.query("SELECT count(*) FROM steps").rows[0][0].as_int(), 2);
}

TEST_F(StoreTest, RefusesAFileThatIsNotSqlite) {
  const fs::path p = dir_ / "notes.db";
  {
    std::ofstream out(p, std::ios::binary);
    out << "these are my notes, not a database\n" << std::string(5000, 'x');
  }
  const std::string before = read_bytes(p);
  const std::string message = error_of([&] { Store db(p.string()); });
  EXPECT_NE(message.find(p.string()), std::string::npos) << message;
  EXPECT_NE(message.find("not a SQLite database"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_FALSE(fs::exists(p.string() + "-wal"));
  EXPECT_NE(error_of([&] { Store db(p.string(), Store::Mode::kReadOnly); }), "");
  EXPECT_EQ(read_bytes(p), before);
}

TEST_F(StoreTest, RefusesASqliteDatabaseOfAnotherApplication) {
  const fs::path p = dir_ / "other.db";
  raw_exec(p, "PRAGMA application_id = 305419896; CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);");
  const std::string before = read_bytes(p);
  const std::string message = error_of([&] { Store db(p.string()); });
  EXPECT_NE(message.find(p.string()), std::string::npos) << message;
  EXPECT_NE(message.find("another application"), std::string::npos) << message;
  EXPECT_NE(message.find("0x12345678"), std::string::npos) << message;
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_NE(error_of([&] { Store db(p.string(), Store::Mode::kReadOnly); }), "");
  EXPECT_EQ(read_bytes(p), before);
}

TEST_F(StoreTest, RefusesAPlainSqliteDatabaseWithTables) {
  const fs::path p = dir_ / "plain.db";
  raw_exec(p, "CREATE TABLE runs(id INTEGER PRIMARY KEY, name TEXT);");
  const std::string before = read_bytes(p);
  const std::string message = error_of([&] { Store db(p.string()); });
  EXPECT_NE(message.find("not a bench results database"), std::string::npos) << message;
  EXPECT_EQ(read_bytes(p), before);
}

TEST_F(StoreTest, RefusesANewerSchemaVersion) {
  { Store db(db_path()); }
  raw_exec(db_path(), "PRAGMA user_version = 9;");
  const std::string before = read_bytes(db_path());
  const std::string message = error_of([&] { Store db(db_path()); });
  EXPECT_NE(message.find("schema version 9, newer than this build knows (8)"), std::string::npos) << message;
  EXPECT_NE(message.find(db_path()), std::string::npos) << message;
  EXPECT_EQ(read_bytes(db_path()), before);
  EXPECT_NE(error_of([&] { Store db(db_path(), Store::Mode::kReadOnly); }), "");
}

TEST_F(StoreTest, ReadOnlyRefusesWrites) {
  {
    Store db(db_path());
    db.begin_run(sample_run());
  }
  Store ro(db_path(), Store::Mode::kReadOnly);
  EXPECT_EQ(ro.query("SELECT count(*) FROM runs").rows[0][0].as_int(), 1);
  EXPECT_EQ(ro.latest_run(), 1);
  EXPECT_EQ(ro.schema_version(), 8);
  EXPECT_NE(error_of([&] { ro.query("DELETE FROM runs"); }), "");
  EXPECT_NE(error_of([&] { ro.query("PRAGMA user_version = 9"); }), "");
  EXPECT_NE(error_of([&] { ro.begin_run(sample_run()); }), "");
  EXPECT_NE(error_of([&] { ro.add_case(1, throughput_case(0)); }), "");
  EXPECT_NE(error_of([&] { ro.finish_run(1, "completed"); }), "");
  EXPECT_EQ(ro.query("SELECT count(*) FROM runs").rows[0][0].as_int(), 1);
  EXPECT_EQ(ro.query("SELECT status FROM runs").rows[0][0].as_string(), "running");
  EXPECT_EQ(ro.schema_version(), 8);
}

TEST_F(StoreTest, ReadOnlyMissingFile) {
  const std::string p = (dir_ / "nothing.db").string();
  EXPECT_EQ(error_of([&] { Store db(p, Store::Mode::kReadOnly); }),
            "no results database at " + p + " (run `bench run` first)");
  EXPECT_FALSE(fs::exists(p));
}

TEST_F(StoreTest, QueryBindsParametersAndTakesOneStatement) {
  Store db(db_path());
  auto r = db.query("SELECT ?1 AS i, ?2 AS f, ?3 AS s, ?4 AS n, ?5 AS b",
                    {Value::integer(3), Value::number(0.5), Value::string("it's"), Value(), Value::boolean(true)});
  ASSERT_EQ(r.columns, (std::vector<std::string>{"i", "f", "s", "n", "b"}));
  EXPECT_EQ(r.rows[0][0].as_int(), 3);
  EXPECT_DOUBLE_EQ(r.rows[0][1].as_double(), 0.5);
  EXPECT_EQ(r.rows[0][2].as_string(), "it's");
  EXPECT_TRUE(r.rows[0][3].is_null());
  EXPECT_EQ(r.rows[0][4].as_int(), 1);
  EXPECT_EQ(db.query("SELECT 1; -- trailing comment\n ;").rows.size(), 1u);
  EXPECT_NE(error_of([&] { db.query("SELECT 1; DROP TABLE runs"); }).find("exactly one"), std::string::npos);
  EXPECT_EQ(db.query("SELECT count(*) FROM runs").rows.size(), 1u);
  EXPECT_NE(error_of([&] { db.query("SELECT ?1, ?2", {Value::integer(1)}); }).find("2 parameter(s), 1 given"),
            std::string::npos);
  EXPECT_NE(error_of([&] { db.query("SELEC 1"); }).find("syntax error"), std::string::npos);
  EXPECT_NE(error_of([&] { db.query("  "); }), "");
}

TEST_F(StoreTest, AddCaseIsAllOrNothing) {
  Store db(db_path());
  const int64_t run = db.begin_run(sample_run());
  CaseRow c = stability_case(0);
  c.result.metrics.push_back({"best_loss", 1.0, "nats"});  // duplicate (case_id, name): the last insert fails
  const std::string message = error_of([&] { db.add_case(run, c); });
  EXPECT_NE(message.find("adding case 0 to run 1"), std::string::npos) << message;
  EXPECT_NE(message.find("UNIQUE constraint failed"), std::string::npos) << message;
  for (const char* table : {"cases", "steps", "metrics"})
    EXPECT_EQ(db.query(std::string("SELECT count(*) FROM ") + table).rows[0][0].as_int(), 0) << table;
  // The connection is usable afterwards.
  db.add_case(run, stability_case(0));
  EXPECT_EQ(db.query("SELECT count(*) FROM metrics").rows[0][0].as_int(), 3);
}

TEST_F(StoreTest, RejectsBadInput) {
  Store db(db_path());
  const int64_t run = db.begin_run(sample_run());
  CaseRow c = throughput_case(0);
  c.result.status = "weird";
  EXPECT_NE(error_of([&] { db.add_case(run, c); }).find("CHECK constraint failed"), std::string::npos);
  c = throughput_case(0);
  c.result.timings[0].median_ms = kNaN;
  EXPECT_NE(error_of([&] { db.add_case(run, c); }).find("throughput forward median_ms is NaN"), std::string::npos);
  EXPECT_NE(error_of([&] { db.add_case(run + 1, throughput_case(0)); }).find("FOREIGN KEY"), std::string::npos);
  db.add_case(run, throughput_case(0));
  EXPECT_NE(error_of([&] { db.add_case(run, throughput_case(0)); }).find("UNIQUE"), std::string::npos);
  EXPECT_NE(error_of([&] { db.finish_run(run + 1, "completed"); }).find("no run 2"), std::string::npos);
  EXPECT_NE(error_of([&] { db.finish_run(run, "running"); }), "");
  db.finish_run(run, "failed", "out of memory");
  auto r = db.query("SELECT status, error FROM runs");
  EXPECT_EQ(r.rows[0][0].as_string(), "failed");
  EXPECT_EQ(r.rows[0][1].as_string(), "out of memory");
}

TEST_F(StoreTest, SeriesRowsKeepLayerStepAndNull) {
  Store db(db_path());
  const int64_t run = db.begin_run(sample_run());
  CaseRow c = stability_case(0);
  c.result.series = {{"grad_rms", 0, 0, 0.25},
                     {"grad_rms", 1, 0, 0.5},
                     {"param_norm", -1, 0, 12.0},
                     {"init_grad_norm", 1, -1, 3.0},
                     {"val_loss", -1, 1, kNaN}};
  const int64_t id = db.add_case(run, c);
  auto r = db.query("SELECT name, layer, step, value FROM series WHERE case_id = ?1 ORDER BY name, layer, step",
                    {Value::integer(id)});
  ASSERT_EQ(r.rows.size(), 5u);
  EXPECT_EQ(r.rows[0][0].as_string(), "grad_rms");
  EXPECT_EQ(r.rows[0][1].as_int(), 0);
  EXPECT_DOUBLE_EQ(r.rows[1][3].as_double(), 0.5);
  EXPECT_EQ(r.rows[2][0].as_string(), "init_grad_norm");
  EXPECT_EQ(r.rows[2][2].as_int(), -1);
  EXPECT_TRUE(r.rows[3][1].is_null()) << "a whole-model value has no layer";
  EXPECT_TRUE(r.rows[4][3].is_null()) << "NaN is stored as NULL";
  // (case, name, layer, step) is unique, a NULL layer included.
  CaseRow dup = stability_case(1);
  dup.result.series = {{"param_norm", -1, 0, 1.0}, {"param_norm", -1, 0, 2.0}};
  EXPECT_NE(error_of([&] { db.add_case(run, dup); }).find("UNIQUE"), std::string::npos);
}

TEST_F(StoreTest, AddMetricsAddsAndReplaces) {
  Store db(db_path());
  const int64_t run = db.begin_run(sample_run());
  const int64_t id = db.add_case(run, stability_case(0));
  db.add_metrics(id, {{"lr_sensitivity", 0.75, "nats"}, {"best_loss", 4.0, "nats"}});
  auto r = db.query("SELECT name, value FROM metrics WHERE case_id = ?1 ORDER BY name", {Value::integer(id)});
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_EQ(r.rows[0][0].as_string(), "best_loss");
  EXPECT_DOUBLE_EQ(r.rows[0][1].as_double(), 4.0);
  EXPECT_EQ(r.rows[3][0].as_string(), "lr_sensitivity");
  EXPECT_DOUBLE_EQ(r.rows[3][1].as_double(), 0.75);
}

}  // namespace
}  // namespace store_test
}  // namespace bench::store
