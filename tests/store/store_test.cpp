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
#include "support/errors.h"

namespace bench::store {
namespace {

namespace fs = std::filesystem;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs raw SQL on a file outside the Store, as another program would.
void raw_exec(const fs::path& p, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(p.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string message = err != nullptr ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
}

using test::error_of;

RunInfo sample_run() {
  RunInfo info;
  info.experiment_name = "norms";
  info.experiment_path = "experiments/norms.toml";
  info.experiment_text = "abc";
  info.git_sha = "0123456789abcdef";
  info.harness_version = "0.1.0";
  info.plugins_json = R"({"norms":"0.1.0"})";
  info.device = "cpu";
  info.device_json = R"({"name":"cpu"})";
  info.compiler = "GNU 12.2.0";
  info.build_flags = "-O3";
  info.command_line = "bench run experiments/norms.toml";
  info.hostname = "host";
  info.seed = 1234;
  info.n_cases = 2;
  return info;
}

CaseRow throughput_case(int64_t ordinal) {
  CaseRow c;
  c.ordinal = ordinal;
  c.runner = "throughput";
  c.label = "pre/rmsnorm d=256";
  c.variant = "pre_rmsnorm";
  c.axes_json = R"({"d_model":256})";
  c.seed = 7;
  c.result.wall_s = 1.5;
  c.result.n_params = 1000;
  c.result.flops_per_token = 6000.0;
  Timing fwd;
  fwd.mode = "forward";
  fwd.repetitions = 3;
  fwd.iterations = 10;
  fwd.median_ms = 2.0;
  fwd.mean_ms = 2.1;
  fwd.min_ms = 1.9;
  fwd.max_ms = 2.4;
  fwd.stddev_ms = 0.2;
  fwd.mad_ms = 0.1;
  fwd.tokens_per_s = 5e5;
  fwd.flops_per_iter = 1e9;
  fwd.gflops_per_s = 500;
  fwd.mfu = 0.25;
  fwd.peak_bytes = 1 << 20;
  fwd.samples_ms = {2.0, 1.9, 2.4};
  Timing step = fwd;
  step.mode = "train_step";
  step.mfu.reset();
  step.peak_bytes.reset();
  step.samples_ms = {6.0, 6.5};
  c.result.timings = {fwd, step};
  return c;
}

CaseRow stability_case(int64_t ordinal) {
  CaseRow c;
  c.ordinal = ordinal;
  c.runner = "stability";
  c.label = "post/layernorm lr=1e-3";
  c.variant = "post_layernorm";
  c.result.status = "diverged";
  c.result.wall_s = 3.0;
  c.result.steps = {{0, 1e-3, 5.5, 1.0, 3.0, 0.1, 0.01, 4.0},
                    {1, 1e-3, kNaN, std::numeric_limits<double>::infinity(), 3.5, 0.2, 0.02, 4.1}};
  c.result.metrics = {{"final_loss", kNaN, "nats"}, {"best_loss", 5.5, "nats"}, {"diverged_step", 1, "step"}};
  return c;
}

/// A profile as the throughput runner hands it over, not in sort_profile's order: the same GEMM in
/// two modes, a kernel without declared traffic (the model's host time), one that declared its
/// bytes but no FLOPs, and two kernels of one mode with the same time.
std::vector<ProfileRow> profile_rows() {
  return {
      {"train_step", "blocks.0.attn_norm", "norm", "rmsnorm", "forward", "NormForward<float, 128, false, false>", 1,
       0.125, 65536, 16384},
      {"train_step", "blocks.0.ffn", "ffn", "swiglu", "forward", "gemm NT", 2, 1.5, 3.0e6, 2.5e8},
      {"train_step", "", "model", "", "step", "(host)", 0, 0.0625, kNaN, kNaN},
      {"forward", "blocks.0.ffn", "ffn", "swiglu", "forward", "gemm NT", 2, 0.75, 3.0e6, 2.5e8},
      {"train_step", "blocks.0.attn", "attention", "mha", "backward", "attention backward (materializing)", 1, 1.5,
       1.0e6, kNaN},
  };
}

/// profile_rows() as the readers give it back: forward first, then the longest first, the tie by scope.
std::vector<ProfileRow> sorted_profile_rows() {
  const std::vector<ProfileRow> p = profile_rows();
  return {p[3], p[4], p[1], p[0], p[2]};
}

/// Every field equal, NaN where NaN is expected.
void expect_same_profile(const std::vector<ProfileRow>& got, const std::vector<ProfileRow>& want) {
  ASSERT_EQ(got.size(), want.size());
  const auto same = [](double g, double w) { return std::isnan(w) ? std::isnan(g) : g == w; };
  for (size_t i = 0; i < want.size(); ++i) {
    const ProfileRow &g = got[i], &w = want[i];
    EXPECT_EQ(g.mode, w.mode) << i;
    EXPECT_EQ(g.scope, w.scope) << i;
    EXPECT_EQ(g.slot, w.slot) << i;
    EXPECT_EQ(g.component, w.component) << i;
    EXPECT_EQ(g.pass, w.pass) << i;
    EXPECT_EQ(g.kernel, w.kernel) << i;
    EXPECT_EQ(g.calls, w.calls) << i;
    EXPECT_EQ(g.ms, w.ms) << i;
    EXPECT_TRUE(same(g.bytes, w.bytes)) << i << ": " << g.bytes << " != " << w.bytes;
    EXPECT_TRUE(same(g.flops, w.flops)) << i << ": " << g.flops << " != " << w.flops;
  }
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("bench_store_test_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string db_path() const { return (dir_ / "bench.db").string(); }

  fs::path dir_;
};

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

TEST_F(StoreTest, TwoWritersInTwoThreadsLoseNoRows) {
  constexpr int kCasesPerWriter = 50;
  int64_t run = 0;
  {
    Store db(db_path());
    run = db.begin_run(sample_run());
  }
  std::vector<std::string> errors(2);
  auto writer = [&](int w) {
    try {
      Store db(db_path());
      for (int i = 0; i < kCasesPerWriter; ++i) {
        CaseRow c = i % 2 == 0 ? throughput_case(w * 1000 + i) : stability_case(w * 1000 + i);
        db.add_case(run, c);
      }
    } catch (const std::exception& e) {
      errors[w] = e.what();
    }
  };
  std::thread a(writer, 0), b(writer, 1);
  a.join();
  b.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  Store db(db_path(), Store::Mode::kReadOnly);
  EXPECT_EQ(db.query("SELECT count(*) FROM cases").rows[0][0].as_int(), 2 * kCasesPerWriter);
  EXPECT_EQ(db.query("SELECT count(*) FROM throughput").rows[0][0].as_int(), 2 * kCasesPerWriter);
  EXPECT_EQ(db.query("SELECT count(*) FROM samples").rows[0][0].as_int(), kCasesPerWriter * 5);
  EXPECT_EQ(db.query("SELECT count(*) FROM steps").rows[0][0].as_int(), 2 * kCasesPerWriter);
  EXPECT_EQ(db.query("SELECT count(*) FROM metrics").rows[0][0].as_int(), 3 * kCasesPerWriter);
  EXPECT_EQ(db.query("SELECT count(*) FROM cases WHERE ordinal >= 1000").rows[0][0].as_int(), kCasesPerWriter);
}

TEST_F(StoreTest, TwoNewStoresOpeningAFreshFileAtOnce) {
  std::vector<std::string> errors(2);
  auto opener = [&](int w) {
    try {
      Store db(db_path());
      const int64_t run = db.begin_run(sample_run());
      db.add_case(run, throughput_case(0));
    } catch (const std::exception& e) {
      errors[w] = e.what();
    }
  };
  std::thread a(opener, 0), b(opener, 1);
  a.join();
  b.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  Store db(db_path(), Store::Mode::kReadOnly);
  EXPECT_EQ(db.query("SELECT count(*) FROM runs").rows[0][0].as_int(), 2);
  EXPECT_EQ(db.query("SELECT count(*) FROM cases").rows[0][0].as_int(), 2);
}

std::string this_host() {
  std::array<char, 256> buf{};
  gethostname(buf.data(), buf.size() - 1);
  return buf.data();
}

TEST_F(StoreTest, StaleRunsOfThisHostAreMarkedFailed) {
  // A pid that surely belongs to no process: a child that has exited and been reaped.
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  waitpid(gone, nullptr, 0);
  {
    Store db(db_path());
    RunInfo dead = sample_run();
    dead.hostname = this_host();
    dead.pid = gone;
    RunInfo not_bench = dead;  // alive, but this test program is not named bench
    not_bench.pid = getpid();
    RunInfo elsewhere = dead;  // another host: cannot be checked from here
    elsewhere.hostname = "another-host.example";
    RunInfo no_pid = dead;  // written before version 4
    no_pid.pid = 0;
    db.begin_run(dead);
    db.begin_run(not_bench);
    db.begin_run(elsewhere);
    db.begin_run(no_pid);
    const int64_t done = db.begin_run(dead);
    db.finish_run(done, "completed");
    EXPECT_TRUE(db.stale_runs_failed().empty());
  }
  Store db(db_path());
  EXPECT_EQ(db.stale_runs_failed(), (std::vector<int64_t>{1, 2}));
  const QueryResult r = db.query("SELECT id, status, error, finished_at IS NOT NULL, pid FROM runs ORDER BY id");
  ASSERT_EQ(r.rows.size(), 5U);
  EXPECT_EQ(r.rows[0][1].as_string(), "failed");
  EXPECT_EQ(r.rows[0][2].as_string(), "stale: its process (pid " + std::to_string(gone) + " on " + this_host() +
                                          ") is gone; killed or crashed while running");
  EXPECT_EQ(r.rows[0][3].as_int(), 1);
  EXPECT_EQ(r.rows[0][4].as_int(), gone);
  EXPECT_EQ(r.rows[1][1].as_string(), "failed");
  EXPECT_EQ(r.rows[2][1].as_string(), "running");
  EXPECT_EQ(r.rows[3][1].as_string(), "running");
  EXPECT_TRUE(r.rows[3][4].is_null());
  EXPECT_EQ(r.rows[4][1].as_string(), "completed");
  EXPECT_TRUE(r.rows[4][2].is_null());
  // Marked once: a second opening finds nothing more.
  Store again(db_path());
  EXPECT_TRUE(again.stale_runs_failed().empty());
}

TEST_F(StoreTest, ResumeRunAndRemoveCase) {
  Store db(db_path());
  const int64_t run = db.begin_run(sample_run());
  db.add_case(run, throughput_case(0));
  const int64_t kept = db.add_case(run, stability_case(1));
  db.add_case(run, throughput_case(2));
  db.finish_run(run, "failed", "1 case(s) failed");
  db.remove_case(run, 2);
  db.remove_case(run, 9);  // no such case: nothing happens
  EXPECT_EQ(db.query("SELECT count(*) FROM cases").rows[0][0].as_int(), 2);
  EXPECT_EQ(db.query("SELECT count(*) FROM throughput").rows[0][0].as_int(), 2);
  EXPECT_EQ(db.query("SELECT count(*) FROM samples").rows[0][0].as_int(), 5);
  EXPECT_EQ(db.query("SELECT count(*) FROM steps").rows[0][0].as_int(), 2);
  EXPECT_EQ(db.query("SELECT id FROM cases WHERE ordinal = 1").rows[0][0].as_int(), kept);
  db.add_case(run, throughput_case(2));  // the ordinal is free again
  db.resume_run(run, 4242, "resumer");
  const QueryResult r = db.query("SELECT status, error, finished_at, pid, hostname FROM runs");
  EXPECT_EQ(r.rows[0][0].as_string(), "running");
  EXPECT_TRUE(r.rows[0][1].is_null());
  EXPECT_TRUE(r.rows[0][2].is_null());
  EXPECT_EQ(r.rows[0][3].as_int(), 4242);
  EXPECT_EQ(r.rows[0][4].as_string(), "resumer");
  EXPECT_NE(error_of([&] { db.resume_run(99, 1, "h"); }), "");
}

// A file with the SQLite header and garbage after it, or a database cut short: a one-line error
// naming the file, which is left exactly as it was.
TEST_F(StoreTest, RefusesACorruptDatabaseWithoutTouchingIt) {
  const fs::path garbage = dir_ / "garbage.db";
  {
    std::ofstream out(garbage, std::ios::binary);
    out.write("SQLite format 3", 16);  // with its terminating NUL: exactly the 16-byte header
    uint32_t x = 12345;
    for (int i = 0; i < 8192; ++i) {
      x = x * 1664525U + 1013904223U;
      out.put(static_cast<char>(x >> 24));
    }
  }
  const fs::path truncated = dir_ / "truncated.db";
  {
    Store db(truncated.string());
    const int64_t run = db.begin_run(sample_run());
    for (int i = 0; i < 200; ++i) db.add_case(run, throughput_case(i));
    db.query("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  fs::remove(truncated.string() + "-wal");
  fs::remove(truncated.string() + "-shm");
  fs::resize_file(truncated, fs::file_size(truncated) / 3);
  for (const fs::path& p : {garbage, truncated}) {
    const std::string before = read_bytes(p);
    for (const Store::Mode mode : {Store::Mode::kReadWrite, Store::Mode::kReadOnly}) {
      const std::string message = error_of([&] {
        Store db(p.string(), mode);
        db.query("SELECT count(*) FROM cases JOIN samples ON samples.case_id = cases.id");
      });
      EXPECT_NE(message, "") << p;
      EXPECT_NE(message.find(p.string()), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_EQ(read_bytes(p), before) << p;
    }
  }
}

TEST_F(StoreTest, EveryRunHasItsOwnUidAndAShardItsSweep) {
  Store db(db_path());
  RunInfo shard = sample_run();
  shard.sweep = "norms-abc-of3";
  shard.shard_index = 2;
  shard.shard_count = 3;
  shard.sweep_cases = 7;
  const int64_t a = db.begin_run(sample_run()), b = db.begin_run(shard);
  EXPECT_NE(db.run_uid(a), db.run_uid(b));
  EXPECT_EQ(db.run_uid(a).size(), 32U);
  const auto r = db.query("SELECT sweep, shard_index, shard_count, sweep_cases FROM runs ORDER BY id");
  EXPECT_TRUE(r.rows[0][0].is_null());
  EXPECT_TRUE(r.rows[0][1].is_null());
  EXPECT_EQ(r.rows[1][0].as_string(), "norms-abc-of3");
  EXPECT_EQ(r.rows[1][1].as_int(), 2);
  EXPECT_EQ(r.rows[1][2].as_int(), 3);
  EXPECT_EQ(r.rows[1][3].as_int(), 7);
  EXPECT_THROW(db.run_uid(99), Error);
}

TEST_F(StoreTest, MergeReplacesAnUnfinishedCaseAndRepathsArtifacts) {
  fs::create_directories(dir_ / "a");
  fs::create_directories(dir_ / "b" / "deeper");
  const std::string src_path = (dir_ / "a" / "src.db").string();
  const std::string out_path = (dir_ / "b" / "deeper" / "out.db").string();
  const std::string near_path = (dir_ / "b" / "near.db").string();
  auto src_db = std::make_unique<Store>(src_path);
  Store& src = *src_db;
  const int64_t run = src.begin_run(sample_run());
  CaseRow first = throughput_case(0);
  first.result.status = "failed";
  first.result.error = "plugin threw";
  first.result.timings.clear();
  src.add_case(run, first);
  CaseRow second = stability_case(1);
  second.result.artifacts.push_back({"weights", "weights/run-1/case-1.safetensors", 10, std::string(64, 'b')});
  second.result.placement = "job 2/2, core 1";
  src.add_case(run, second);
  src.finish_run(run, "failed", "1 case(s) failed");

  Store out(out_path);
  auto done = out.merge({src_path});
  ASSERT_EQ(done.size(), 1U);
  EXPECT_TRUE(done[0].created);
  EXPECT_EQ(done[0].added, 2);
  EXPECT_EQ(out.run_uid(done[0].target_run), src.run_uid(run)) << "a copied run keeps its uid";
  // The artifact lives next to the source database: outside the output's directory, so absolute.
  EXPECT_EQ(out.query("SELECT path FROM artifacts").rows.at(0).at(0).as_string(),
            (dir_ / "a" / "weights/run-1/case-1.safetensors").string());
  EXPECT_EQ(out.query("SELECT placement FROM cases WHERE ordinal = 1").rows.at(0).at(0).as_string(), "job 2/2, core 1");
  EXPECT_EQ(out.query("SELECT source_uid FROM cases WHERE ordinal = 1").rows.at(0).at(0).as_string(), src.run_uid(run));

  // The source resumes and completes case 0: merging again replaces the failed copy, keeps case 1.
  src.remove_case(run, 0);
  src.add_case(run, throughput_case(0));
  src.finish_run(run, "completed");
  done = out.merge({src_path});
  ASSERT_EQ(done.size(), 1U);
  EXPECT_FALSE(done[0].created);
  EXPECT_EQ(done[0].added, 0);
  EXPECT_EQ(done[0].replaced, 1);
  EXPECT_EQ(done[0].kept, 1);
  EXPECT_EQ(out.query("SELECT status FROM cases WHERE ordinal = 0").rows.at(0).at(0).as_string(), "completed");
  EXPECT_EQ(out.query("SELECT count(*) FROM samples").rows.at(0).at(0).as_int(), 5);
  EXPECT_EQ(out.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "completed");
  EXPECT_EQ(out.query("SELECT count(*) FROM cases").rows.at(0).at(0).as_int(), 2);

  // Into a database whose directory contains the source's: the path stays relative.
  src_db.reset();  // closed: its write-ahead log is checkpointed into the file that is copied
  Store near(near_path);
  fs::create_directories(dir_ / "b" / "a");
  fs::copy_file(src_path, dir_ / "b" / "a" / "src.db");
  near.merge({(dir_ / "b" / "a" / "src.db").string()});
  EXPECT_EQ(near.query("SELECT path FROM artifacts").rows.at(0).at(0).as_string(),
            "a/weights/run-1/case-1.safetensors");
}

TEST_F(StoreTest, MergeCopiesTheProfileWithItsCase) {
  const std::string src_path = (dir_ / "src.db").string();
  const std::string out_path = (dir_ / "out.db").string();
  Store src(src_path);
  const int64_t run = src.begin_run(sample_run());
  CaseRow partial = throughput_case(0);  // failed after profiling one kernel
  partial.result.status = "failed";
  partial.result.profile = {profile_rows()[0]};
  src.add_case(run, partial);
  CaseRow whole = throughput_case(1);
  whole.result.profile = profile_rows();
  src.add_case(run, whole);
  src.finish_run(run, "failed", "1 case(s) failed");

  Store out(out_path);
  auto done = out.merge({src_path});
  ASSERT_EQ(done.size(), 1U);
  EXPECT_EQ(done[0].added, 2);
  RunData d = load_run(out, done[0].target_run);
  ASSERT_EQ(d.cases.size(), 2U);
  expect_same_profile(d.cases[0].result.profile, {profile_rows()[0]});
  expect_same_profile(d.cases[1].result.profile, sorted_profile_rows());
  // NULL stays NULL: one row without bytes, two without FLOPs.
  EXPECT_EQ(out.query("SELECT count(*) FROM profile WHERE bytes IS NULL").rows[0][0].as_int(), 1);
  EXPECT_EQ(out.query("SELECT count(*) FROM profile WHERE flops IS NULL").rows[0][0].as_int(), 2);

  // The source runs case 0 again, to the end: merging again replaces the case and its profile.
  src.remove_case(run, 0);
  CaseRow again = throughput_case(0);
  again.result.profile = profile_rows();
  again.result.profile[3].ms = 0.5;
  src.add_case(run, again);
  src.finish_run(run, "completed");
  done = out.merge({src_path});
  ASSERT_EQ(done.size(), 1U);
  EXPECT_EQ(done[0].replaced, 1);
  EXPECT_EQ(done[0].kept, 1);
  EXPECT_EQ(out.query("SELECT count(*) FROM profile").rows[0][0].as_int(), 10);
  d = load_run(out, done[0].target_run);
  std::vector<ProfileRow> want = sorted_profile_rows();
  want[0].ms = 0.5;
  expect_same_profile(d.cases.at(0).result.profile, want);
  expect_same_profile(d.cases.at(1).result.profile, sorted_profile_rows());
}

}  // namespace
}  // namespace bench::store
