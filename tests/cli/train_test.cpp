// Training from given weights, end to end: a [stability] case that starts from a Hugging Face
// checkpoint (`init_weights`) and reads its tokens in order (`sampling = "sequential"`) takes,
// in float64, the steps that a NumPy float64 implementation of the documented model, batches,
// schedule and AdamW takes (tests/cli/train_reference.py): same losses, gradient norms, held-out
// loss and final weights.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/safetensors.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace train_test {
namespace {

const std::string kBench = std::string(BENCH_BINARY_DIR) + "/bin/bench";
// Debian's python3 with python3-numpy (scripts/setup.sh), not whatever python3 is first on PATH.
const std::string kPython = "/usr/bin/python3";
const std::string kScript = std::string(BENCH_SOURCE_DIR) + "/tests/cli/train_reference.py";

/// stdout and stderr of a command, together.
test::Output shell(const std::string& cmd) {
  test::Output r = test::shell(cmd);
  r.out += r.err;
  return r;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = std::filesystem::path(test::write_temp(name + ".keep", "")).parent_path() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// The lines of a `bench query ... --format csv` answer, header dropped, quotes removed.
std::vector<std::string> query(const std::string& db, const std::string& sql) {
  const test::Output q = shell(kBench + " --db " + db + " query \"" + sql + "\" --format csv");
  EXPECT_EQ(q.code, 0) << q.out;
  std::vector<std::string> lines;
  std::istringstream in(q.out);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::erase(line, '"');
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

TEST(TrainFromWeights, TwentyFloat64StepsMatchNumPy) {
  const std::string dir = fresh_dir("train_from_weights");
  const test::Output py = shell(kPython + " " + kScript + " " + dir + " --check-gradient");
  ASSERT_EQ(py.code, 0) << "the reference needs Debian's python3-numpy (scripts/setup.sh): " << py.out;
  const nlohmann::json ref = nlohmann::json::parse(std::ifstream(dir + "/reference.json"));
  const std::string db = dir + "/r.db";
  const test::Output run = shell(kBench + " -q --db " + db + " run " + dir + "/train.toml");
  ASSERT_EQ(run.code, 0) << run.out;

  // Per step: loss and gradient norm (before clipping), printed with 17 digits.
  const auto steps = query(db, "SELECT printf('%.17g,%.17g', loss, grad_norm) FROM steps ORDER BY step");
  ASSERT_EQ(steps.size(), ref["loss"].size());
  double worst_loss = 0, worst_norm = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t comma = steps[i].find(',');
    const double loss = std::stod(steps[i].substr(0, comma)), norm = std::stod(steps[i].substr(comma + 1));
    worst_loss = std::max(worst_loss, std::fabs(loss - ref["loss"][i].get<double>()));
    worst_norm = std::max(worst_norm, std::fabs(norm - ref["grad_norm"][i].get<double>()));
  }
  const double first = ref["loss"][0].get<double>(), last = ref["loss"][steps.size() - 1].get<double>();
  EXPECT_LT(last, first - 0.5) << "the reference should learn something, or the check proves little";
  EXPECT_LE(worst_loss, 1e-10);
  EXPECT_LE(worst_norm, 1e-10);
  const auto val = query(db, "SELECT printf('%.17g', value) FROM metrics WHERE name = 'final_val_loss'");
  ASSERT_EQ(val.size(), 1u);
  const double worst_val = std::fabs(std::stod(val[0]) - ref["final_val_loss"].get<double>());
  EXPECT_LE(worst_val, 1e-10);

  // The final weights, tensor by tensor under their Hugging Face names.
  const safetensors::File ours = safetensors::read(dir + "/weights/run-1/case-0.safetensors");
  const safetensors::File want = safetensors::read(dir + "/final.safetensors");
  const safetensors::File init = safetensors::read(dir + "/weights.safetensors");
  ASSERT_EQ(ours.tensors.size(), want.tensors.size());
  double worst_weight = 0, moved = 0;
  for (const safetensors::TensorInfo& t : want.tensors) {
    const safetensors::TensorInfo* o = ours.find(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    ASSERT_EQ(o->shape, t.shape) << t.name;
    const std::vector<double> a = ours.values(*o), b = want.values(t), start = init.values(*init.find(t.name));
    for (size_t i = 0; i < a.size(); ++i) {
      worst_weight = std::max(worst_weight, std::fabs(a[i] - b[i]));
      moved = std::max(moved, std::fabs(b[i] - start[i]));
    }
  }
  EXPECT_LE(worst_weight, 1e-10);
  EXPECT_GT(moved, 1e-2) << "the weights should move from where they started";
  std::printf(
      "20 float64 AdamW steps against NumPy: max |diff| loss %.1e, grad norm %.1e, val loss %.1e, "
      "weights %.1e (largest move %.2f)\n",
      worst_loss, worst_norm, worst_val, worst_weight, moved);
}

TEST(TrainFromWeights, MismatchedWeightsFailTheCaseNamingEachTensor) {
  const std::string dir = fresh_dir("train_from_wrong_weights");
  const test::Output py = shell(kPython + " " + kScript + " " + dir);
  ASSERT_EQ(py.code, 0) << py.out;
  // The same checkpoint against a model whose FFN is 48 wide instead of 64.
  std::string toml;
  {
    std::ifstream in(dir + "/train.toml");
    toml.assign(std::istreambuf_iterator<char>(in), {});
  }
  toml.replace(toml.find("d_ff = 64"), 9, "d_ff = 48");
  std::ofstream(dir + "/wrong.toml") << toml;
  const test::Output run = shell(kBench + " -q --db " + dir + "/r.db run " + dir + "/wrong.toml");
  EXPECT_NE(run.code, 0);
  EXPECT_NE(run.out.find("model.layers.0.mlp.gate_proj.weight: shape [64, 32] in the file, the model needs [48, 32]"),
            std::string::npos)
      << run.out;

  std::ofstream(dir + "/missing.toml") << std::string(toml).replace(toml.find("\"weights.safetensors\""), 21,
                                                                    "\"nowhere.safetensors\"");
  const test::Output missing = shell(kBench + " validate " + dir + "/missing.toml");
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.out.find("missing.toml:"), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("init_weights: no such file or folder"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace train_test
}  // namespace bench
