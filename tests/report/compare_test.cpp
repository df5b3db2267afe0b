// bench compare: the statistics (exact Mann-Whitney, its interval, the verdict rule) and the
// pairing of cases between runs and within a run.
#include "report/compare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "bench/error.h"
#include "report/significance.h"

namespace bench::report {
namespace compare_test {
namespace {

namespace fs = std::filesystem;
using store::Store;

std::vector<double> scaled(const std::vector<double>& v, double f) {
  std::vector<double> out;
  for (double x : v) out.push_back(x * f);
  return out;
}

const std::vector<double> kTimes = {10.00, 10.02, 9.98, 10.05, 9.96, 10.01, 9.99};
const std::vector<double> kTight = {10.000, 10.001, 10.002, 10.003, 10.004, 9.999, 9.998};

TEST(MannWhitney, ExactTwoSidedP) {
  // Complete separation of 5 and 5: P(U = 0) = 1 / C(10, 5) = 1/252, two-sided 2/252.
  EXPECT_NEAR(mann_whitney_p({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}), 2.0 / 252, 1e-12);
  EXPECT_NEAR(mann_whitney_p({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}), 2.0 / 252, 1e-12);
  // One swap: U = 1, P(U <= 1) = 2/252.
  EXPECT_NEAR(mann_whitney_p({1, 2, 3, 4, 6}, {5, 7, 8, 9, 10}), 4.0 / 252, 1e-12);
  // Interleaved samples: no evidence.
  EXPECT_GT(mann_whitney_p({1, 3, 5, 7, 9}, {2, 4, 6, 8, 10}), 0.5);
  // 3 against 3 can never reach 0.05: the smallest two-sided p is 2/20.
  EXPECT_NEAR(mann_whitney_p({1, 2, 3}, {4, 5, 6}), 0.1, 1e-12);
  // Large samples use the normal approximation and still see a clear shift.
  std::vector<double> a, b;
  for (int i = 0; i < 60; ++i) a.push_back(i), b.push_back(i + 30);
  EXPECT_LT(mann_whitney_p(a, b), 1e-6);
}

TEST(ShiftInterval, OrderStatisticsOfTheExactDistribution) {
  // n = m = 5: P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252, so k = 3 and the coverage is 1 - 8/252.
  const auto iv = shift_interval({0, 0, 0, 0, 0}, {1, 2, 3, 4, 5}, 0.05);
  ASSERT_TRUE(iv.has_value());
  EXPECT_DOUBLE_EQ(iv->first.first, 1.0);   // the 3rd smallest of the 25 differences (five 1s)
  EXPECT_DOUBLE_EQ(iv->first.second, 5.0);  // the 23rd
  EXPECT_NEAR(iv->second, 1 - 8.0 / 252, 1e-12);
  // Too few values for 95 %: no interval.
  EXPECT_FALSE(shift_interval({1, 2, 3}, {4, 5, 6}, 0.05).has_value());
  EXPECT_FALSE(shift_interval({1}, {4, 5, 6}, 0.05).has_value());
}

TEST(CompareSamples, ClearSlowdownIsSlower) {
  const Comparison c = compare_samples(kTimes, scaled(kTimes, 1.2), Direction::kLowerIsBetter, 0.05, 0.02);
  EXPECT_EQ(c.verdict, Verdict::kWorse);
  EXPECT_EQ(verdict_name(c.verdict, true), "slower");
  EXPECT_NEAR(*c.ratio, 1.2, 1e-9);
  EXPECT_LT(*c.p, 0.01);
  ASSERT_TRUE(c.lo && c.hi);
  EXPECT_LE(*c.lo, 1.2 + 1e-9);
  EXPECT_GE(*c.hi, 1.2 - 1e-9);
  // The same numbers as a rate (higher is better) are a clear improvement.
  EXPECT_EQ(compare_samples(kTimes, scaled(kTimes, 1.2), Direction::kHigherIsBetter, 0.05, 0.02).verdict,
            Verdict::kBetter);
}

TEST(CompareSamples, SignificantButBelowTheMinimumEffectIsSame) {
  // A consistent 0.5 % shift with tight repetitions: real, but below the 2 % that matters.
  const Comparison c = compare_samples(kTight, scaled(kTight, 1.005), Direction::kLowerIsBetter, 0.05, 0.02);
  EXPECT_LT(*c.p, 0.01);
  EXPECT_EQ(c.verdict, Verdict::kSame) << *c.lo << " " << *c.hi;
  // With a 0.1 % minimum effect the same data are a slowdown.
  EXPECT_EQ(compare_samples(kTight, scaled(kTight, 1.005), Direction::kLowerIsBetter, 0.05, 0.001).verdict,
            Verdict::kWorse);
}

TEST(CompareSamples, LargeButNoisyIsUnclear) {
  // B's median is 10 % higher, but the repetitions overlap heavily: no verdict.
  const std::vector<double> a = {10, 14, 8, 12, 9};
  const std::vector<double> b = {11, 15, 9, 13.2, 8.5};
  const Comparison c = compare_samples(a, b, Direction::kLowerIsBetter, 0.05, 0.02);
  EXPECT_EQ(c.verdict, Verdict::kUnclear);
  EXPECT_GT(*c.p, 0.05);
  // Three repetitions a side cannot reach p < 0.05, whatever the effect.
  EXPECT_EQ(compare_samples({1, 1.01, 0.99}, {2, 2.01, 1.99}, Direction::kLowerIsBetter, 0.05, 0.02).verdict,
            Verdict::kUnclear);
}

TEST(CompareSamples, SingleValues) {
  EXPECT_EQ(compare_samples({2.1}, {2.3}, Direction::kLowerIsBetter, 0.05, 0.02).verdict, Verdict::kSingleRun);
  EXPECT_EQ(compare_samples({0}, {0}, Direction::kLowerIsBetter, 0.05, 0.02).verdict, Verdict::kSame);
  EXPECT_FALSE(compare_samples({2.1}, {2.3}, Direction::kLowerIsBetter, 0.05, 0.02).p.has_value());
  // Neutral metrics are higher or lower, never better or worse.
  EXPECT_EQ(compare_samples(kTimes, scaled(kTimes, 2), Direction::kNeutral, 0.05, 0.02).verdict, Verdict::kHigher);
}

// Two runs of the same "experiment": B's case 1 is 30 % slower, its post-norm diverges.
class CompareRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("bench_compare_test_" + std::to_string(getpid()) + ".db")).string();
    remove_files();
    Store db(path_);
    add_run(db, 1.0, false);
    add_run(db, 1.3, true);
  }
  void TearDown() override { remove_files(); }
  void remove_files() {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix);
  }

  static CaseRow throughput_case(int64_t ordinal, const std::string& label, const std::vector<double>& ms,
                                 bool noisy = false) {
    CaseRow c;
    c.ordinal = ordinal;
    c.runner = "throughput";
    c.label = label;
    Timing t;
    t.mode = "train_step";
    t.repetitions = static_cast<int64_t>(ms.size());
    t.iterations = 10;
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    t.median_ms = sorted[sorted.size() / 2];
    t.mean_ms = t.median_ms;
    t.min_ms = sorted.front();
    t.max_ms = sorted.back();
    t.tokens_per_s = 1024 / (t.median_ms / 1000);
    t.flops_per_iter = 1e9;
    t.gflops_per_s = 1e9 / (t.median_ms / 1000) / 1e9;
    t.peak_bytes = 1 << 20;
    t.samples_ms = ms;
    t.max_noise = 0.02;
    t.noisy = noisy;
    c.result.timings = {t};
    return c;
  }

  static CaseRow stability_case(int64_t ordinal, const std::string& label, double loss, bool diverged) {
    CaseRow c;
    c.ordinal = ordinal;
    c.runner = "stability";
    c.label = label;
    c.result.status = diverged ? "diverged" : "completed";
    c.result.metrics = {{"lr", 0.01, ""},
                        {"final_loss", diverged ? std::nan("") : loss, "nats"},
                        {"best_loss", loss, "nats"},
                        {"spike_count", 0, "steps"},
                        {"max_attn_logit", 10, ""}};
    return c;
  }

  void add_run(Store& db, double slowdown, bool diverge, bool noisy = false) {
    store::RunInfo info;
    info.experiment_name = "tiny";
    info.git_sha = "abc";
    const int64_t run = db.begin_run(info);
    db.add_case(run, throughput_case(0, "norm_position=pre", kTimes));
    db.add_case(run, throughput_case(1, "norm_position=post", scaled(kTimes, slowdown), noisy));
    db.add_case(run, stability_case(2, "norm_position=pre lr=0.01", 2.1 * slowdown, false));
    db.add_case(run, stability_case(3, "norm_position=post lr=0.01", 2.2, diverge));
    db.finish_run(run, "completed");
  }

  const CompareRow* find(const CompareReport& r, const std::string& key, const std::string& metric) {
    for (const auto& row : r.rows)
      if (row.key == key && row.metric == metric) return &row;
    return nullptr;
  }

  std::string path_;
};

TEST_F(CompareRuns, TwoRunsMatchByLabel) {
  Store db(path_, Store::Mode::kReadOnly);
  CompareOptions o;
  o.a = "1";
  o.b = "2";
  const CompareReport r = compare(db, o);
  const CompareRow* same = find(r, "norm_position=pre", "median_ms");
  ASSERT_NE(same, nullptr);
  EXPECT_EQ(same->result.verdict, Verdict::kSame);
  EXPECT_EQ(same->n_a, kTimes.size());
  const CompareRow* slow = find(r, "norm_position=post", "median_ms");
  ASSERT_NE(slow, nullptr);
  EXPECT_EQ(verdict_name(slow->result.verdict, slow->timing), "slower");
  EXPECT_TRUE(slow->regression);
  EXPECT_NEAR(*slow->result.ratio, 1.3, 1e-9);
  const CompareRow* rate = find(r, "norm_position=post", "tokens_per_s");
  ASSERT_NE(rate, nullptr);
  EXPECT_NEAR(*rate->result.ratio, 1 / 1.3, 1e-9);
  EXPECT_TRUE(rate->regression);
  // Stability: one value per side, so no verdict on a changed loss (an identical one is "same");
  // the divergence is a regression.
  const CompareRow* loss = find(r, "norm_position=pre lr=0.01", "final_loss");
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->result.verdict, Verdict::kSingleRun);
  EXPECT_FALSE(loss->regression);
  EXPECT_EQ(find(r, "norm_position=pre lr=0.01", "spike_count")->result.verdict, Verdict::kSame);
  const CompareRow* status = find(r, "norm_position=post lr=0.01", "status");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(status->b_value.as_string(), "diverged");
  EXPECT_TRUE(status->regression);
  EXPECT_EQ(r.regressions, 3);

  // The other way round, nothing regresses.
  o.a = "2";
  o.b = "1";
  EXPECT_EQ(compare(db, o).regressions, 0);
}

TEST_F(CompareRuns, ANoisySideIsNeverFasterOrSlower) {
  {
    Store db(path_);
    add_run(db, 1.3, false, true);  // run 3: as run 2's times, but its post-norm case timed noisy
  }
  Store db(path_, Store::Mode::kReadOnly);
  CompareOptions o;
  o.a = "1";
  o.b = "3";
  o.metrics = {"median_ms", "tokens_per_s", "peak_mb"};
  const CompareReport r = compare(db, o);
  const CompareRow* slow = find(r, "norm_position=post", "median_ms");
  ASSERT_NE(slow, nullptr);
  // The test alone says slower (run 2 against run 1 above); a noisy side makes it "noisy".
  EXPECT_EQ(slow->result.verdict, Verdict::kNoisy);
  EXPECT_EQ(verdict_name(slow->result.verdict, slow->timing), "noisy");
  EXPECT_FALSE(slow->regression);
  EXPECT_NEAR(*slow->result.ratio, 1.3, 1e-9);  // the numbers are still shown
  EXPECT_EQ(find(r, "norm_position=post", "tokens_per_s")->result.verdict, Verdict::kNoisy);
  // Memory is not timed: its verdict stands.
  EXPECT_EQ(find(r, "norm_position=post", "peak_mb")->result.verdict, Verdict::kSame);
  // The quiet case pair is judged as before.
  EXPECT_EQ(find(r, "norm_position=pre", "median_ms")->result.verdict, Verdict::kSame);
  EXPECT_EQ(r.regressions, 0);
  EXPECT_NE(r.rule.find("noisy, never faster or slower"), std::string::npos) << r.rule;
  // Either side: noisy as the baseline too.
  o.a = "3";
  o.b = "1";
  EXPECT_EQ(find(compare(db, o), "norm_position=post", "median_ms")->result.verdict, Verdict::kNoisy);
  const std::string text = render_compare(r, Format::kTable);
  EXPECT_NE(text.find("verdicts: "), std::string::npos);
  EXPECT_NE(text.find("2 noisy"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(render_compare(r, Format::kJson));
  bool seen = false;
  for (const auto& row : j.at("throughput"))
    if (row.at("case") == "norm_position=post" && row.at("metric") == "median_ms") {
      EXPECT_EQ(row.at("verdict"), "noisy");
      EXPECT_EQ(row.at("regression"), false);
      seen = true;
    }
  EXPECT_TRUE(seen);
}

TEST_F(CompareRuns, CasesOfOneRunBySelector) {
  Store db(path_, Store::Mode::kReadOnly);
  CompareOptions o;
  o.run = 2;
  o.a = "norm_position=pre";
  o.b = "norm_position=post";
  const CompareReport r = compare(db, o);
  // Throughput pairs with throughput (rest ""), stability with stability (rest "lr=0.01").
  const CompareRow* tp = find(r, "", "median_ms");
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->result.verdict, Verdict::kWorse);
  EXPECT_NE(find(r, "lr=0.01", "status"), nullptr);
  // By ordinal.
  o.a = "#0";
  o.b = "#1";
  const CompareReport byord = compare(db, o);
  ASSERT_NE(find(byord, "", "median_ms"), nullptr);
  EXPECT_EQ(byord.rows.size(), 2u);  // median ms and tokens/s of train_step
}

TEST_F(CompareRuns, ErrorsAreOneLine) {
  Store db(path_, Store::Mode::kReadOnly);
  const auto error = [&](CompareOptions o) {
    try {
      compare(db, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CompareOptions o;
  o.a = "1";
  o.b = "x";
  EXPECT_EQ(error(o), "B: \"x\" is not a run id; to compare cases of one run, give --run ID");
  o.b = "7";
  EXPECT_NE(error(o).find("no run 7"), std::string::npos);
  o.b = "2";
  o.metrics = {"speed"};
  EXPECT_NE(error(o).find("unknown metric \"speed\""), std::string::npos);
  o = {};
  o.run = 1;
  o.a = "norm=layernorm";
  o.b = "#1";
  EXPECT_NE(error(o).find("A: \"norm=layernorm\" matches no case of run 1"), std::string::npos) << error(o);
  o.a = "#0";
  o.b = "#3";  // a throughput case against a stability case
  EXPECT_NE(error(o).find("no case of A"), std::string::npos) << error(o);
  o.b = "#x";
  EXPECT_NE(error(o).find("is not a case ordinal"), std::string::npos);
}

TEST_F(CompareRuns, Rendering) {
  Store db(path_, Store::Mode::kReadOnly);
  CompareOptions o;
  o.a = "1";
  o.b = "2";
  const CompareReport r = compare(db, o);
  const std::string table = render_compare(r, Format::kTable);
  EXPECT_EQ(table.rfind("A (baseline): run 1 (tiny, ", 0), 0u) << table;
  EXPECT_NE(table.find("rule: exact Mann-Whitney"), std::string::npos);
  EXPECT_NE(table.find("slower !"), std::string::npos) << table;
  EXPECT_NE(table.find("single run"), std::string::npos);
  EXPECT_NE(table.find("regressions (slower or worse, marked !): 3"), std::string::npos) << table;
  const auto j = nlohmann::json::parse(render_compare(r, Format::kJson));
  EXPECT_EQ(j["regressions"], 3);
  ASSERT_FALSE(j["throughput"].empty());
  EXPECT_EQ(j["throughput"][0]["metric"], "median_ms");
  EXPECT_TRUE(j["throughput"][0].contains("ci_low"));
  const std::string csv = render_compare(r, Format::kCsv);
  EXPECT_EQ(csv.rfind("case,mode,metric,a,b,ratio,ci_low,ci_high,ci_level,p,n_a,n_b,verdict,regression,", 0), 0u)
      << csv;
  EXPECT_NE(render_compare(r, Format::kMarkdown).find("### throughput"), std::string::npos);
}

}  // namespace
}  // namespace compare_test
}  // namespace bench::report
