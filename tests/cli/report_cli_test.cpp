// End to end: bench results --experiment, compare, report (rendered by headless Chromium when it is
// installed), export and calc, on a small experiment with a learning-rate grid.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "store/store.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace report_cli_test {
namespace {

namespace fs = std::filesystem;

using test::Output;
using test::shell;

Output bench(const std::string& args) { return test::bench_cli(args); }

std::string read(const std::string& path) { return test::read_file(path); }

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
  return n;
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

const char* kGrid =
    "name = \"grid\"\nseed = 5\n"
    "[model]\nd_model = 32\nn_layers = 2\nn_heads = 2\nseq_len = 16\nbatch_size = 4\n"
    "norm_position = [\"pre\", \"post\"]\n"
    "[data]\ntype = \"synthetic\"\nreference_tokens = 4096\n"
    "[throughput]\nmodes = [\"forward\", \"train_step\"]\nrepetitions = 4\nmin_time = 0.01\nwarmup_time = "
    "0.0\nmax_time = 0\n"
    "[stability]\nsteps = 40\nlr = [1e-2, 5e-2]\neval_batches = 2\n";

/// One run of kGrid shared by the tests of this file.
class ReportCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    experiment_ = test::write_temp("grid.toml", kGrid);
    db_ = test::write_temp("grid.db", "");
    fs::remove(db_);
    const Output r = bench("-q --db " + db_ + " run " + experiment_);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  static std::string experiment_, db_;
};
std::string ReportCli::experiment_, ReportCli::db_;

TEST_F(ReportCli, ResultsOfTheLatestRunOfAnExperiment) {
  const Output r = bench("--db " + db_ + " results --experiment grid");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("run 1: grid (completed)", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("#  case"), std::string::npos) << r.out;
  const Output bad = bench("--db " + db_ + " results --experiment nope");
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(one_line(bad.err)) << bad.err;
  EXPECT_EQ(bench("--db " + db_ + " results --run 1 --experiment grid").code, 2) << "--run excludes --experiment";
}

TEST_F(ReportCli, CompareCasesOfOneRunAndTwoRuns) {
  const Output r = bench("--db " + db_ + " compare --run 1 norm_position=pre norm_position=post");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("median ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("final loss (nats)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lr=0.05"), std::string::npos) << r.out;
  // A run against itself: p = 1 everywhere, so nothing is faster or slower ("same" when the
  // repetitions are tight enough to rule out a 2 % change, "unclear" when they are not, "noisy"
  // exactly where the stored mode stopped above its noise target: on a busy machine, tiny timings
  // with max_time = 0 often do).
  const Output self = bench("--db " + db_ + " compare 1 1 --fail-if-regression --format json");
  ASSERT_EQ(self.code, 0) << self.err;
  const auto j = nlohmann::json::parse(self.out);
  EXPECT_EQ(j["regressions"], 0);
  ASSERT_EQ(j["throughput"].size(), 8u);  // 2 cases x 2 modes x (median ms, tokens/s)
  store::Store s(db_, store::Store::Mode::kReadOnly);
  for (const auto& row : j["throughput"]) {
    EXPECT_DOUBLE_EQ(row["ratio"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(row["p"].get<double>(), 1.0);
    const bool noisy =
        s.query(
             "SELECT max(t.noisy) FROM throughput t JOIN cases c ON c.id = t.case_id WHERE c.run_id = 1 AND "
             "c.label = ?1 AND t.mode = ?2",
             {Value::string(row["case"].get<std::string>()), Value::string(row["mode"].get<std::string>())})
            .rows.at(0)
            .at(0)
            .as_int() == 1;
    if (noisy) {
      EXPECT_EQ(row["verdict"], "noisy") << row.dump();
    } else {
      EXPECT_TRUE(row["verdict"] == "same" || row["verdict"] == "unclear") << row.dump();
    }
  }
  // Bad input: one line on stderr, exit 2.
  for (const char* args :
       {" compare 1 x", " compare 1 9", " compare --run 1 '#0' '#99'", " compare 1 1 --metric nope"}) {
    const Output bad = bench("--db " + db_ + args);
    EXPECT_EQ(bad.code, 2) << args;
    EXPECT_TRUE(one_line(bad.err)) << args << ": " << bad.err;
    EXPECT_TRUE(bad.out.empty()) << args;
  }
}

TEST(CompareCli, FailIfRegressionExitsOne) {
  const std::string db = test::write_temp("regress.db", "");
  fs::remove(db);
  {
    store::Store s(db);
    for (double factor : {1.0, 1.25}) {
      store::RunInfo info;
      info.experiment_name = "speed";
      const int64_t run = s.begin_run(info);
      CaseRow c;
      c.runner = "throughput";
      c.label = "base";
      Timing t;
      t.mode = "train_step";
      t.samples_ms = {10 * factor, 10.1 * factor, 9.9 * factor, 10.05 * factor, 9.95 * factor};
      t.repetitions = 5;
      t.median_ms = 10 * factor;
      t.tokens_per_s = 1000 / factor;
      c.result.timings = {t};
      s.add_case(run, c);
      s.finish_run(run, "completed");
    }
  }
  const Output slower = bench("--db " + db + " compare 1 2 --fail-if-regression");
  EXPECT_EQ(slower.code, 1) << slower.out << slower.err;
  EXPECT_NE(slower.out.find("slower !"), std::string::npos) << slower.out;
  EXPECT_EQ(bench("--db " + db + " compare 1 2").code, 0);
  EXPECT_EQ(bench("--db " + db + " compare 2 1 --fail-if-regression").code, 0);
}

/// The first command of `names` that exists on PATH, or "".
std::string find_program(std::initializer_list<const char*> names) {
  for (const char* n : names) {
    const Output r = shell(std::string("command -v ") + n);
    if (r.code == 0 && !r.out.empty()) return r.out.substr(0, r.out.find('\n'));
  }
  return "";
}

// Measures every plot as the browser lays it out: the <svg> box and, inside it, the drawn marks
// (series paths, bars, markers) with a non-empty bounding box.
const char* kCheckScript = R"js(<script>
(function () {
  var out = [];
  document.querySelectorAll('figure.plot').forEach(function (fig) {
    var svg = fig.querySelector('svg.chart');
    var box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    var marks = 0;
    if (svg) svg.querySelectorAll('path.series, rect.bar, circle.marker').forEach(function (el) {
      var b = el.getBBox();
      if (b.width > 0 || b.height > 0) marks++;
    });
    out.push({id: svg ? svg.id : '', w: box.width, h: box.height, marks: marks});
  });
  var pre = document.createElement('pre');
  pre.id = 'bench-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>)js";

std::string chromium_flags() {
  const std::string profile = test::write_temp("chromium-profile/.keep", "");
  return " --headless --disable-gpu --no-sandbox --hide-scrollbars --user-data-dir=" +
         fs::path(profile).parent_path().string() + " ";
}

/// Every plot of `page` as Chromium lays it out (kCheckScript's list), checked: each <svg> box
/// over 100 pixels each way with a drawn mark. Returns the list's size.
size_t check_plots_in_chromium(const std::string& chromium, const std::string& page, const std::string& name) {
  std::string checked = page;
  checked.insert(checked.rfind("</body>"), kCheckScript);
  const std::string check_file = test::write_temp(name + "_check.html", checked);
  const Output dom = shell("timeout 120 " + chromium + chromium_flags() + "--dump-dom file://" + check_file);
  EXPECT_EQ(dom.code, 0) << dom.err;
  std::smatch m;
  if (!std::regex_search(dom.out, m, std::regex("<pre id=\"bench-check\">([^<]*)</pre>"))) {
    ADD_FAILURE() << dom.out.substr(0, 500);
    return 0;
  }
  const auto figures = nlohmann::json::parse(m[1].str());
  for (const auto& f : figures) {
    EXPECT_GT(f["w"].get<double>(), 100) << f.dump();
    EXPECT_GT(f["h"].get<double>(), 100) << f.dump();
    EXPECT_GT(f["marks"].get<int>(), 0) << f.dump();
  }
  return figures.size();
}

TEST_F(ReportCli, ReportRendersEveryPlotInChromium) {
  const std::string html = test::write_temp("grid_report.html", "");
  const Output r = bench("--db " + db_ + " report 1 -o " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string page = read(html);
  // 2 throughput modes, final loss vs lr, 4 curves x 2 learning rates, and the named series
  // param_norm, attn_entropy and logit_mean x 2 learning rates (no val_every: no val_loss); and
  // where the throughput cases stored a profile, a time split per profiled mode and a roofline
  // for each whose kernels declare their traffic.
  store::Store s(db_, store::Store::Mode::kReadOnly);
  const auto profiled =
      static_cast<size_t>(s.query("SELECT count(DISTINCT mode) FROM profile").rows.at(0).at(0).as_int());
  EXPECT_EQ(count(page, "data-kind=\"profile-time\""), profiled);
  EXPECT_LE(count(page, "data-kind=\"roofline\""), profiled);
  const size_t plots = count(page, "<figure class=\"plot\"");
  EXPECT_EQ(plots, 17u + count(page, "data-kind=\"profile-time\"") + count(page, "data-kind=\"roofline\""));
  EXPECT_EQ(count(page, "data-kind=\"attn_entropy\""), 2u);
  EXPECT_EQ(count(page, "data-kind=\"val_loss\""), 0u);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http"), std::string::npos);
  EXPECT_EQ(bench("--db " + db_ + " report 7").code, 2);

  const std::string chromium = find_program({"chromium", "chromium-browser", "google-chrome"});
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  EXPECT_EQ(check_plots_in_chromium(chromium, page, "grid_report"), plots);

  // A screenshot, as a person would see the page.
  const std::string png = fs::path(html).replace_extension(".png").string();
  fs::remove(png);
  const Output shot = shell("timeout 120 " + chromium + chromium_flags() + "--screenshot=" + png +
                            " --window-size=1400,3000 file://" + html);
  ASSERT_EQ(shot.code, 0) << shot.err;
  const std::string image = read(png);
  ASSERT_GT(image.size(), 20000u);
  EXPECT_EQ(image.substr(1, 3), "PNG");
}

// `bench results --profile` and the report's profile plots, on a database whose profile rows are
// inserted by hand (docs/results.md, "The profile"): one case on a 20 GB/s, 200 GFLOP/s device.
TEST(ProfileCli, OptionsOutputsAndPlots) {
  const std::string db = test::write_temp("profile_cli.db", "");
  fs::remove(db);
  {
    store::Store s(db);
    store::RunInfo info;
    info.experiment_name = "profiled";
    info.device_json = R"({"name":"Test CPU"})";
    const int64_t run = s.begin_run(info);
    CaseRow c;
    c.runner = "throughput";
    c.label = "norm=pre";
    c.result.metrics = {
        {"roof_gbps", 20, "GB/s"}, {"roof_gflops", 200, "GFLOP/s"}, {"profile_step_ms/train_step", 3, "ms"}};
    for (const char* mode : {"forward", "train_step"}) {
      Timing t;
      t.mode = mode;
      t.repetitions = 2;
      t.median_ms = 3, t.mean_ms = 3, t.min_ms = 2.9, t.max_ms = 3.1;
      t.samples_ms = {2.9, 3.1};
      c.result.timings.push_back(t);
    }
    const int64_t id = s.add_case(run, c);
    const auto row = [&](const char* mode, const char* slot, const char* kernel, double ms, double bytes,
                         double flops) {
      s.query("INSERT INTO profile VALUES (?1, ?2, 'blocks.0.' || ?3, ?3, 'x', 'forward', ?4, 1, ?5, ?6, ?7)",
              {Value::integer(id), Value::string(mode), Value::string(slot), Value::string(kernel), Value::number(ms),
               Value::number(bytes), Value::number(flops)});
    };
    row("train_step", "ffn", "gemm NN", 2, 1e7, 3e8);
    row("train_step", "norm", "NormForward<float>", 1, 1e7, 1e6);
    row("forward", "ffn", "gemm NN", 1, 1e7, 1.5e8);
    s.finish_run(run, "completed");
  }
  const Output top = bench("--db " + db + " results --profile --top 1");
  ASSERT_EQ(top.code, 0) << top.err;
  EXPECT_NE(top.out.find("case #0 norm=pre · train_step: the 1 slowest of 2 kernels\n"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("the 1 shown 2 ms (66.7 %)"), std::string::npos) << top.out;
  EXPECT_NE(bench("--db " + db + " results --profile --all").out.find("train_step: 2 kernels\n"), std::string::npos);
  EXPECT_NE(bench("--db " + db + " results --profile --mode forward").out.find("· forward: 1 kernels\n"),
            std::string::npos);
  const Output json = bench("--db " + db + " results --profile --format json");
  ASSERT_EQ(json.code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_DOUBLE_EQ(j["cases"][0]["kernels"][0]["gbps"].get<double>(), 5.0);  // 1e7 bytes in 2 ms
  EXPECT_DOUBLE_EQ(j["cases"][0]["kernels"][0]["gflops"].get<double>(), 150.0);
  EXPECT_EQ(j["cases"][0]["kernels"][0]["bound"], "compute");  // 30 FLOP/byte, the ridge at 10
  EXPECT_EQ(j["cases"][0]["kernels"][1]["bound"], "memory");
  // Bad input: one line on stderr, exit 2.
  for (const char* args : {" results --profile --mode trian_step", " results --top 3",
                           " results --profile --all --top 2", " results --profile --top 0"}) {
    const Output bad = bench("--db " + db + args);
    EXPECT_EQ(bad.code, 2) << args;
    EXPECT_TRUE(bad.out.empty()) << args;
  }
  EXPECT_TRUE(one_line(bench("--db " + db + " results --profile --mode trian_step").err));

  const std::string html = test::write_temp("profile_report.html", "");
  ASSERT_EQ(bench("-q --db " + db + " report -o " + html).code, 0);
  const std::string page = read(html);
  EXPECT_EQ(count(page, "data-kind=\"roofline\""), 2u);
  EXPECT_EQ(count(page, "data-kind=\"profile-time\""), 2u);
  const std::string chromium = find_program({"chromium", "chromium-browser", "google-chrome"});
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  EXPECT_EQ(check_plots_in_chromium(chromium, page, "profile_report"), count(page, "<figure class=\"plot\""));
}

TEST_F(ReportCli, ExportHasEveryStoredNumber) {
  const std::string csv_file = test::write_temp("grid_export.csv", "");
  ASSERT_EQ(bench("-q --db " + db_ + " export 1 --format csv -o " + csv_file).code, 0);
  const std::string csv = read(csv_file);
  EXPECT_EQ(csv.rfind("run_id,case_id,ordinal,runner,variant,label,case_status,case_seed,model.norm_position.type,"
                      "stability.lr,kind,mode,step,repetition,name,value,unit\r\n",
                      0),
            0u)
      << csv.substr(0, 300);
  store::Store s(db_, store::Store::Mode::kReadOnly);
  const auto n = [&](const std::string& sql) { return s.query(sql).rows.at(0).at(0).as_int(); };
  const int64_t expected =
      n("SELECT count(*) FROM throughput") * 20 + n("SELECT count(*) FROM samples") +
      n("SELECT count(*) FROM profile") * 4 + n("SELECT count(*) FROM steps") * 7 + n("SELECT count(*) FROM series") +
      n("SELECT count(*) FROM metrics") +
      n("SELECT count(n_params) + count(n_params_embedding) + count(flops_per_token) + count(wall_s) FROM cases");
  EXPECT_EQ(static_cast<int64_t>(count(csv, "\r\n")) - 1, expected);
  const Output json = bench("--db " + db_ + " export --experiment grid --format json");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_GT(n("SELECT count(*) FROM series"), 0);
  EXPECT_NE(csv.find(",series,,0,,grad_rms/1,"), std::string::npos);
  EXPECT_GT(n("SELECT count(*) FROM profile"), 0) << "the throughput cases are profiled by default";
  // The optimizer's kernel: its name (a tile program's, with a comma) makes the field quoted.
  EXPECT_NE(csv.find(",profile,train_step,,,\"ms/optimizer/optimizer/adamw/optimizer/"), std::string::npos);
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(static_cast<int64_t>(j["measurements"].size()), expected);
  EXPECT_EQ(j["run"]["experiment_name"], "grid");
  EXPECT_EQ(bench("--db " + db_ + " export 1 --format markdown").code, 2);
}

TEST_F(ReportCli, TheExampleQueriesOfTheDocsStillRun) {
  const std::string doc = read(std::string(BENCH_SOURCE_DIR) + "/docs/results.md");
  const std::regex block("```sql\n([^`]*)```");
  int queries = 0;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), block); it != std::sregex_iterator(); ++it) {
    std::string sql = (*it)[1];
    for (char& c : sql)
      if (c == '\n') c = ' ';
    std::string quoted;  // for the shell: 'sql' with every ' as '\''
    for (char c : sql) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    const Output r = bench("--db " + db_ + " query '" + quoted + "'");
    EXPECT_EQ(r.code, 0) << sql << "\n" << r.err;
    ++queries;
  }
  EXPECT_GE(queries, 3);
}

TEST_F(ReportCli, CalcCountsWhatTheRunBuilt) {
  const Output r = bench("calc " + experiment_ + " --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto models = nlohmann::json::parse(r.out);
  ASSERT_EQ(models.size(), 2u);  // pre and post; the learning rates build the same models
  store::Store s(db_, store::Store::Mode::kReadOnly);
  for (const auto& m : models) {
    const auto stored = s.query("SELECT DISTINCT n_params FROM cases WHERE label LIKE ?1",
                                {Value::string(m["model"].get<std::string>() + "%")});
    ASSERT_EQ(stored.rows.size(), 1u) << m.dump();
    EXPECT_EQ(m["params"].get<int64_t>(), stored.rows[0][0].as_int()) << m.dump();
  }
}

TEST(CalcCli, RealModelsAndErrors) {
  const Output r = bench("calc --model 'Llama 2 70B' --format json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["params"], 68976648192);
  EXPECT_EQ(j[0]["kv_bytes_per_token"], 327680.0);
  EXPECT_EQ(j[0]["kv_bytes_per_token_mha"], 2621440.0);
  const Output all = bench("calc --all --format csv");
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(count(all.out, "\r\n"), 11u);
  const Output table = bench("calc --all --context 8192 --batch 4");
  ASSERT_EQ(table.code, 0);
  EXPECT_NE(table.out.find("Gemma 2 9B"), std::string::npos);
  for (const char* args : {"calc", "calc --model 'Llama 9'", "calc --all --model 'Llama 2 7B'",
                           "calc /nonexistent.toml", "calc --all --kv-dtype fp4"}) {
    const Output bad = bench(args);
    EXPECT_EQ(bad.code, 2) << args;
    EXPECT_FALSE(bad.err.empty()) << args;
  }
  EXPECT_TRUE(one_line(bench("calc --model 'Llama 9'").err));
}

// `bench calc FILE` allocates nothing, so any size is counted: a 1M-token context (whose plan
// once failed to reserve 2^48 bytes of address space for one tensor) and Llama 3.1 405B at batch
// 64 from a file with only a model, as `bench eval --config` accepts one.
TEST(CalcCli, AnySizeAndFilesWithOnlyAModel) {
  const std::string huge = test::write_temp("huge_context.toml", "[model]\nseq_len = 1048576\n[throughput]\n");
  const Output h = bench("calc " + huge + " --format json");
  ASSERT_EQ(h.code, 0) << h.err;
  EXPECT_EQ(nlohmann::json::parse(h.out)[0]["seq_len"], 1048576);
  const Output big =
      bench("calc " + std::string(BENCH_SOURCE_DIR) + "/tests/accounting/models/llama3_1_405b.toml --format json");
  ASSERT_EQ(big.code, 0) << big.err;
  const auto j = nlohmann::json::parse(big.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["params"], 405853388800);
  EXPECT_EQ(j[0]["batch"], 64);
  // Without a runner section `bench validate` still refuses the file (nothing to run), and its
  // mistakes in one pass; calc reports the first of them.
  const std::string bad = test::write_temp("model_only_bad.toml", "[model]\nd_modle = 32\nwindow = 4\n");
  const Output c = bench("calc " + bad);
  EXPECT_EQ(c.code, 2);
  EXPECT_EQ(c.err, bad +
                       ":2:1: unknown key 'd_modle' in [model] (did you mean 'd_model'?) (and 1 more; bench validate "
                       "lists them)\n");
  const Output v = bench("validate " + bad);
  EXPECT_EQ(v.code, 2);
  EXPECT_EQ(v.err, bad + ":2:1: unknown key 'd_modle' in [model] (did you mean 'd_model'?)\n" + bad +
                       ":3:1: unknown key 'window' in [model] (did you mean 'attention.window'?)\n" + bad +
                       ": nothing to run: add a [throughput], a [stability] or a [diagnostics] section\n");
}

}  // namespace
}  // namespace report_cli_test
}  // namespace bench
