// `bench export` with a profiled throughput case: each number of each `profile` row becomes a row
// of the long table, named so that the kernel can be split off, with NULL as an empty value.
#include "report/export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace bench::report {
namespace export_test {
namespace {

namespace fs = std::filesystem;

class ExportProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("bench_export_test_" + std::to_string(getpid()) + ".db")).string();
    remove_files();
    store::Store db(path_);
    store::RunInfo info;
    info.experiment_name = "norms";
    info.device = "cpu";
    run_ = db.begin_run(info);
    CaseRow c;
    c.runner = "throughput";
    c.label = "norm_position=pre";
    c.axes_json = R"({"model.norm_position.type":"pre"})";
    Timing t;
    t.mode = "train_step";
    t.repetitions = 1;
    t.iterations = 1;
    t.median_ms = t.mean_ms = t.min_ms = t.max_ms = 4;
    t.samples_ms = {4};
    c.result.timings.push_back(t);
    c.result.profile = {{"train_step", "", "model", "", "step", "(host)", 0, 0.25, NAN, NAN},
                        {"train_step", "blocks.0.ffn", "ffn", "swiglu", "forward", "gemm NT", 2, 1.5, 3e6, 2.5e8},
                        {"forward", "blocks.0.attn_norm", "norm", "rmsnorm", "forward", "NormForward<float, 128>", 1,
                         0.125, 65536, NAN}};
    case_ = db.add_case(run_, c);
  }
  void TearDown() override { remove_files(); }
  void remove_files() const {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path_ + suffix);
  }

  std::string path_;
  int64_t run_ = 0, case_ = 0;
};

TEST_F(ExportProfile, EachNumberOfARowIsARowOfItsOwn) {
  const store::Store db(path_, store::Store::Mode::kReadOnly);
  const std::string csv = render_export(db, run_, Format::kCsv);
  const std::string prefix =
      std::to_string(run_) + "," + std::to_string(case_) + ",0,throughput,,norm_position=pre,completed,0,pre,profile,";
  // forward first, then train_step's longest kernel first; a name with a comma is quoted.
  const std::string norm = "/blocks.0.attn_norm/norm/rmsnorm/forward/NormForward<float, 128>\"";
  const std::string want =
      prefix + "forward,,,\"calls" + norm + ",1,\r\n" + prefix + "forward,,,\"ms" + norm + ",0.125,ms\r\n";
  EXPECT_NE(csv.find(want), std::string::npos) << csv;
  EXPECT_NE(csv.find(prefix + "train_step,,,ms/blocks.0.ffn/ffn/swiglu/forward/gemm NT,1.5,ms\r\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find(prefix + "train_step,,,calls/blocks.0.ffn/ffn/swiglu/forward/gemm NT,2,\r\n"), std::string::npos)
      << csv;
  // Not declared: an empty value.
  EXPECT_NE(csv.find(prefix + "train_step,,,bytes//model//step/(host),,bytes\r\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find(prefix + "train_step,,,flops//model//step/(host),,FLOP\r\n"), std::string::npos) << csv;
  EXPECT_LT(csv.find("gemm NT,1.5,ms"), csv.find("(host),0.25,ms"));

  const auto j = nlohmann::json::parse(render_export(db, run_, Format::kJson));
  std::vector<nlohmann::json> profile;
  for (const auto& m : j["measurements"])
    if (m["kind"] == "profile") profile.push_back(m);
  ASSERT_EQ(profile.size(), 3u * 4);  // calls, ms, bytes, flops of each row
  EXPECT_EQ(profile[0]["mode"], "forward");
  EXPECT_EQ(profile[4]["name"], "calls/blocks.0.ffn/ffn/swiglu/forward/gemm NT");
  EXPECT_EQ(profile[6]["name"], "bytes/blocks.0.ffn/ffn/swiglu/forward/gemm NT");
  EXPECT_EQ(profile[6]["value"], 3e6);
  EXPECT_EQ(profile[6]["unit"], "bytes");
  EXPECT_EQ(profile[7]["value"], 2.5e8);
  EXPECT_EQ(profile[7]["unit"], "FLOP");
  EXPECT_TRUE(profile[3]["value"].is_null()) << "the norm declared no FLOPs";
}

}  // namespace
}  // namespace export_test
}  // namespace bench::report
