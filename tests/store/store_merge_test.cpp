// The store under concurrency and across runs: two writers, two stores opening one fresh file,
// stale runs marked failed, resumed runs and removed cases, corrupt files left untouched, run
// uids and shards, and merging databases (cases, artifacts, profiles).
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
namespace store_merge_test {
namespace {

namespace fs = std::filesystem;
using namespace rig;  // the rig's helpers and fixture (store_rig.h)

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
}  // namespace store_merge_test
}  // namespace bench::store
