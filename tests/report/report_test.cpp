#include "report/report.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/error.h"
#include "report/html.h"
#include "store/store.h"
#include "support/errors.h"

namespace bench::report {
namespace report_test {
namespace {

namespace fs = std::filesystem;
using store::QueryResult;
using store::RunInfo;
using store::Store;

using test::error_of;

QueryResult small_result() {
  QueryResult r;
  r.columns = {"name", "n", "x", "note"};
  r.rows = {{Value::string("pre"), Value::integer(12), Value::number(3.14159265), Value::string("plain")},
            {Value::string("post"), Value::integer(3), Value::number(12345.678), Value()},
            {Value::string("double"), Value(), Value::number(0.000123456), Value::string("a, \"quoted\"\nline")}};
  return r;
}

TEST(ParseFormat, KnownNames) {
  EXPECT_EQ(parse_format("table"), Format::kTable);
  EXPECT_EQ(parse_format("csv"), Format::kCsv);
  EXPECT_EQ(parse_format("json"), Format::kJson);
  EXPECT_EQ(parse_format("markdown"), Format::kMarkdown);
  EXPECT_FALSE(parse_format("md").has_value());
  EXPECT_FALSE(parse_format("").has_value());
}

TEST(Render, TableAlignsAndFormats) {
  // Numbers right-aligned, strings left-aligned, floats to 4 significant digits, NULL as "-",
  // a newline inside a cell shown as a space.
  EXPECT_EQ(render(small_result(), Format::kTable),
            "name     n          x  note\n"
            "------  --  ---------  ----------------\n"
            "pre     12      3.142  plain\n"
            "post     3      12346  -\n"
            "double   -  0.0001235  a, \"quoted\" line\n");
}

TEST(Render, TableCutsLongCells) {
  QueryResult r;
  r.columns = {"text"};
  r.rows = {{Value::string(std::string(200, 'y'))}};
  const std::string out = render(r, Format::kTable);
  EXPECT_NE(out.find(std::string(77, 'y') + "...\n"), std::string::npos) << out;
  EXPECT_EQ(out.find(std::string(78, 'y')), std::string::npos);
}

TEST(Render, CsvQuotesAndKeepsFullPrecision) {
  QueryResult r = small_result();
  r.rows.push_back({Value::string("x"), Value::integer(-1), Value::number(0.1 + 0.2), Value::string("")});
  EXPECT_EQ(render(r, Format::kCsv),
            "name,n,x,note\r\n"
            "pre,12,3.14159265,plain\r\n"
            "post,3,12345.678,\r\n"
            "double,,0.000123456,\"a, \"\"quoted\"\"\nline\"\r\n"
            "x,-1,0.30000000000000004,\r\n");
  QueryResult q;
  q.columns = {"a,b", "say \"hi\""};
  EXPECT_EQ(render(q, Format::kCsv), "\"a,b\",\"say \"\"hi\"\"\"\r\n");
}

TEST(Render, JsonArrayOfObjects) {
  QueryResult r = small_result();
  r.rows.push_back({Value::string("nan"), Value::integer(0), Value::number(std::nan("")), Value()});
  const auto j = nlohmann::json::parse(render(r, Format::kJson));
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[0]["name"], "pre");
  EXPECT_EQ(j[0]["n"], 12);
  EXPECT_DOUBLE_EQ(j[0]["x"].get<double>(), 3.14159265);
  EXPECT_TRUE(j[1]["note"].is_null());
  EXPECT_TRUE(j[2]["n"].is_null());
  EXPECT_EQ(j[2]["note"], "a, \"quoted\"\nline");
  EXPECT_TRUE(j[3]["x"].is_null()) << "NaN is not JSON; it becomes null";
  EXPECT_EQ(render(QueryResult{{"a"}, {}}, Format::kJson), "[]\n");
}

TEST(Render, MarkdownPipeTable) {
  QueryResult r;
  r.columns = {"variant", "loss"};
  r.rows = {{Value::string("a|b"), Value::number(2.5)}, {Value::string("c"), Value()}};
  EXPECT_EQ(render(r, Format::kMarkdown),
            "| variant | loss |\n"
            "| ------- | ---: |\n"
            "| a\\|b    |  2.5 |\n"
            "| c       |    - |\n");
}

TEST(Render, NullRendering) {
  QueryResult r;
  r.columns = {"v"};
  r.rows = {{Value()}};
  EXPECT_EQ(render(r, Format::kTable), "v\n-\n-\n");
  EXPECT_EQ(render(r, Format::kCsv), "v\r\n\r\n");
  EXPECT_EQ(nlohmann::json::parse(render(r, Format::kJson))[0]["v"], nullptr);
  EXPECT_EQ(render(r, Format::kMarkdown), "| v   |\n| --- |\n| -   |\n");
}

TEST(Render, FromAStoreQuery) {
  Store db(":memory:");
  const auto r = db.query("SELECT 1 AS one, 2.5 AS half, 'x' AS s, NULL AS absent");
  EXPECT_EQ(render(r, Format::kCsv), "one,half,s,absent\r\n1,2.5,x,\r\n");
}

// --- the results view -------------------------------------------------------------------------

RunInfo run_info(const std::string& name) {
  RunInfo info;
  info.experiment_name = name;
  info.experiment_path = "experiments/" + name + ".toml";
  info.experiment_text = "[base]\n";
  info.git_sha = "abc1234";
  info.harness_version = "0.1.0";
  info.plugins_json = "{}";
  info.device = "cpu (test)";
  info.device_json = "{}";
  info.compiler = "GNU";
  info.build_flags = "-O3";
  info.command_line = "bench run";
  info.hostname = "host";
  info.n_cases = 4;
  return info;
}

Timing mode_row(const std::string& mode, double median_ms, std::optional<double> mfu) {
  Timing t;
  t.mode = mode;
  t.repetitions = 5;
  t.iterations = 10;
  t.median_ms = median_ms;
  t.mean_ms = t.min_ms = t.max_ms = median_ms;
  t.stddev_ms = 0.01;
  t.mad_ms = 0.0123456;
  t.tokens_per_s = 4096 / (median_ms / 1000);
  t.flops_per_iter = 1e9;
  t.gflops_per_s = 1e9 / (median_ms / 1000) / 1e9;
  t.mfu = mfu;
  t.peak_bytes = 3 * 1048576;
  t.samples_ms = {median_ms, median_ms};
  t.noise = 0.004;
  t.max_noise = 0.02;
  return t;
}

CaseRow stability_case(int64_t ordinal, const std::string& label, double lr, double final_loss,
                       std::optional<double> diverged_step) {
  CaseRow c;
  c.ordinal = ordinal;
  c.runner = "stability";
  c.label = label;
  c.variant = label;
  c.result.status = diverged_step ? "diverged" : "completed";
  c.result.metrics = {{"lr", lr, ""},
                      {"final_loss", final_loss, "nats"},
                      {"best_loss", 3.0, "nats"},
                      {"unigram_entropy", 4.5, "nats"},
                      {"spike_count", 2, "count"},
                      {"max_attn_logit", 12.5, ""},
                      {"final_grad_norm", 0.75, ""}};
  if (diverged_step) c.result.metrics.push_back({"diverged_step", *diverged_step, "step"});
  return c;
}

class ResultsView : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("bench_report_test_" + std::to_string(getpid()) + ".db")).string();
    remove_files();
    Store db(path_);
    // An older run, which the view must not pick by default.
    const int64_t old_run = db.begin_run(run_info("old"));
    db.add_case(old_run, stability_case(0, "old-case", 1e-3, 9.0, std::nullopt));
    db.finish_run(old_run, "completed");

    const int64_t run = db.begin_run(run_info("norms"));
    CaseRow tp;
    tp.ordinal = 0;
    tp.runner = "throughput";
    tp.label = "pre/rmsnorm";
    tp.variant = "pre_rmsnorm";
    // Inserted out of order: the view orders forward, forward_backward, train_step.
    tp.result.timings = {mode_row("train_step", 8.0, std::nullopt), mode_row("forward", 2.0, 0.25),
                         mode_row("forward_backward", 6.0, 0.3)};
    // The train step stopped above its noise target, with another process on its cores.
    Timing& noisy = tp.result.timings[0];
    noisy.noise = 0.0351;
    noisy.noisy = true;
    noisy.load_avg = 2.5;
    noisy.steal = 0.001;
    noisy.other_busy = 0.62;
    noisy.cores = 2;
    db.add_case(run, tp);
    db.add_case(run, stability_case(1, "post/layernorm lr=3e-4", 3e-4, 3.21, std::nullopt));
    CaseRow failed;
    failed.ordinal = 2;
    failed.runner = "throughput";
    failed.label = "double/layernorm";
    failed.variant = "double_layernorm";
    failed.result.status = "failed";
    failed.result.error = "out of memory";
    db.add_case(run, failed);
    db.add_case(run, stability_case(3, "post/layernorm lr=1e-2", 1e-2, std::nan(""), 417.0));
    db.finish_run(run, "completed");
  }
  void TearDown() override { remove_files(); }
  void remove_files() {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix);
  }

  std::string path_;
};

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> lines;
  for (size_t pos = 0, next; (next = s.find('\n', pos)) != std::string::npos; pos = next + 1)
    lines.push_back(s.substr(pos, next - pos));
  return lines;
}

TEST_F(ResultsView, TablePicksTheLatestRunAndShowsBothTables) {
  Store db(path_, Store::Mode::kReadOnly);
  const std::string out = render_results(db, 0, Format::kTable);
  const auto lines = lines_of(out);
  ASSERT_GE(lines.size(), 18u) << out;
  EXPECT_EQ(lines[0], "run 2: norms (completed), started " +
                          db.query("SELECT started_at FROM runs WHERE id = 2").rows[0][0].as_string() +
                          " on cpu (test), git abc1234");
  EXPECT_EQ(lines[1].rfind("bench ", 0), 0u) << lines[1];  // no device facts in this test database
  EXPECT_EQ(out.find("old-case"), std::string::npos) << out;

  EXPECT_EQ(lines[3], "throughput");
  EXPECT_EQ(
      lines[4],
      "#  case              mode              median ms  ± MAD ms  noise %  tokens/s  GFLOP/s  MFU %  peak MB  noisy  "
      "status");
  EXPECT_EQ(
      lines[6],
      "0  pre/rmsnorm       forward                   2   0.01235      0.4   2048000      500   25.0      3.0         "
      "completed");
  EXPECT_EQ(
      lines[7],
      "0  pre/rmsnorm       forward_backward          6   0.01235      0.4    682667    166.7   30.0      3.0         "
      "completed");
  EXPECT_EQ(
      lines[8],
      "0  pre/rmsnorm       train_step                8   0.01235      3.5    512000      125      -      3.0  noisy  "
      "completed");
  EXPECT_EQ(
      lines[9],
      "2  double/layernorm  -                         -         -        -         -        -      -        -  -      "
      "failed");
  EXPECT_EQ(lines[10], "case 2 failed: out of memory");
  // The noisy mode, explained.
  EXPECT_EQ(lines[11],
            "case 0 train_step: noisy: noise 3.5 % above the target 2.0 % after 2 repetitions; load average 2.50, "
            "other processes kept 62.0 % of its 2 cores busy, steal 0.1 %");

  EXPECT_EQ(lines[13], "stability");
  EXPECT_NE(lines[14].find("case"), std::string::npos);
  for (const char* header : {"lr", "final loss (nats)", "best loss (nats)", "unigram H (nats)", "spikes",
                             "diverged at step", "max logit", "grad norm", "status"})
    EXPECT_NE(lines[14].find(header), std::string::npos) << header;
  EXPECT_EQ(lines[16],
            "1  post/layernorm lr=3e-4  0.0003             3.2100            3.0000            4.5000       2  "
            "               -       12.5       0.75  completed");
  EXPECT_EQ(lines[17],
            "3  post/layernorm lr=1e-2    0.01                  -            3.0000            4.5000       2  "
            "             417       12.5       0.75  diverged");
}

TEST_F(ResultsView, ExplicitRunId) {
  Store db(path_, Store::Mode::kReadOnly);
  const std::string out = render_results(db, 1, Format::kTable);
  EXPECT_EQ(out.rfind("run 1: old (completed)", 0), 0u) << out;
  EXPECT_NE(out.find("old-case"), std::string::npos);
  EXPECT_EQ(out.find("\nthroughput\n"), std::string::npos) << "no throughput cases, no throughput table";
  EXPECT_NE(out.find("\nstability\n"), std::string::npos);
  EXPECT_NE(error_of([&] { render_results(db, 7, Format::kTable); }).find("no run 7 in " + path_), std::string::npos);
}

TEST_F(ResultsView, Json) {
  Store db(path_, Store::Mode::kReadOnly);
  const auto j = nlohmann::json::parse(render_results(db, 0, Format::kJson));
  EXPECT_EQ(j["run"]["id"], 2);
  EXPECT_EQ(j["run"]["experiment_name"], "norms");
  EXPECT_EQ(j["run"]["git_sha"], "abc1234");
  ASSERT_EQ(j["throughput"].size(), 4u);
  EXPECT_EQ(j["throughput"][0]["mode"], "forward");
  EXPECT_EQ(j["throughput"][1]["mode"], "forward_backward");
  EXPECT_DOUBLE_EQ(j["throughput"][0]["median_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["throughput"][0]["mfu_percent"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(j["throughput"][0]["peak_mb"].get<double>(), 3.0);
  EXPECT_TRUE(j["throughput"][2]["mfu_percent"].is_null());
  EXPECT_EQ(j["throughput"][0]["noisy"], false);
  EXPECT_EQ(j["throughput"][2]["noisy"], true);
  EXPECT_DOUBLE_EQ(j["throughput"][2]["noise_percent"].get<double>(), 3.51);
  EXPECT_TRUE(j["throughput"][3]["noisy"].is_null());  // a failed case: no timing
  ASSERT_EQ(j["notes"]["throughput"].size(), 1U);
  EXPECT_EQ(j["notes"]["throughput"][0].get<std::string>().rfind("case 0 train_step: noisy: noise 3.5 %", 0), 0U);
  EXPECT_EQ(j["throughput"][3]["status"], "failed");
  EXPECT_EQ(j["throughput"][3]["error"], "out of memory");
  ASSERT_EQ(j["stability"].size(), 2u);
  EXPECT_EQ(j["stability"][0]["case"], "post/layernorm lr=3e-4");
  EXPECT_DOUBLE_EQ(j["stability"][0]["final_loss"].get<double>(), 3.21);
  EXPECT_TRUE(j["stability"][0]["diverged_step"].is_null());
  EXPECT_TRUE(j["stability"][1]["final_loss"].is_null());
  EXPECT_DOUBLE_EQ(j["stability"][1]["diverged_step"].get<double>(), 417);
  EXPECT_EQ(j["stability"][1]["ordinal"], 3);
}

TEST_F(ResultsView, CsvAndMarkdown) {
  Store db(path_, Store::Mode::kReadOnly);
  const std::string csv = render_results(db, 0, Format::kCsv);
  EXPECT_EQ(
      csv.rfind("ordinal,case,mode,median_ms,mad_ms,noise_percent,tokens_per_s,gflops_per_s,mfu_percent,peak_mb,noisy,"
                "status,error\r\n"
                "0,pre/rmsnorm,forward,2,0.0123456,0.4,2048000,500,25,3,false,completed,\r\n",
                0),
      0u)
      << csv;
  EXPECT_NE(csv.find("0,pre/rmsnorm,train_step,8,0.0123456,3.51,512000,125,,3,true,completed,\r\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find("2,double/layernorm,,,,,,,,,,failed,out of memory\r\n\r\nordinal,case,lr,final_loss,"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("3,post/layernorm lr=1e-2,0.01,,3,4.5,2,417,12.5,0.75,diverged,\r\n"), std::string::npos) << csv;

  const std::string md = render_results(db, 0, Format::kMarkdown);
  EXPECT_EQ(md.rfind("### throughput\n\n|   # | case ", 0), 0u) << md;
  EXPECT_NE(md.find("\n- case 2 failed: out of memory\n"), std::string::npos) << md;
  EXPECT_NE(md.find("\n### stability\n\n|   # | case "), std::string::npos) << md;
  EXPECT_EQ(md.find("run 2"), std::string::npos) << "no header line outside the table format";
}

TEST_F(ResultsView, SelectRunByIdExperimentOrLatest) {
  Store db(path_, Store::Mode::kReadOnly);
  EXPECT_EQ(select_run(db, 0, ""), 2);
  EXPECT_EQ(select_run(db, 1, ""), 1);
  EXPECT_EQ(select_run(db, 0, "old"), 1);
  EXPECT_EQ(select_run(db, 0, "norms"), 2);
  EXPECT_EQ(error_of([&] { select_run(db, 0, "nope"); }), "no run of experiment \"nope\" in " + path_);
  EXPECT_EQ(error_of([&] { select_run(db, 9, ""); }), "no run 9 in " + path_);
}

TEST(ResultsViewEmpty, NoRunsIsAnError) {
  Store db(":memory:");
  EXPECT_EQ(error_of([&] { render_results(db, 0, Format::kTable); }), "no runs in :memory: (run `bench run` first)");
  const int64_t run = db.begin_run(run_info("empty"));
  const std::string out = render_results(db, run, Format::kTable);
  EXPECT_NE(out.find("(running)"), std::string::npos) << out;
  EXPECT_NE(out.find("no cases in this run"), std::string::npos) << out;
  const auto j = nlohmann::json::parse(render_results(db, run, Format::kJson));
  EXPECT_TRUE(j["throughput"].empty());
  EXPECT_TRUE(j["stability"].empty());
}

// Seed replicates (labels equal but for seed=): the final loss's spread per configuration, and the
// verdict of bench compare's rule against the lowest median. Five seeds a side: all of "post"
// above all of "pre" gives the exact two-sided Mann-Whitney p = 2 / C(10, 5).
TEST(ResultsSeeds, SpreadAndVerdictAgainstTheBest) {
  Store db(":memory:");
  const int64_t run = db.begin_run(run_info("seeds"));
  const std::map<std::string, std::vector<double>> losses = {{"pre", {3.00, 3.01, 3.02, 2.99, 3.005}},
                                                             {"post", {3.30, 3.31, 3.29, 3.32, 3.305}},
                                                             {"double", {3.006, 3.012, 2.999, 3.018, 3.008}}};
  int64_t ordinal = 0;
  for (const char* variant : {"pre", "post", "double"})
    for (size_t i = 0; i < 5; ++i) {
      CaseRow c = stability_case(ordinal++, fmt::format("{} seed={}", variant, i + 1), 3e-3, losses.at(variant)[i],
                                 std::nullopt);
      c.variant = variant;
      db.add_case(run, c);
    }
  db.finish_run(run, "completed");
  const auto j = nlohmann::json::parse(render_results(db, run, Format::kJson));
  const auto& t = j["stability across seeds"];
  ASSERT_EQ(t.size(), 3u) << j.dump(1);
  EXPECT_EQ(t[0]["case"], "pre");
  EXPECT_EQ(t[0]["ordinal"], 0);
  EXPECT_EQ(t[0]["seeds"], 5);
  EXPECT_DOUBLE_EQ(t[0]["final_loss_median"].get<double>(), 3.005);
  EXPECT_DOUBLE_EQ(t[0]["final_loss_min"].get<double>(), 2.99);
  EXPECT_DOUBLE_EQ(t[0]["final_loss_max"].get<double>(), 3.02);
  EXPECT_NEAR(t[0]["final_loss_spread"].get<double>(), 0.03, 1e-12);
  EXPECT_EQ(t[0]["verdict"], "best");
  EXPECT_TRUE(t[0]["p"].is_null());
  EXPECT_EQ(t[1]["case"], "post");
  EXPECT_EQ(t[1]["ordinal"], 5);
  EXPECT_DOUBLE_EQ(t[1]["vs_best"].get<double>(), 3.305 / 3.005);
  EXPECT_NEAR(t[1]["p"].get<double>(), 2.0 / 252.0, 1e-12);
  EXPECT_EQ(t[1]["verdict"], "worse");
  EXPECT_EQ(t[2]["case"], "double");
  EXPECT_DOUBLE_EQ(t[2]["final_loss_median"].get<double>(), 3.008);
  EXPECT_EQ(t[2]["verdict"], "same");  // every pairwise ratio lies within 1 +- 2 %
  EXPECT_EQ(t[2]["status"], "completed");

  const std::string text = render_results(db, run, Format::kTable);
  EXPECT_NE(text.find("\nstability across seeds\n"), std::string::npos) << text;
  EXPECT_NE(text.find("against the lowest median (pre)"), std::string::npos) << text;
  EXPECT_EQ(text.find("one seed per configuration"), std::string::npos) << text;
  const std::string html = render_html(db, run);
  EXPECT_NE(html.find("<h3>Across seeds</h3>"), std::string::npos);
}

// One seed per configuration: no table, and the view and the report say that one seed cannot tell.
TEST(ResultsSeeds, OneSeedCannotTell) {
  Store db(":memory:");
  const int64_t run = db.begin_run(run_info("one seed"));
  db.add_case(run, stability_case(0, "pre", 3e-3, 3.0, std::nullopt));
  db.add_case(run, stability_case(1, "post", 3e-3, 3.3, std::nullopt));
  db.finish_run(run, "completed");
  const auto j = nlohmann::json::parse(render_results(db, run, Format::kJson));
  EXPECT_FALSE(j.contains("stability across seeds"));
  ASSERT_EQ(j["notes"]["stability across seeds"].size(), 1u) << j.dump(1);
  EXPECT_NE(j["notes"]["stability across seeds"][0].get<std::string>().find("cannot be told from seed noise"),
            std::string::npos);
  const std::string text = render_results(db, run, Format::kTable);
  EXPECT_NE(text.find("\nstability: one seed per configuration, so a difference in final loss cannot be told"),
            std::string::npos)
      << text;
  const std::string md = render_results(db, run, Format::kMarkdown);
  EXPECT_NE(md.find("### stability across seeds\n\nstability: one seed per configuration"), std::string::npos) << md;
  EXPECT_EQ(render_results(db, run, Format::kCsv).find("one seed"), std::string::npos);
  const std::string html = render_html(db, run);
  EXPECT_NE(html.find("one seed per configuration"), std::string::npos);
}

}  // namespace
}  // namespace report_test
}  // namespace bench::report
