// defines: bench::store::rig — the store tests' rig: sample runs, cases and profiles, raw SQL
//          on a file, and the StoreTest fixture (a fresh directory per test), shared by
//          store_test.cpp, store_migration_test.cpp and store_merge_test.cpp
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "store/run_data.h"
#include "store/store.h"
#include "support/errors.h"

// A named namespace, not an anonymous one: the fixture must be one type in every test file
// (GoogleTest refuses a test suite whose fixtures differ).
namespace bench::store::rig {

namespace fs = std::filesystem;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs raw SQL on a file outside the Store, as another program would.
inline void raw_exec(const fs::path& p, const std::string& sql) {
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

inline RunInfo sample_run() {
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

inline CaseRow throughput_case(int64_t ordinal) {
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

inline CaseRow stability_case(int64_t ordinal) {
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
inline std::vector<ProfileRow> profile_rows() {
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
inline std::vector<ProfileRow> sorted_profile_rows() {
  const std::vector<ProfileRow> p = profile_rows();
  return {p[3], p[4], p[1], p[0], p[2]};
}

/// Every field equal, NaN where NaN is expected.
inline void expect_same_profile(const std::vector<ProfileRow>& got, const std::vector<ProfileRow>& want) {
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

}  // namespace bench::store::rig
