// The sinks: what StoreSink writes is what ResultsSink holds — `bench run` prints its table from
// memory, and it must be the table `bench results` reads back, in every format, for NaN and
// infinite metrics, missing MFU, unordered modes, failed cases and figures added across cases —
// a resumed case is replaced, and JSON lines carry every result.
#include "runners/sinks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report/report.h"
#include "runners/registry.h"
#include "support/toml_case.h"

namespace bench {
namespace sinks_test {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const char* const kToml =
    "[model]\nd_model = 16\nn_heads = 2\nn_layers = 1\nseq_len = 8\nbatch_size = 2\nnorm = [\"rmsnorm\", "
    "\"layernorm\"]\n[throughput]\n[stability]\nlr = [0.01, 0.1]\n[diagnostics]\n";

class Sinks : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ =
        (std::filesystem::temp_directory_path() / ("bench_sinks_test_" + std::to_string(getpid()) + ".db")).string();
    cases_ = test::cases_of(kToml);
    for (const Case& c : cases_) resolved_.push_back(test::resolve(c));
    for (size_t i = 0; i < cases_.size(); ++i)
      jobs_.push_back(Job{i, &cases_[i], &resolved_[i], &runner_of(cases_[i]), "[" + std::to_string(i) + "]"});
  }
  void TearDown() override {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix);
  }

  /// A run as `bench run` begins it, and its header as the results view shows it.
  std::pair<int64_t, store::RunData> begin(store::Store& db) const {
    store::RunInfo info;
    info.experiment_name = "sinks";
    info.experiment_path = "sinks.toml";
    info.experiment_text = kToml;
    info.git_sha = "abc";
    info.harness_version = "0.1.0";
    info.plugins_json = "[]";
    info.device = "cpu";
    info.device_json = DeviceInfo{}.json();
    info.compiler = "GNU";
    info.build_flags = "-O3";
    info.command_line = "bench run sinks.toml";
    info.hostname = "here";
    info.n_cases = static_cast<int64_t>(cases_.size());
    info.started_at = store::now_utc();
    store::RunData r;
    r.id = db.begin_run(info);
    r.n_cases = info.n_cases;
    r.experiment_name = info.experiment_name;
    r.status = "running";
    r.started_at = info.started_at;
    r.device = info.device;
    r.device_json = info.device_json;
    r.git_sha = info.git_sha;
    r.harness_version = info.harness_version;
    r.compiler = info.compiler;
    return {r.id, r};
  }

  /// A result of each kind: timings out of order with and without MFU, NaN and infinite metrics,
  /// a failure with a message on two lines, a diagnostics case.
  CaseResult result(size_t i) const {
    CaseResult r;
    r.started_at = r.finished_at = store::now_utc();
    r.wall_s = 0.5 + static_cast<double>(i);
    r.n_params = 1000 + static_cast<int64_t>(i);
    const std::string& runner = cases_[i].runner;
    if (runner == "throughput") {
      for (const char* mode : {"train_step", "forward", "forward_backward"}) {
        Timing t;
        t.mode = mode;
        t.repetitions = 2, t.iterations = 3;
        t.median_ms = 1.25 * static_cast<double>(i + 1), t.mean_ms = 1.3, t.min_ms = 1.0, t.max_ms = 2.0;
        t.stddev_ms = 0.1, t.mad_ms = 0.05, t.tokens_per_s = 12345.678, t.flops_per_iter = 1e9, t.gflops_per_s = 0.8;
        if (i == 0) t.mfu = 0.0123;
        if (i == 1 && t.mode == "forward") t.mfu = kNan;
        if (i == 0) t.peak_bytes = 3 << 20;
        t.samples_ms = {1.0, 1.5};
        r.timings.push_back(t);
      }
      r.metrics.push_back({"initial_loss", 5.5, "nats"});
      // Out of order, one without declared traffic, one with infinite FLOPs (both stored as NULL).
      r.profile = {{"train_step", "blocks.0.ffn", "ffn", "gelu", "forward", "gemm NN", 2, 0.5, 4096, kInf},
                   {"forward", "", "model", "", "step", "(host)", 0, 0.25 * static_cast<double>(i + 1), kNan, kNan},
                   {"train_step", "blocks.0.attn_norm", "norm", "rmsnorm", "backward", "NormBackward<float>", 1, 0.75,
                    1024, 512}};
    } else if (runner == "stability") {
      r.metrics = {{"lr", resolved_[i].runner.number("lr"), ""},
                   {"initial_loss", 5.5, "nats"},
                   {"final_loss", i % 2 ? kInf : 3.25, "nats"},
                   {"final_val_loss", i % 2 ? kNan : 3.0, "nats"},
                   {"best_loss", 2.0 + 1e-9 * static_cast<double>(i), "nats"},
                   {"spike_count", 2, "steps"},
                   {"max_attn_logit", kNan, ""}};
      r.steps = {{0, 1e-3, 5.5, 1.0, 2.0, 5.0, 0.0, 10.0}, {1, 1e-3, kNan, kInf, 2.0, 5.0, 0.0, 10.0}};
      if (i % 2) {
        r.status = "diverged";
        r.error = "non-finite loss or gradient at step 1";
      }
    } else if (i + 1 == cases_.size()) {
      r = CaseResult{};
      r.status = "failed";
      r.error = "plugin x: forward threw:\nline two";
    } else {
      r.metrics = {
          {"init_loss", 5.52, "nats"}, {"init_grad_norm_first", 0.5, ""}, {"init_growth_exponent", -0.01, "1/layer"}};
    }
    return r;
  }

  std::string path_;
  std::vector<Case> cases_;
  std::vector<ResolvedCase> resolved_;
  std::vector<Job> jobs_;
};

TEST_F(Sinks, TheRunsTableFromMemoryIsTheTableReadBackInEveryFormat) {
  store::Store db(path_);
  auto [run_id, header] = begin(db);
  StoreSink store_sink(db, run_id, {});
  ResultsSink results(header);
  std::ostringstream lines;
  JsonLinesSink jsonl(lines);
  const std::vector<ResultSink*> sinks = {&store_sink, &results, &jsonl};
  for (size_t i = cases_.size(); i-- > 0;) {  // out of order, as --jobs ends them
    for (ResultSink* s : sinks) s->started(jobs_[i]);
    for (ResultSink* s : sinks) s->finished(jobs_[i], result(i));
  }
  // Figures across cases: a new metric, and one that replaces a stored one (it moves to the end).
  for (size_t i = 0; i < cases_.size(); ++i)
    if (cases_[i].runner == "stability")
      for (ResultSink* s : sinks) s->added(jobs_[i], {{"lr_sensitivity", 0.25, "nats"}, {"spike_count", 3, "steps"}});
  store::RunData& run = results.run();
  run.status = "failed";
  run.error = "1 case(s) failed";
  run.finished_at = db.finish_run(run_id, run.status, run.error);

  const store::RunData stored = store::load_run(db, run_id);
  for (const auto f : {report::Format::kTable, report::Format::kCsv, report::Format::kJson, report::Format::kMarkdown})
    EXPECT_EQ(report::render_results(run, f), report::render_results(stored, f)) << static_cast<int>(f);
  const std::string table = report::render_results(run, report::Format::kTable);
  EXPECT_NE(table.find("\ndiagnostics\n"), std::string::npos) << table;
  EXPECT_NE(table.find("plugin x: forward threw: line two"), std::string::npos) << table;
  // Every case once, as JSON lines, then the figures added.
  std::istringstream in(lines.str());
  std::string line;
  size_t results_seen = 0, added_seen = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("result")) {
      ++results_seen;
      EXPECT_EQ(j["label"], cases_.at(j["ordinal"].get<size_t>()).label);
    } else {
      ++added_seen;
      EXPECT_EQ(j["added"][0]["name"], "lr_sensitivity");
    }
  }
  EXPECT_EQ(results_seen, cases_.size());
  EXPECT_EQ(added_seen, 4u);
}

TEST_F(Sinks, TheProfileFromMemoryIsTheProfileReadBack) {
  store::Store db(path_);
  auto [run_id, header] = begin(db);
  StoreSink store_sink(db, run_id, {});
  ResultsSink results(header);
  size_t profiled = 0;
  for (size_t i = 0; i < cases_.size(); ++i) {
    if (cases_[i].runner != "throughput") continue;
    ++profiled;
    store_sink.finished(jobs_[i], result(i));
    results.finished(jobs_[i], result(i));
  }
  ASSERT_GT(profiled, 0u);
  const store::RunData stored = store::load_run(db, run_id);
  ASSERT_EQ(stored.cases.size(), profiled);
  ASSERT_EQ(results.run().cases.size(), profiled);
  const auto same = [](double x, double y) { return std::isnan(x) ? std::isnan(y) : x == y; };
  for (size_t k = 0; k < profiled; ++k) {
    const auto& mem = results.run().cases[k].result.profile;
    const auto& back = stored.cases[k].result.profile;
    ASSERT_EQ(mem.size(), 3u);
    ASSERT_EQ(back.size(), 3u);
    // forward first, then the longest first; NaN where the store has NULL.
    EXPECT_EQ(back[0].kernel, "(host)");
    EXPECT_EQ(back[0].ms, 0.25 * static_cast<double>(stored.cases[k].ordinal + 1));
    EXPECT_TRUE(std::isnan(back[0].bytes) && std::isnan(back[0].flops));
    EXPECT_EQ(back[1].kernel, "NormBackward<float>");
    EXPECT_EQ(back[1].bytes, 1024);
    EXPECT_EQ(back[1].flops, 512);
    EXPECT_EQ(back[2].kernel, "gemm NN");
    EXPECT_EQ(back[2].calls, 2);
    EXPECT_EQ(back[2].bytes, 4096);
    EXPECT_TRUE(std::isnan(back[2].flops)) << "an infinite count is stored as NULL";
    for (size_t j = 0; j < back.size(); ++j) {
      EXPECT_EQ(mem[j].mode, back[j].mode) << j;
      EXPECT_EQ(mem[j].scope, back[j].scope) << j;
      EXPECT_EQ(mem[j].slot, back[j].slot) << j;
      EXPECT_EQ(mem[j].component, back[j].component) << j;
      EXPECT_EQ(mem[j].pass, back[j].pass) << j;
      EXPECT_EQ(mem[j].kernel, back[j].kernel) << j;
      EXPECT_EQ(mem[j].calls, back[j].calls) << j;
      EXPECT_EQ(mem[j].ms, back[j].ms) << j;
      EXPECT_TRUE(same(mem[j].bytes, back[j].bytes)) << j << ": " << mem[j].bytes << " != " << back[j].bytes;
      EXPECT_TRUE(same(mem[j].flops, back[j].flops)) << j << ": " << mem[j].flops << " != " << back[j].flops;
    }
  }
}

TEST_F(Sinks, AResumedCaseIsReplacedWhenItStartsAgain) {
  store::Store db(path_);
  auto [run_id, header] = begin(db);
  CaseResult failed;
  failed.status = "failed";
  failed.error = "the first time";
  {
    StoreSink first(db, run_id, {});
    first.finished(jobs_[1], failed);
  }
  store::RunData before = store::load_run(db, run_id);
  ASSERT_EQ(before.cases.size(), 1u);
  std::map<int64_t, int64_t> ids = {{before.cases[0].ordinal, before.cases[0].id}};
  StoreSink again(db, run_id, ids);
  ResultsSink results(before);
  again.started(jobs_[1]);
  EXPECT_TRUE(store::load_run(db, run_id).cases.empty()) << "the stale row goes when the case starts again";
  const CaseResult now = result(1);
  again.finished(jobs_[1], now);
  results.finished(jobs_[1], now);
  const store::RunData after = store::load_run(db, run_id);
  ASSERT_EQ(after.cases.size(), 1u);
  EXPECT_EQ(after.cases[0].result.status, "completed");
  EXPECT_EQ(report::render_results(after, report::Format::kCsv),
            report::render_results(results.run(), report::Format::kCsv));
}

}  // namespace
}  // namespace sinks_test
}  // namespace bench
