// The HTML report (its SVG plots, self-containment) and the long export, on a hand-made run.
#include "report/html.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "bench/error.h"
#include "report/export.h"
#include "report/svg.h"
#include "support/declared_plots.h"

namespace bench::report {
namespace html_test {
namespace {

namespace fs = std::filesystem;
using store::Store;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
  return n;
}

TEST(SvgTicks, NiceNumbers) {
  EXPECT_EQ(svg::linear_ticks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  EXPECT_EQ(svg::linear_ticks(2.05, 5.6, 5), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(svg::linear_ticks(0, 12, 5), (std::vector<double>{0, 2.5, 5, 7.5, 10}));
  EXPECT_EQ(svg::log_ticks(1, 1000), (std::vector<double>{1, 10, 100, 1000}));
  EXPECT_EQ(svg::log_ticks(1, 100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(svg::tick_text(1e-5), "1e-5");
  EXPECT_EQ(svg::tick_text(20000), "20000");
  EXPECT_EQ(svg::tick_text(2e6), "2e6");
  EXPECT_EQ(svg::tick_text(0.25), "0.25");
  EXPECT_EQ(svg::escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

TEST(SvgLineChart, GapsLogAxesMarkersAndFlags) {
  svg::LineChart c;
  c.id = "t";
  c.title = "loss <test>";
  c.x = {"step", true};
  c.y = {"loss", true};
  svg::Series s{"a<b", "#123456", "", {{1, 5}, {2, 4}, {3, std::nan("")}, {4, 3}, {5, 0}, {6, 2}}, true, {7}};
  c.series.push_back(s);
  const std::string out = svg::line_chart(c);
  EXPECT_EQ(out.rfind("<svg class=\"chart\" id=\"t\"", 0), 0u) << out;
  EXPECT_NE(out.find("loss &lt;test&gt;"), std::string::npos);
  EXPECT_NE(out.find("a&lt;b"), std::string::npos);
  // NaN and (on a log axis) 0 break the line: three pieces.
  const std::smatch m = [&] {
    std::smatch r;
    std::regex_search(out, r, std::regex("<path class=\"series\" d=\"([^\"]*)\""));
    return r;
  }();
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(count(m[1].str(), "M"), 3u) << m[1];
  EXPECT_EQ(count(out, "<circle class=\"marker\""), 4u);
  EXPECT_EQ(count(out, "<path class=\"flag\""), 1u);
  EXPECT_EQ(out.find("nan"), std::string::npos);
}

TEST(SvgLineChart, LongSeriesAreThinnedButKeepTheirSpikes) {
  svg::LineChart c;
  c.x = {"step", false};
  c.y = {"loss", false};
  svg::Series s;
  for (int i = 0; i < 100000; ++i) s.points.push_back({static_cast<double>(i), i == 50000 ? 100.0 : 1.0});
  c.series.push_back(s);
  const std::string out = svg::line_chart(c);
  // Plain search, not std::regex: libstdc++'s regex recurses per character and a path of
  // thousands of points overflows the stack under AddressSanitizer.
  const std::string open = "<path class=\"series\" d=\"";
  const size_t start = out.find(open);
  ASSERT_NE(start, std::string::npos);
  const size_t end = out.find('"', start + open.size());
  ASSERT_NE(end, std::string::npos);
  const std::string d = out.substr(start + open.size(), end - start - open.size());
  EXPECT_LT(count(d, "L"), 2000u);
  // The spike is still drawn: the highest point (smallest y) is near the top of the plot.
  double min_y = 1e9;
  const std::regex point("[ML]([0-9.]+) ([0-9.]+)");
  for (auto it = std::sregex_iterator(d.begin(), d.end(), point); it != std::sregex_iterator(); ++it)
    min_y = std::min(min_y, std::stod((*it)[2]));
  EXPECT_LT(min_y, 50.0);
}

TEST(SvgBarChart, BarsErrorBarsAndSamples) {
  svg::BarChart c;
  c.id = "b";
  c.bars = {{"x", 2, 1.9, 2.1, 1.8, 2.4, {1.8, 2, 2.4}, "2"}, {"y", 3, 2.9, 3.1, 2.8, 3.3, {2.8, 3.3}, "3"}};
  const std::string out = svg::bar_chart(c);
  EXPECT_EQ(count(out, "<rect class=\"bar\""), 2u);
  EXPECT_EQ(count(out, "<line class=\"errorbar\""), 2u);
  EXPECT_EQ(count(out, "<circle class=\"sample\""), 5u);
}

// A run like a small norms experiment: two throughput cases (two modes), and two variants at two
// learning rates, post-norm diverging at the high one.
class HtmlReport : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("bench_html_test_" + std::to_string(getpid()) + ".db")).string();
    remove_files();
    Store db(path_);
    store::RunInfo info;
    info.experiment_name = "norms";
    info.experiment_text = "name = \"norms\"\n# <b>not markup</b>\n";
    info.git_sha = "abc1234";
    info.device = "cpu";
    info.device_json = R"({"name":"Test CPU","threads":2,"peak_gflops_fp32_gemm":100.5})";
    info.plugins_json = R"([{"name":"norms","version":"0.1.0","path":"/x/libnorms.so"}])";
    run_ = db.begin_run(info);
    int64_t ordinal = 0;
    for (const char* v : {"pre", "post"}) {
      CaseRow c;
      c.ordinal = ordinal++;
      c.runner = "throughput";
      c.label = std::string("norm_position=") + v;
      c.axes_json = std::string(R"({"model.norm_position.type":")") + v + "\"}";
      for (const char* mode : {"forward", "train_step"}) {
        Timing t;
        t.mode = mode;
        t.repetitions = 3;
        t.iterations = 4;
        t.median_ms = 2, t.mean_ms = 2, t.min_ms = 1.9, t.max_ms = 2.2, t.mad_ms = 0.05;
        t.tokens_per_s = 1000, t.flops_per_iter = 1e6, t.gflops_per_s = 0.5;
        t.samples_ms = {1.9, 2, 2.2};
        t.max_noise = 0.02;
        t.noise = 0.0371;
        // post-norm's train step stopped above its noise target
        t.noisy = std::string(v) == "post" && std::string(mode) == "train_step";
        c.result.timings.push_back(t);
      }
      db.add_case(run_, c);
    }
    for (const char* v : {"pre", "post"})
      for (double lr : {0.003, 0.03}) {
        CaseRow c;
        c.ordinal = ordinal++;
        c.runner = "stability";
        c.label = fmt_label(v, lr);
        c.axes_json =
            std::string(R"({"model.norm_position.type":")") + v + "\",\"stability.lr\":" + std::to_string(lr) + "}";
        const bool diverge = std::string(v) == "post" && lr > 0.01;
        c.result.status = diverge ? "diverged" : "completed";
        for (int s = 0; s < 50; ++s) {
          StepRecord st;
          st.step = s;
          st.lr = lr;
          st.loss = diverge && s > 40 ? std::nan("") : 5.5 - 3 * s / 50.0;
          st.grad_norm = 1 + 0.1 * s;
          st.max_attn_logit = 1 + s;
          st.z_mean = 5 + 0.01 * s;
          c.result.steps.push_back(st);
        }
        c.result.metrics = {{"lr", lr, ""},
                            {"final_loss", diverge ? std::nan("") : 2.5 + lr, "nats"},
                            {"unigram_entropy", 3.4, "nats"}};
        db.add_case(run_, c);
      }
    db.finish_run(run_, "completed");
  }
  static std::string fmt_label(const char* v, double lr) {
    return std::string("norm_position=") + v + (lr < 0.01 ? " lr=0.003" : " lr=0.03");
  }
  void TearDown() override { remove_files(); }
  void remove_files() {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix);
  }
  std::string path_;
  int64_t run_ = 0;
};

TEST_F(HtmlReport, EveryPlotIsAnInlineSvgAndNothingIsFetched) {
  Store db(path_, Store::Mode::kReadOnly);
  const std::string html = render_html(db, run_);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  // 2 throughput modes + final loss vs lr + 4 curves x 2 learning rates.
  EXPECT_EQ(count(html, "<figure class=\"plot\""), 11u);
  EXPECT_EQ(count(html, "<svg class=\"chart\""), 11u);
  EXPECT_EQ(count(html, "<rect class=\"bar\""), 3u);
  // The noisy mode: a bar of its own class, the word beside its value and a line under the table.
  EXPECT_EQ(count(html, "<rect class=\"bar noisy\""), 1u);
  EXPECT_NE(html.find(">2 noisy</text>"), std::string::npos);
  EXPECT_NE(html.find("<p class=\"meta noisy\">case 1 train_step: noisy: noise 3.7 % above the target 2.0 %"),
            std::string::npos);
  EXPECT_EQ(count(html, "<td>noisy</td>"), 1u);
  // Every line chart has a drawn series.
  EXPECT_EQ(count(html, "<path class=\"series\" d=\"M"), 2u + 4 * 4);
  // The diverged case is marked on the learning-rate plot.
  EXPECT_EQ(count(html, "<path class=\"flag\""), 1u);
  EXPECT_NE(html.find("id=\"final-loss-vs-lr\""), std::string::npos);
  EXPECT_NE(html.find("id=\"loss-lr-0.003\""), std::string::npos);
  // The figure the stability runner declares for lr and final_loss is drawn (the loss curves'
  // reference lines want bigram_entropy too, which this run does not store).
  const std::set<std::string> due = test::due_declared_plots(db, run_);
  EXPECT_EQ(due, std::set<std::string>{"final-loss-vs-lr"});
  EXPECT_EQ(test::undrawn(due, html), std::vector<std::string>{});
  // Self-contained: no scripts, links, external resources or URLs.
  for (const char* bad : {"<script", "<link", "src=", "url(", "http:", "https:", "@import"})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  // Provenance, escaped.
  EXPECT_NE(html.find("# &lt;b&gt;not markup&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("Test CPU"), std::string::npos);
  EXPECT_NE(html.find("/x/libnorms.so"), std::string::npos);
  EXPECT_NE(html.find("abc1234"), std::string::npos);
  // Series are named by the swept values under a legend title of keys.
  EXPECT_NE(html.find(">norm_position</text>"), std::string::npos);
}

// Bits per byte get their plot when the stability cases' vocabularies differ, and only then.
TEST(HtmlReportBitsPerByte, APlotWhereVocabulariesDiffer) {
  const auto html_of = [](const std::vector<double>& vocabularies) {
    const std::string path =
        (fs::temp_directory_path() / ("bench_bpb_test_" + std::to_string(getpid()) + ".db")).string();
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
    std::string html;
    {
      Store db(path);
      store::RunInfo info;
      info.experiment_name = "tokenizers";
      const int64_t run = db.begin_run(info);
      int64_t ordinal = 0;
      for (double v : vocabularies) {
        CaseRow c;
        c.ordinal = ordinal++;
        c.runner = "stability";
        c.label = "vocab" + std::to_string(static_cast<int>(v));
        c.result.metrics = {{"final_loss", 3.0, "nats"},
                            {"final_val_bpb", 2.5 + 0.1 * ordinal, "bits/byte"},
                            {"val_bytes_per_token", v / 256, "bytes/token"},
                            {"vocab_size", v, "tokens"}};
        db.add_case(run, c);
      }
      db.finish_run(run, "completed");
      html = render_html(db, run);
      if (vocabularies.size() > 2) {  // then the bits-per-byte figure is due: every declared figure is drawn
        const std::set<std::string> due = test::due_declared_plots(db, run);
        EXPECT_EQ(due, std::set<std::string>{"final-val-bpb"});
        EXPECT_EQ(test::undrawn(due, html), std::vector<std::string>{});
      }
    }
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix);
    return html;
  };
  const std::string differ = html_of({256, 512, 2048});
  EXPECT_NE(differ.find("id=\"final-val-bpb\""), std::string::npos);
  EXPECT_EQ(count(differ, "<rect class=\"bar\""), 3u);
  EXPECT_NE(differ.find("vocab512 (2.00 bytes/token)"), std::string::npos);
  EXPECT_EQ(html_of({512, 512}).find("final-val-bpb"), std::string::npos);
}

TEST_F(HtmlReport, UnknownRun) {
  Store db(path_, Store::Mode::kReadOnly);
  EXPECT_THROW(render_html(db, 99), Error);
}

TEST_F(HtmlReport, ExportIsOneNumberPerRow) {
  Store db(path_, Store::Mode::kReadOnly);
  const std::string csv = render_export(db, run_, Format::kCsv);
  EXPECT_EQ(csv.rfind("run_id,case_id,ordinal,runner,variant,label,case_status,case_seed,model.norm_position.type,"
                      "stability.lr,kind,mode,step,repetition,name,value,unit\r\n",
                      0),
            0u)
      << csv.substr(0, 300);
  size_t rows = count(csv, "\r\n") - 1;
  // 2 throughput cases x 2 modes x (20 columns + 3 samples), 4 x 50 steps x 7 columns,
  // 4 x 3 metrics, and each case's wall_s (its parameter and FLOP counts were not stored: NULL).
  EXPECT_EQ(rows, 2u * 2 * (20 + 3) + 4u * 50 * 7 + 4u * 3 + 6);
  EXPECT_NE(csv.find(",post,0.03,step,,49,,loss,,nats\r\n"), std::string::npos) << "a diverged step: empty value";
  EXPECT_NE(csv.find(",sample,train_step,,2,ms,2.2,ms\r\n"), std::string::npos);

  const auto j = nlohmann::json::parse(render_export(db, run_, Format::kJson));
  EXPECT_EQ(j["run"]["id"], run_);
  ASSERT_EQ(j["cases"].size(), 6u);
  EXPECT_EQ(j["cases"][2]["axes"]["stability.lr"], 0.003);
  EXPECT_EQ(j["measurements"].size(), rows);
  EXPECT_EQ(j["measurements"][0]["kind"], "case");
  EXPECT_EQ(j["measurements"][0]["name"], "wall_s");
}

}  // namespace
}  // namespace html_test
}  // namespace bench::report
