// `bench results --profile` and the report's roofline, on a database whose profile rows are
// inserted by hand: every rate, share and bound below is worked out from those rows.
#include "report/profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "bench/error.h"
#include "report/html.h"
#include "report/svg.h"
#include "support/declared_plots.h"

namespace bench::report {
namespace profile_test {
namespace {

namespace fs = std::filesystem;
using store::Store;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
  return n;
}

constexpr double kNull = std::numeric_limits<double>::quiet_NaN();

// Two throughput cases on a device with a copy bandwidth of 20 GB/s and a GEMM rate of 200
// GFLOP/s: the ridge point is 10 FLOP/byte.
class Profile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("bench_profile_test_" + std::to_string(getpid()) + ".db")).string();
    remove_files();
    Store db(path_);
    store::RunInfo info;
    info.experiment_name = "norms";
    info.device = "cpu";
    info.device_json = R"({"name":"Test CPU","threads":2})";
    run_ = db.begin_run(info);
    for (int64_t ordinal : {0, 1}) {
      CaseRow c;
      c.ordinal = ordinal;
      c.runner = "throughput";
      c.label = ordinal == 0 ? "norm=pre" : "norm=post";
      for (const char* mode : {"forward", "train_step"}) {
        Timing t;
        t.mode = mode;
        t.repetitions = 3;
        t.median_ms = 10, t.mean_ms = 10, t.min_ms = 9, t.max_ms = 11, t.mad_ms = 0.5;
        t.samples_ms = {9, 10, 11};
        t.noisy = ordinal == 1 && std::string(mode) == "train_step";
        c.result.timings.push_back(t);
      }
      c.result.metrics = {
          {"roof_gbps", 20, "GB/s"}, {"roof_gflops", 200, "GFLOP/s"}, {"profile_step_ms/train_step", 10, "ms"}};
      case_ids_.push_back(db.add_case(run_, c));
    }
    // case, mode, scope, slot, component, pass, kernel, calls, ms, bytes, flops
    insert(db, 0, "train_step", "blocks.0.ffn", "ffn", "swiglu", "forward", "gemm NN", 3, 4.0, 4e7, 8e8);
    insert(db, 0, "train_step", "blocks.0.attn_norm", "norm", "rmsnorm", "backward", "NormBackward<float>", 1, 2.5,
           4.5e7, 5e6);
    insert(db, 0, "train_step", "", "optimizer", "", "optimizer", "AdamW", 1, 1.5, 3e7, kNull);
    insert(db, 0, "train_step", "blocks.0.attn", "attention", "mha", "forward", "attention forward (materializing)", 1,
           1.0, kNull, kNull);
    insert(db, 0, "train_step", "", "model", "", "step", "(host)", 0, 0.5, kNull, kNull);
    insert(db, 0, "train_step", "blocks.0.ffn", "ffn", "swiglu", "backward", "gemm NT", 2, 0.4, 1e6, 1e7);
    insert(db, 0, "forward", "blocks.0.ffn", "ffn", "swiglu", "forward", "gemm NN", 3, 1.0, 1e7, 1e6);
    insert(db, 1, "train_step", "blocks.0.ffn", "ffn", "swiglu", "forward", "gemm NN", 3, 5.0, 4e7, 8e8);
    insert(db, 1, "train_step", "blocks.0.attn_norm", "norm", "layernorm", "forward", "NormForward<float>", 1, 1.0, 1e7,
           1e6);
    db.finish_run(run_, "completed");
  }
  void insert(Store& db, size_t c, const char* mode, const char* scope, const char* slot, const char* component,
              const char* pass, const char* kernel, int64_t calls, double ms, double bytes, double flops) {
    const auto num = [](double v) { return std::isnan(v) ? Value() : Value::number(v); };
    db.query(
        "INSERT INTO profile(case_id, mode, scope, slot, component, pass, kernel, calls, ms, bytes, flops) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        {Value::integer(case_ids_[c]), Value::string(mode), Value::string(scope), Value::string(slot),
         Value::string(component), Value::string(pass), Value::string(kernel), Value::integer(calls), Value::number(ms),
         num(bytes), num(flops)});
  }
  void TearDown() override { remove_files(); }
  void remove_files() {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix);
  }
  std::string path_;
  int64_t run_ = 0;
  std::vector<int64_t> case_ids_;
};

TEST(ProfileFigures, RatesIntensityAndTheRidge) {
  CaseProfile p;
  p.roof_gbps = 20;
  p.roof_gflops = 200;
  ASSERT_TRUE(p.ridge());
  EXPECT_DOUBLE_EQ(*p.ridge(), 10.0);
  ProfileRow r;
  r.ms = 2.5, r.bytes = 4.5e7, r.flops = 5e6;
  KernelFigures k = kernel_figures(r, p);
  EXPECT_NEAR(*k.gbps, 18.0, 1e-12);  // 4.5e7 B / 2.5 ms
  EXPECT_NEAR(*k.gbps_percent, 90.0, 1e-10);
  EXPECT_NEAR(*k.gflops, 2.0, 1e-12);
  EXPECT_NEAR(*k.gflops_percent, 1.0, 1e-10);
  EXPECT_NEAR(*k.intensity, 5e6 / 4.5e7, 1e-15);
  EXPECT_EQ(k.bound, "memory");
  // Exactly at the ridge: compute-bound (the flat roof is the ceiling from there on).
  r.bytes = 1e6, r.flops = 1e7;
  EXPECT_EQ(kernel_figures(r, p).bound, "compute");
  r.flops = 9.999e6;
  EXPECT_EQ(kernel_figures(r, p).bound, "memory");
  // FLOPs without bytes: infinitely intense, compute-bound; nothing declared: no intensity.
  r.bytes = 0, r.flops = 1e6;
  EXPECT_EQ(kernel_figures(r, p).bound, "compute");
  r.flops = 0;
  EXPECT_FALSE(kernel_figures(r, p).intensity);
  EXPECT_EQ(kernel_figures(r, p).bound, "-");
  // Undeclared bytes: no GB/s, no intensity, no bound, but the GFLOP/s stand.
  r.bytes = kNull, r.flops = 1e7;
  k = kernel_figures(r, p);
  EXPECT_FALSE(k.gbps);
  EXPECT_FALSE(k.intensity);
  EXPECT_EQ(k.bound, "-");
  EXPECT_NEAR(*k.gflops, 4.0, 1e-12);
  // Without a ceiling the rates stand but neither the share nor the bound does.
  CaseProfile unknown;
  r.bytes = 1e6;
  k = kernel_figures(r, unknown);
  EXPECT_NEAR(*k.gbps, 0.4, 1e-12);
  EXPECT_FALSE(k.gbps_percent);
  EXPECT_EQ(k.bound, "-");
}

TEST(ProfileFigures, ComponentNames) {
  ProfileRow r;
  r.scope = "blocks.0.attn_norm", r.slot = "norm", r.component = "rmsnorm";
  EXPECT_EQ(component_name(r), "blocks.0.attn_norm rmsnorm");
  r.scope = "", r.slot = "optimizer", r.component = "";
  EXPECT_EQ(component_name(r), "optimizer");
}

TEST_F(Profile, TheSlowestKernelsAgainstTheCeilings) {
  Store db(path_, Store::Mode::kReadOnly);
  // GB/s = bytes / ms / 1e6; % of the 20 GB/s and 200 GFLOP/s roofs; the ridge is 10 FLOP/byte.
  EXPECT_EQ(render_profile(db, run_, {"train_step", 3}, Format::kTable),
            "run 1: norms (completed), profile of train_step on Test CPU\n"
            "\n"
            "case #0 norm=pre · train_step: the 3 slowest of 6 kernels\n"
            "#  component                   pass       kernel               calls   ms  % step  GB/s  % roof  GFLOP/s  "
            "% roof  FLOP/byte  bound\n"
            "-  --------------------------  ---------  -------------------  -----  ---  ------  ----  ------  -------  "
            "------  ---------  -------\n"
            "1  blocks.0.ffn swiglu         forward    gemm NN                  3    4    40.0    10    50.0      200  "
            " 100.0         20  compute\n"
            "2  blocks.0.attn_norm rmsnorm  backward   NormBackward<float>      1  2.5    25.0    18    90.0        2  "
            "   1.0     0.1111  memory\n"
            "3  optimizer                   optimizer  AdamW                    1  1.5    15.0    20   100.0        -  "
            "     -          -  -\n"
            "time by slot\n"
            "slot       rows  calls   ms  % step\n"
            "---------  ----  -----  ---  ------\n"
            "ffn           2      5  4.4    44.0\n"
            "norm          1      1  2.5    25.0\n"
            "optimizer     1      1  1.5    15.0\n"
            "attention     1      1    1    10.0\n"
            "model         1      0  0.5     5.0\n"
            "sum of the 6 rows 9.9 ms = 99.0 % of the profiled step's 10 ms; the 3 shown 8 ms (80.0 %)\n"
            "ceilings on Test CPU: copy 20 GB/s, GEMM 200 GFLOP/s, ridge 10 FLOP/byte\n"
            "\n"
            "case #1 norm=post · train_step: 2 kernels\n"
            "#  component                     pass     kernel              calls  ms  % step  GB/s  % roof  GFLOP/s  "
            "% roof  FLOP/byte  bound\n"
            "-  ----------------------------  -------  ------------------  -----  --  ------  ----  ------  -------  "
            "------  ---------  -------\n"
            "1  blocks.0.ffn swiglu           forward  gemm NN                 3   5    50.0     8    40.0      160  "
            "  80.0         20  compute\n"
            "2  blocks.0.attn_norm layernorm  forward  NormForward<float>      1   1    10.0    10    50.0        1  "
            "   0.5        0.1  memory\n"
            "time by slot\n"
            "slot  rows  calls  ms  % step\n"
            "----  ----  -----  --  ------\n"
            "ffn      1      3   5    50.0\n"
            "norm     1      1   1    10.0\n"
            "sum of the 2 rows 6 ms = 60.0 % of the profiled step's 10 ms\n"
            "ceilings on Test CPU: copy 20 GB/s, GEMM 200 GFLOP/s, ridge 10 FLOP/byte\n"
            "case 1 train_step: its timing was noisy (see the timings); the profile's steps ran right after it, on the "
            "same machine\n");
}

TEST_F(Profile, AllRowsAnotherModeAndBadModes) {
  Store db(path_, Store::Mode::kReadOnly);
  const std::string all = render_profile(db, run_, {"train_step", 0}, Format::kTable);
  EXPECT_NE(all.find("case #0 norm=pre · train_step: 6 kernels\n"), std::string::npos) << all;
  // The rows with nothing declared: "-" for every rate, and the ridge-exact GEMM is compute-bound.
  EXPECT_NE(all.find("(materializing)      1    1    10.0     -       -        -       -          -  -\n"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("gemm NT                                2  0.4     4.0   2.5    12.5       25    12.5         10  "
                     "compute\n"),
            std::string::npos)
      << all;
  const std::string forward = render_profile(db, run_, {"forward", 10}, Format::kTable);
  EXPECT_NE(forward.find("case #0 norm=pre · forward: 1 kernels\n"), std::string::npos) << forward;
  EXPECT_EQ(forward.find("norm=post"), std::string::npos) << "case 1 has no forward profile";
  // No step time stored for forward: the share is of the rows' sum.
  EXPECT_NE(forward.find("sum of the 1 rows 1 ms (the profiled step's time was not stored)"), std::string::npos)
      << forward;
  try {
    render_profile(db, run_, {"trian_step", 10}, Format::kTable);
    ADD_FAILURE() << "an unknown mode is an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no profile of mode \"trian_step\" (it has: forward, train_step)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Profile, CsvAndJsonCarryEveryNumber) {
  Store db(path_, Store::Mode::kReadOnly);
  const std::string csv = render_profile(db, run_, {"train_step", 2}, Format::kCsv);
  EXPECT_EQ(csv.rfind("ordinal,case,mode,rank,component,scope,slot,type,pass,kernel,calls,ms,step_percent,bytes,flops,"
                      "gbps,gbps_percent,gflops,gflops_percent,intensity,bound\r\n",
                      0),
            0u)
      << csv;
  EXPECT_NE(csv.find("\r\n\r\nordinal,case,mode,slot,rows,calls,ms,step_percent\r\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("1,norm=post,train_step,norm,1,1,1,10\r\n"), std::string::npos) << csv;

  const auto j = nlohmann::json::parse(render_profile(db, run_, {"train_step", 0}, Format::kJson));
  EXPECT_EQ(j["run"]["device"], "Test CPU");
  ASSERT_EQ(j["cases"].size(), 2u);
  const auto& c0 = j["cases"][0];
  EXPECT_EQ(c0["case"], "norm=pre");
  EXPECT_DOUBLE_EQ(c0["ridge"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(c0["step_ms"].get<double>(), 10.0);
  EXPECT_NEAR(c0["rows_ms"].get<double>(), 9.9, 1e-12);
  ASSERT_EQ(c0["kernels"].size(), 6u);
  EXPECT_NEAR(c0["kernels"][1]["gbps"].get<double>(), 18.0, 1e-12);
  EXPECT_NEAR(c0["kernels"][1]["intensity"].get<double>(), 1.0 / 9, 1e-15);
  EXPECT_EQ(c0["kernels"][1]["bound"], "memory");
  EXPECT_EQ(c0["kernels"][1]["type"], "rmsnorm");
  EXPECT_TRUE(c0["kernels"][3]["bytes"].is_null());
  EXPECT_TRUE(c0["kernels"][3]["bound"].is_null());
  EXPECT_EQ(j["cases"][1]["noisy"], true);
}

TEST_F(Profile, ARunWithoutAProfileSaysSo) {
  {
    Store db(path_);
    store::RunInfo info;
    info.experiment_name = "bare";
    const int64_t run = db.begin_run(info);
    CaseRow c;
    c.runner = "throughput";
    c.label = "base";
    db.add_case(run, c);
    db.finish_run(run, "completed");
  }
  Store db(path_, Store::Mode::kReadOnly);
  const std::string out = render_profile(db, run_ + 1, {}, Format::kTable);
  EXPECT_NE(out.find("no profile in this run"), std::string::npos) << out;
  EXPECT_EQ(render_html(db, run_ + 1).find("roofline"), std::string::npos);
}

TEST_F(Profile, TheReportDrawsTheRooflineAndTheTimeSplit) {
  Store db(path_, Store::Mode::kReadOnly);
  const std::string html = render_html(db, run_);
  EXPECT_EQ(count(html, "data-kind=\"roofline\""), 2u);  // forward and train_step
  EXPECT_EQ(count(html, "data-kind=\"profile-time\""), 2u);
  // roof_gbps, roof_gflops and profile_step_ms/MODE: the figures their declarations name are drawn.
  const std::set<std::string> due = test::due_declared_plots(db, run_);
  EXPECT_EQ(due, (std::set<std::string>{"profile-time", "roofline"}));
  EXPECT_EQ(test::undrawn(due, html), std::vector<std::string>{});
  // Both ceilings once per roofline.
  EXPECT_EQ(count(html, "<path class=\"ceiling bandwidth\""), 2u);
  EXPECT_EQ(count(html, "<path class=\"ceiling compute\""), 2u);
  EXPECT_NE(html.find("<title>copy bandwidth 20 GB/s</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>GEMM rate 200 GFLOP/s, ridge 10 FLOP/byte</title>"), std::string::npos);
  // A mark per kernel that declares bytes and FLOPs: train_step 3 + 2, forward 1; case 1's
  // train_step was timed noisy, so its marks and bars are pale.
  EXPECT_EQ(count(html, "<circle class=\"marker"), 6u);
  EXPECT_EQ(count(html, "<circle class=\"marker noisy\""), 2u);
  EXPECT_NE(html.find("(3 of them declare no bytes or no FLOPs and are not drawn)"), std::string::npos);
  // Segments: train_step 5 slots + 2, forward 1; the same slot in the same colour on every bar.
  EXPECT_EQ(count(html, "data-key=\""), 8u);
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(html, a, std::regex("data-key=\"norm\"[^>]* fill=\"(#[0-9a-f]+)\"")));
  const std::string rest = a.suffix();
  ASSERT_TRUE(std::regex_search(rest, b, std::regex("data-key=\"norm\"[^>]* fill=\"(#[0-9a-f]+)\"")));
  EXPECT_EQ(a[1], b[1]);

  // On the train_step roofline, memory-bound marks sit left of the ridge, compute-bound ones at or
  // right of it: the ridge is where the bandwidth slope ends.
  const size_t start = html.find("id=\"roofline-train_step\"");
  ASSERT_NE(start, std::string::npos);
  const std::string svg = html.substr(start, html.find("</svg>", start) - start);
  std::smatch slope;
  ASSERT_TRUE(
      std::regex_search(svg, slope, std::regex("class=\"ceiling bandwidth\" d=\"M[0-9.]+ [0-9.]+ L([0-9.]+) ")));
  const double ridge_x = std::stod(slope[1]);
  int memory = 0, compute = 0;
  const std::regex mark("<circle class=\"marker[^\"]*\" cx=\"([0-9.]+)\"[^>]*><title>([^<]*)</title>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), mark); it != std::sregex_iterator(); ++it) {
    const double x = std::stod((*it)[1]);
    const std::string tip = (*it)[2];
    if (tip.find("memory-bound") != std::string::npos) {
      EXPECT_LT(x, ridge_x) << tip;
      ++memory;
    } else {
      EXPECT_NE(tip.find("compute-bound"), std::string::npos) << tip;
      EXPECT_GE(x + 0.05, ridge_x) << tip;
      ++compute;
    }
  }
  EXPECT_EQ(memory, 2);
  EXPECT_EQ(compute, 3);
  EXPECT_NE(svg.find("norm=pre: blocks.0.attn_norm rmsnorm · backward · NormBackward&lt;float&gt; (norm): 2.5 ms, 18 "
                     "GB/s (90.0 % of the roof), 2 GFLOP/s (1.0 % of the roof), 0.111 FLOP/byte, memory-bound"),
            std::string::npos)
      << svg;
}

}  // namespace
}  // namespace profile_test
}  // namespace bench::report
