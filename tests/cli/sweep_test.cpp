// Sweeps in pieces: shards merged into one database equal one process's run case for case;
// merging twice adds nothing; mismatched shards, older schemas and foreign files are refused with
// nothing written; --jobs and --devices run cases at once into one database; --resume auto;
// bench submit's scripts (dry run, and with a stand-in sbatch).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/sha256.h"
#include "store/store.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace sweep_test {
namespace {

namespace fs = std::filesystem;

/// Three throughput cases and three learning-rate grids of two stability cases each.
std::string sweep_text(const std::string& extra = "") {
  return "name = \"sweep\"\nseed = 11\nthreads = 1\n" + extra +
         "[model]\nd_model = 32\nn_layers = 2\nn_heads = 2\nseq_len = 16\nbatch_size = 4\n"
         "norm_position = [\"post\", \"pre\", \"double\"]\n"
         "[data]\ntype = \"synthetic\"\nreference_tokens = 4096\n"
         "[throughput]\nmodes = [\"forward\"]\nrepetitions = 3\nmin_time = 0.01\nwarmup_time = 0.0\nmax_time = 0\n"
         "[stability]\nsteps = 12\nlr = [1e-2, 3e-2]\neval_batches = 2\n";
}

/// A fresh directory for one test.
std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(test::write_temp("x", "")).parent_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

test::Output bench(const std::string& args) { return test::bench_cli("-q " + args); }

int64_t scalar(const std::string& db, const std::string& sql) {
  const store::Store s(db, store::Store::Mode::kReadOnly);
  const auto r = s.query(sql);
  return r.rows.at(0).at(0).is_null() ? -1 : r.rows.at(0).at(0).as_int();
}

/// Every case of the latest run: ordinal -> "runner|label|status".
std::map<int64_t, std::string> cases_of(const std::string& db) {
  const store::Store s(db, store::Store::Mode::kReadOnly);
  std::map<int64_t, std::string> out;
  for (const auto& r : s.query("SELECT ordinal, runner || '|' || label || '|' || status FROM cases WHERE run_id = "
                               "(SELECT max(id) FROM runs)")
                           .rows)
    out[r[0].as_int()] = r[1].as_string();
  return out;
}

/// Per (ordinal, step): loss and grad norm, exactly as stored (hex of the doubles).
std::map<std::pair<int64_t, int64_t>, std::string> losses_of(const std::string& db) {
  const store::Store s(db, store::Store::Mode::kReadOnly);
  std::map<std::pair<int64_t, int64_t>, std::string> out;
  for (const auto& r : s.query("SELECT c.ordinal, st.step, printf('%!.17g %!.17g %!.17g', st.loss, st.grad_norm, "
                               "st.max_attn_logit) FROM steps st JOIN cases c ON c.id = st.case_id "
                               "WHERE c.run_id = (SELECT max(id) FROM runs)")
                           .rows)
    out[{r[0].as_int(), r[1].as_int()}] = r[2].as_string();
  return out;
}

/// Stability metrics that do not depend on timing: ordinal -> name -> value text.
std::map<int64_t, std::map<std::string, std::string>> stability_metrics_of(const std::string& db) {
  const store::Store s(db, store::Store::Mode::kReadOnly);
  std::map<int64_t, std::map<std::string, std::string>> out;
  for (const auto& r : s.query("SELECT c.ordinal, m.name, printf('%!.17g', m.value) FROM metrics m JOIN cases c ON "
                               "c.id = m.case_id WHERE c.run_id = (SELECT max(id) FROM runs) AND c.runner = "
                               "'stability' AND m.name NOT LIKE '%tokens_per_s%' AND m.unit NOT IN ('s', 'ms')")
                           .rows)
    out[r[0].as_int()][r[1].as_string()] = r[2].is_null() ? "NULL" : r[2].as_string();
  return out;
}

/// Throughput cases of the latest run: ordinal -> median ms of the forward pass.
std::map<int64_t, double> median_ms_of(const std::string& db) {
  const store::Store s(db, store::Store::Mode::kReadOnly);
  std::map<int64_t, double> out;
  for (const auto& r : s.query("SELECT c.ordinal, t.median_ms FROM throughput t JOIN cases c ON c.id = t.case_id "
                               "WHERE c.run_id = (SELECT max(id) FROM runs) AND t.mode = 'forward'")
                           .rows)
    out[r[0].as_int()] = r[1].as_double();
  return out;
}

struct Shards {
  std::string dir, exp, single;
  std::vector<std::string> dbs;
};

/// What the shared shards depend on: the sweep and the build's program and plugins (the newest
/// modification time under bin/ and lib/).
std::string shards_key() {
  // From min(), not {}: libstdc++'s file clock counts from 2174, so every file time is negative and
  // a zero start would never move (the key would outlive every rebuild).
  auto newest = fs::file_time_type::min();
  for (const char* sub : {"bin", "lib"}) {
    const fs::path dir = fs::path(BENCH_BINARY_DIR) / sub;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir))
      if (e.is_regular_file()) newest = std::max(newest, e.last_write_time());
  }
  return sha256_hex(sweep_text() + BENCH_BINARY_DIR + std::to_string(newest.time_since_epoch().count())).substr(0, 16);
}

/// The sweep run by one process, and as three shards each into its own database. CTest runs each
/// test in a process of its own, so the four runs are made once per build and shared (read only:
/// a test that writes copies a database first): the first process takes the lock and runs them,
/// the others wait for it and reuse its databases.
const Shards& three_shards() {
  static const Shards s = [] {
    Shards r;
    r.dir = (fs::temp_directory_path() / ("bench_sweep_shards_" + shards_key())).string();
    r.exp = r.dir + "/sweep.toml";
    r.single = r.dir + "/single.db";
    for (int i = 0; i < 3; ++i) r.dbs.push_back(r.dir + "/shard-" + std::to_string(i) + ".db");
    const int lock = ::open((r.dir + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
    EXPECT_GE(lock, 0) << r.dir << ".lock";
    if (lock >= 0) {
      EXPECT_EQ(::flock(lock, LOCK_EX), 0);
    }
    if (!fs::exists(r.dir + "/COMPLETE")) {
      fs::remove_all(r.dir);
      fs::create_directories(r.dir);
      std::ofstream(r.exp) << sweep_text();
      bool ok = true;
      const auto one = bench("--db " + r.single + " run " + r.exp);
      EXPECT_EQ(one.code, 0) << one.err;
      ok = ok && one.code == 0;
      for (int i = 0; i < 3; ++i) {
        const auto out = bench("--db " + r.dbs[i] + " run " + r.exp + " --shard " + std::to_string(i) + "/3");
        EXPECT_EQ(out.code, 0) << out.err;
        ok = ok && out.code == 0;
      }
      if (ok) std::ofstream(r.dir + "/COMPLETE") << "ok\n";
    }
    if (lock >= 0) ::close(lock);  // releases the lock
    return r;
  }();
  return s;
}

TEST(Sweep, ShardsTogetherHoldEveryCaseOnce) {
  const Shards& s = three_shards();
  int64_t total = 0;
  for (const auto& db : s.dbs) {
    const int64_t n = scalar(db, "SELECT count(*) FROM cases");
    EXPECT_GE(n, 2) << db;  // balanced: 9 cases in units of 1 and 2
    EXPECT_EQ(scalar(db, "SELECT sweep_cases FROM runs"), 9);
    EXPECT_EQ(scalar(db, "SELECT shard_count FROM runs"), 3);
    total += n;
  }
  EXPECT_EQ(total, 9);
}

TEST(Sweep, MergedShardsEqualOneProcessCaseForCase) {
  const Shards& s = three_shards();
  const std::string out = s.dir + "/merged.db";
  fs::remove(out);
  const auto m = bench("merge " + out + " " + s.dbs[0] + " " + s.dbs[1] + " " + s.dbs[2]);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("9 of 9 cases finished, 9 stored"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find(": completed"), std::string::npos) << m.out;
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM run_sources"), 3);
  EXPECT_EQ(cases_of(out), cases_of(s.single));
  // Training is deterministic for a seed: the losses are the same doubles, bit for bit.
  const auto losses = losses_of(out);
  EXPECT_EQ(losses.size(), 6u * 12u + 0u) << "6 stability cases x 12 steps";
  EXPECT_EQ(losses, losses_of(s.single));
  const auto metrics = stability_metrics_of(out);
  EXPECT_EQ(metrics, stability_metrics_of(s.single));
  // lr_sensitivity needs a whole grid: each shard had its grids whole.
  for (const auto& [ordinal, m2] : metrics) EXPECT_TRUE(m2.count("lr_sensitivity")) << ordinal;
  // Throughput was measured in each shard: every mode there, the same quantity as the single run's
  // (a unit or scale mistake is a factor of 1,000). Not a timing check: two test processes share
  // two cores, and on a loaded machine the ratio reached 4.8.
  const auto single_ms = median_ms_of(s.single), merged_ms = median_ms_of(out);
  ASSERT_EQ(single_ms.size(), 3u);
  ASSERT_EQ(merged_ms.size(), 3u);
  for (const auto& [ordinal, ms] : merged_ms) {
    EXPECT_GT(ms, 0.0);
    EXPECT_LT(ms / single_ms.at(ordinal), 30.0) << ordinal;
    EXPECT_GT(ms / single_ms.at(ordinal), 1.0 / 30) << ordinal;
  }
}

TEST(Sweep, MergingAgainAddsNothingAndAPartialMergeSaysWhatIsMissing) {
  const Shards& s = three_shards();
  const std::string out = s.dir + "/partial.db";
  fs::remove(out);
  auto m = bench("merge " + out + " " + s.dbs[0] + " " + s.dbs[2]);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("failed (incomplete"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("missing shards: 1"), std::string::npos) << m.out;
  const int64_t rows_before = scalar(out,
                                     "SELECT (SELECT count(*) FROM cases) + (SELECT count(*) FROM steps) + "
                                     "(SELECT count(*) FROM metrics) + (SELECT count(*) FROM samples)");
  m = bench("merge " + out + " " + s.dbs[0] + " " + s.dbs[2]);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(scalar(out,
                   "SELECT (SELECT count(*) FROM cases) + (SELECT count(*) FROM steps) + "
                   "(SELECT count(*) FROM metrics) + (SELECT count(*) FROM samples)"),
            rows_before);
  m = bench("merge " + out + " " + s.dbs[1]);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("9 of 9 cases finished"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find(": completed"), std::string::npos) << m.out;
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM cases"), 9);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM runs"), 1);
  // An unsharded run is copied once, by its uid, beside the sweep.
  m = bench("merge " + out + " " + s.single + " " + s.single);
  EXPECT_EQ(m.code, 2) << "the same file twice";
  m = bench("merge " + out + " " + s.single);
  ASSERT_EQ(m.code, 0) << m.err;
  m = bench("merge " + out + " " + s.single);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(scalar(out, "SELECT count(*) FROM cases"), 18);
}

TEST(Sweep, MergeRefusesMismatchedShardsOldSchemasForeignFilesAndItselfWritingNothing) {
  const Shards& s = three_shards();
  const std::string dir = fresh_dir("sweep_refusals");
  const std::string out = dir + "/out.db";
  ASSERT_EQ(bench("merge " + out + " " + s.dbs[0]).code, 0);
  const std::string before = test::read_file(out);

  // Shard 1 of the same sweep id, from another experiment text.
  const std::string other = dir + "/other.toml";
  std::ofstream(other) << sweep_text("# edited\n");
  const std::string sweep = [&] {
    const store::Store in(s.dbs[0], store::Store::Mode::kReadOnly);
    return in.query("SELECT sweep FROM runs").rows.at(0).at(0).as_string();
  }();
  const std::string odd = dir + "/odd.db";
  ASSERT_EQ(bench("--db " + odd + " run " + other + " --shard 1/3 --sweep " + sweep).code, 0);
  auto m = bench("merge " + out + " " + s.dbs[1] + " " + odd);
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("another experiment text"), std::string::npos) << m.err;
  EXPECT_NE(m.err.find(odd), std::string::npos) << m.err;
  EXPECT_EQ(test::read_file(out), before) << "a refusal writes nothing, not even the good input";

  // Another shard count under the same sweep id.
  const std::string four = dir + "/four.db";
  ASSERT_EQ(bench("--db " + four + " run " + s.exp + " --shard 1/4 --sweep " + sweep).code, 0);
  m = bench("merge " + out + " " + four);
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("one of 4 shards"), std::string::npos) << m.err;

  // An older schema version.
  const std::string old = dir + "/old.db";
  fs::copy_file(s.dbs[1], old);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(old.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 4", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  m = bench("merge " + out + " " + old);
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("schema version 4"), std::string::npos) << m.err;

  // A SQLite file of another application, a text file, a missing file, the output itself.
  const std::string foreign = dir + "/foreign.db";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  EXPECT_NE(bench("merge " + out + " " + foreign).err.find("another application"), std::string::npos);
  const std::string text = test::write_temp("merge_text.db", "hello\n");
  EXPECT_NE(bench("merge " + out + " " + text).err.find("not a SQLite database"), std::string::npos);
  EXPECT_EQ(bench("merge " + out + " " + dir + "/missing.db").code, 2);
  m = bench("merge " + out + " " + out);
  EXPECT_EQ(m.code, 2);
  EXPECT_NE(m.err.find("output database itself"), std::string::npos) << m.err;
  EXPECT_EQ(test::read_file(out), before);
}

TEST(Sweep, JobsRunCasesAtOnceEachOnItsOwnCores) {
  const Shards& s = three_shards();
  const std::string db = fresh_dir("sweep_jobs") + "/jobs.db";
  const auto r = bench("--db " + db + " run " + s.exp + " --jobs 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(cases_of(db), cases_of(s.single));
  EXPECT_EQ(losses_of(db), losses_of(s.single));
  EXPECT_EQ(stability_metrics_of(db), stability_metrics_of(s.single));
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM cases WHERE placement LIKE 'job 1/2, core%'") +
                scalar(db, "SELECT count(*) FROM cases WHERE placement LIKE 'job 2/2, core%'"),
            9);
  EXPECT_GE(scalar(db, "SELECT count(*) FROM cases WHERE placement LIKE 'job 2/2%'"), 1);
  EXPECT_EQ(scalar(db,
                   "SELECT count(*) FROM runs WHERE command_line LIKE '%--jobs 2%' AND device_json LIKE "
                   "'%2 processes at once%'"),
            1);
}

TEST(Sweep, DevicesGiveEachProcessOneDevice) {
  const Shards& s = three_shards();
  const std::string db = fresh_dir("sweep_devices") + "/devices.db";
  const auto r = bench("--db " + db + " run " + s.exp + " --devices 0,1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(scalar(db,
                   "SELECT count(*) FROM cases WHERE placement LIKE 'CUDA device 0, %' OR placement LIKE "
                   "'CUDA device 1, %'"),
            9);
  EXPECT_EQ(bench("--db " + db + " run " + s.exp + " --devices 0,0").code, 2);
  EXPECT_EQ(bench("--db " + db + " run " + s.exp + " --devices 0 --jobs 2").code, 2);
}

TEST(Sweep, ResumeAutoDoesNothingForACompletedShardAndBadShardsAreRefused) {
  const Shards& s = three_shards();
  const std::string db = fresh_dir("sweep_resume") + "/s.db";
  fs::copy_file(s.dbs[2], db);
  const int64_t cases = scalar(db, "SELECT count(*) FROM cases");
  auto r = test::bench_cli("--db " + db + " run " + s.exp + " --shard 2/3 --resume auto");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("already completed: nothing to do"), std::string::npos) << r.err;
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM cases"), cases);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM runs"), 1);
  // Another shard of the same file is another run.
  r = bench("--db " + db + " run " + s.exp + " --shard 0/3 --resume auto");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM runs"), 2);
  // Resuming a shard's run as another shard, or as a whole run, is refused.
  r = bench("--db " + db + " run " + s.exp + " --shard 1/3 --resume 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is shard 2/3"), std::string::npos) << r.err;
  EXPECT_EQ(bench("--db " + db + " run " + s.exp + " --resume 1").code, 2);
  for (const char* bad : {"3/3", "1", "-1/2", "a/b"}) {
    r = bench("--db " + db + " run " + s.exp + " --shard " + bad);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("--shard"), std::string::npos) << r.err;
  }
  EXPECT_EQ(bench("--db " + db + " run " + s.exp + " --sweep x").code, 2) << "--sweep without --shard";
}

TEST(Sweep, AShardIsRefusedForItsOwnCasesThatDoNotFit) {
  // Two cases, one far too large for any host: the shard that holds it is refused naming it, the
  // other shard runs; with --jobs the memory of each process at once is counted.
  const std::string dir = fresh_dir("sweep_memory");
  const std::string exp = dir + "/mem.toml";
  std::ofstream(exp) << "name = \"mem\"\nseed = 1\nthreads = 1\n"
                        "[model]\nd_model = [32, 65536]\nn_layers = 2\nn_heads = 2\nseq_len = 16\nbatch_size = 2\n"
                        "[data]\ntype = \"synthetic\"\n[stability]\nsteps = 2\n";
  int refused = 0, ran = 0;
  for (const char* shard : {"0/2", "1/2"}) {
    const auto r = bench("--db " + dir + "/m.db run " + exp + " --shard " + shard + " --jobs 2");
    if (r.code == 2) {
      ++refused;
      EXPECT_NE(r.err.find("d_model=65536"), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    } else {
      EXPECT_EQ(r.code, 0) << r.err;
      ++ran;
    }
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(ran, 1);
}

TEST(Sweep, EveryLoadedPluginIsStoredWithItsPathAndSha256) {
  const Shards& s = three_shards();
  const store::Store db(s.single, store::Store::Mode::kReadOnly);
  const auto plugins = nlohmann::json::parse(db.query("SELECT plugins_json FROM runs").rows.at(0).at(0).as_string());
  ASSERT_GE(plugins.size(), 5u);
  for (const auto& p : plugins) {
    const std::string path = p.at("path");
    EXPECT_TRUE(fs::path(path).is_absolute()) << path;
    EXPECT_EQ(p.at("sha256").get<std::string>(), sha256_hex(test::read_file(path))) << path;
  }
}

TEST(Sweep, SubmitWritesAJobArrayAndAMergeJobAndSkipsCompletedShards) {
  const Shards& s = three_shards();
  const std::string dir = fresh_dir("sweep_submit");
  const std::string db = dir + "/results/bench.db";
  auto r = test::bench_cli("--db " + db + " submit " + s.exp +
                           " --slurm --array-size 3 --partition debug --time 0:10:00 --cpus-per-task 2 "
                           "--sbatch-arg=--qos=low --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string sweep_dir = fs::path(r.out.substr(0, r.out.find('\n'))).parent_path().string();
  EXPECT_EQ(fs::path(sweep_dir).parent_path().string(), dir + "/results/sweeps");
  const std::string array = test::read_file(sweep_dir + "/array.sbatch");
  const std::string merge = test::read_file(sweep_dir + "/merge.sbatch");
  for (const char* want : {"#SBATCH --array=0-2\n", "#SBATCH --partition=debug\n", "#SBATCH --time=0:10:00\n",
                           "#SBATCH --cpus-per-task=2\n", "#SBATCH --qos=low\n", "--shard \"$shard/3\"",
                           "--resume auto", "SLURM_ARRAY_TASK_ID", "sha256sum"})
    EXPECT_NE(array.find(want), std::string::npos) << want << "\n" << array;
  EXPECT_NE(merge.find(" merge '" + fs::absolute(db).string() + "'"), std::string::npos) << merge;
  EXPECT_NE(r.err.find("nothing submitted"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db)) << "a dry run writes no results";
  EXPECT_EQ(test::shell("bash -n " + sweep_dir + "/array.sbatch && bash -n " + sweep_dir + "/merge.sbatch").code, 0);

  // Shard 1 completed: a second submission leaves it out of the array.
  const std::string sweep = fs::path(sweep_dir).filename().string();
  ASSERT_EQ(bench("--db " + sweep_dir + "/shard-1.db run " + s.exp + " --shard 1/3 --sweep " + sweep).code, 0);
  r = test::bench_cli("--db " + db + " submit " + s.exp + " --slurm --array-size 3 --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(test::read_file(sweep_dir + "/array.sbatch").find("#SBATCH --array=0,2\n"), std::string::npos);

  // Without --dry-run: sbatch (a stand-in here) gets the array, then the merge job after it.
  const std::string bin = dir + "/bin";
  fs::create_directories(bin);
  std::ofstream(bin + "/sbatch") << "#!/bin/sh\necho \"$@\" >> " << dir << "/sbatch.log\nif [ -f " << dir
                                 << "/n ]; then echo 43; else touch " << dir << "/n; echo 42; fi\n";
  fs::permissions(bin + "/sbatch", fs::perms::owner_all);
  r = test::bench_cli("--db " + db + " submit " + s.exp + " --slurm --array-size 3", "PATH=" + bin + ":$PATH");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("array job 42"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("merge job 43"), std::string::npos) << r.out;
  const std::string log = test::read_file(dir + "/sbatch.log");
  EXPECT_NE(log.find("--parsable " + sweep_dir + "/array.sbatch\n"), std::string::npos) << log;
  EXPECT_NE(log.find("--parsable --dependency=afterany:42 " + sweep_dir + "/merge.sbatch\n"), std::string::npos) << log;
  // Without --slurm there is nothing to submit to.
  EXPECT_EQ(test::bench_cli("--db " + db + " submit " + s.exp + " --dry-run").code, 2);
}

}  // namespace
}  // namespace sweep_test
}  // namespace bench
