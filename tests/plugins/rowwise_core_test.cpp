// plugins/example/rowwise_core.cpp, an attention core from a plugin of its own (built in tree
// unchanged, tests/CMakeLists.txt), and the core registry of bench/attention_core.h that lets it
// in: the core against the float64 references of kernels/attention.h, found by the causal
// attention's `core` key from an experiment (a model, `bench validate`, `bench run`, `bench list
// cores`), refused where it cannot run, and named among the cores when the key names none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/attention_core.h"
#include "model/model.h"
#include "support/shell.h"
#include "support/toml_case.h"
#include "support/train_step.h"

namespace bench {
namespace rowwise_core_test {
namespace {

const std::string kPluginDir = BENCH_BINARY_DIR "/test_plugins/rowwise_core";

/// The built-in plugins and the rowwise core's.
Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    reg->load_defaults();
    reg->load_directory(kPluginDir, true);
    return reg;
  }();
  return *r;
}

std::vector<double> random_vector(size_t n, unsigned seed, double scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = dist(gen);
  return v;
}

/// `v` in the storage type T, and back as double (what the core sees, exactly).
template <class T>
std::vector<T> stored(std::vector<double>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = scalar_as<T>(v[i]);
    v[i] = scalar_value(out[i]);
  }
  return out;
}

template <class T>
void expect_close(const std::vector<T>& got, const std::vector<double>& want, double atol, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(scalar_value(got[i]) - want[i]);
    worst = std::max(worst, err / (atol + rtol * std::abs(want[i])));
    ASSERT_LE(err, atol + rtol * std::abs(want[i])) << what << " [" << i << "]";
  }
  ::testing::Test::RecordProperty(what + "_worst_fraction_of_tolerance", ::testing::PrintToString(worst));
}

/// The core's forward, row max, entropy and backward on random qkv and dout against the float64
/// references, in T. The rowwise core keeps nothing (its setup is empty), so it runs unset-up.
template <class T>
void check_against_reference(const kernels::AttentionArgs& a, double atol, double rtol) {
  const AttentionCoreInfo* info = find_attention_core("rowwise");
  ASSERT_NE(info, nullptr);
  const std::unique_ptr<AttentionCore> core = info->make();
  using A = tile::acc_t<T>;
  const DType dtype = std::is_same_v<T, double> ? DType::kFloat64 : DType::kFloat32;
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * a.d_head, rows = a.batch * a.seq;
  std::vector<double> qkv = random_vector(static_cast<size_t>(rows * width), 11, 1.0);
  std::vector<double> dout = random_vector(static_cast<size_t>(rows * a.n_heads * a.d_head), 12, 1.0);
  std::vector<T> x = stored<T>(qkv), dy = stored<T>(dout);
  std::vector<T> out(dout.size()), dx(qkv.size());
  std::vector<A> row_max(static_cast<size_t>(a.batch * a.n_heads * a.seq)), scratch(row_max.size());
  Tensor tx(x.data(), dtype, {rows, width}), tout(out.data(), dtype, {rows, a.n_heads * a.d_head});
  Tensor tdy(dy.data(), dtype, {rows, a.n_heads * a.d_head}), tdx(dx.data(), dtype, {rows, width});
  Tensor tscratch(scratch.data(), std::is_same_v<A, double> ? DType::kFloat64 : DType::kFloat32,
                  {static_cast<int64_t>(scratch.size())});
  RunContext ctx;
  core->forward(ctx, a, tx, tout, row_max.data());
  core->backward(ctx, a, tx, tout, tdy, tdx);
  std::vector<double> want_out, want_max, want_dx, want_entropy;
  kernels::attention_forward_reference(a, qkv, want_out, &want_max);
  kernels::attention_backward_reference(a, qkv, dout, want_dx);
  expect_close(out, want_out, atol, rtol, "out");
  expect_close(row_max, want_max, atol, rtol, "row_max");
  expect_close(dx, want_dx, atol, rtol, "dqkv");
  // The default entropy probe (bench_api's AttentionCore::entropy_sum) recomputes from qkv.
  kernels::attention_entropy_reference(a, qkv, want_entropy);
  double want_sum = 0;
  for (double e : want_entropy) want_sum += e;
  EXPECT_NEAR(core->entropy_sum(ctx, a, tx, tscratch), want_sum, 1e-5 * want_sum);
}

struct Variant {
  std::string name;
  kernels::AttentionArgs args;
};

std::vector<Variant> variants() {
  // B, T, H, Hkv, dh, scale, softcap, window, causal (then the dropout rate and seed)
  std::vector<Variant> v = {
      {"mha", {2, 9, 4, 4, 8, 0.35, 0, 0, true}},       {"gqa", {2, 9, 4, 2, 8, 0.35, 0, 0, true}},
      {"mqa", {1, 7, 3, 1, 4, 0.5, 0, 0, true}},        {"window", {2, 9, 4, 2, 8, 0.35, 0, 3, true}},
      {"softcap", {2, 9, 4, 2, 8, 0.9, 1.5, 0, true}},  {"non_causal", {2, 6, 2, 1, 4, 0.5, 0, 0, false}},
      {"dropout", {2, 9, 4, 2, 8, 0.35, 2.0, 4, true}},
  };
  v.back().args.dropout = 0.3;
  v.back().args.dropout_seed = 1234;
  return v;
}

TEST(RowwiseCore, MatchesTheFloat64References) {
  (void)registry();  // the plugin loaded, its core published
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    check_against_reference<double>(v.args, 1e-13, 1e-12);
    // float: the inputs are the float values the reference reads; the core rounds each output once.
    check_against_reference<float>(v.args, 1e-6, 1e-6);
  }
}

/// A tiny model whose attention is `attention` (an inline table), on the CPU in `dtype`.
std::string tiny(const std::string& attention, const std::string& dtype = "float64") {
  return "[model]\nd_model = 32\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nseq_len = 12\nbatch_size = 3\n"
         "dtype = \"" +
         dtype + "\"\nattention = " + attention +
         "\n[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n";
}

ResolvedCase resolve(const std::string& toml, const std::string& device = "cpu") {
  const ExperimentFile f = read_experiment(test::write_temp("rowwise_core.toml", toml), runner_sections());
  return resolve_case(expand_cases(f, registry(), device).at(0), registry(), runner_sections());
}

/// Loss and grad norm of one training step.
std::pair<double, double> step(Model& m, const ResolvedCase& rc) {
  return test::loss_and_grad_norm(m, test::batch_of(rc, 1));
}

// `core = "rowwise"` in an experiment builds a model whose train step is the materializing
// core's (the same weights: a core declares none), to float64 rounding, with every probe.
TEST(RowwiseCore, TheCoreKeyOfAnExperimentFindsItInAModel) {
  const std::string variant = "{ type = \"causal\", window = 7, softcap = 3.0, core = \"";
  const ResolvedCase rowwise = resolve(tiny(variant + "rowwise\" }")),
                     materializing = resolve(tiny(variant + "materializing\" }"));
  Model a(rowwise.model, registry(), 5), b(materializing.model, registry(), 5);
  const auto got = step(a, rowwise), want = step(b, materializing);
  EXPECT_NEAR(got.first, want.first, 1e-12 * want.first);
  EXPECT_NEAR(got.second, want.second, 1e-10 * want.second);
  EXPECT_GT(got.first, 1.0);  // a real loss (ln 256 at init, about)
}

// Where it cannot run (a device), an explicit core = "rowwise" is an error at the key naming the
// attention and the reason; an unknown core's message lists the plugin's core with the rest.
TEST(RowwiseCore, RefusedOnADeviceAndListedWhenTheKeyNamesNoCore) {
  ResolvedCase rc = resolve(tiny("{ type = \"causal\", core = \"rowwise\" }"));
  rc.model.backend = tile::Backend::kEmulated;
  try {
    Model m(rc.model, registry(), 1);
    ADD_FAILURE() << "built on the emulated device";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rowwise_core.toml:9:"), std::string::npos) << what;
    EXPECT_NE(what.find("core = \"rowwise\": the attention at blocks.0.attn: the rowwise core "
                        "(plugins/example/rowwise_core.cpp) runs on the CPU only"),
              std::string::npos)
        << what;
  }
  try {
    const ResolvedCase unknown = resolve(tiny("{ type = \"causal\", core = \"rowwize\" }"));
    Model m(unknown.model, registry(), 1);
    ADD_FAILURE() << "a model with an unknown core built";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rowwise_core.toml:9:"), std::string::npos) << what;
    EXPECT_NE(what.find("core = \"rowwize\" is not an attention core: the cores are auto, "), std::string::npos)
        << what;
    EXPECT_NE(what.find(", rowwise"), std::string::npos) << what;
  }
}

// The command line: an experiment names the plugin's directory in plugin_paths; `bench list cores`
// shows the core, its doc and its file; `bench validate` accepts the key and names the file,
// line and key of an unknown core; `bench run` trains with it, and its losses are the
// materializing core's to float rounding.
TEST(RowwiseCore, FromTheCommandLine) {
  const std::string head = "name = \"rowwise-cli\"\nplugin_paths = [\"" + kPluginDir + "\"]\n";
  const std::string body =
      "[model]\nd_model = 32\nn_layers = 2\nn_heads = 2\nseq_len = 16\nbatch_size = 4\n"
      "attention = { type = \"causal\", core = CORE }\n[data]\nreference_tokens = 4096\n"
      "[stability]\nsteps = 8\nlr = 1e-2\neval_batches = 1\n";
  const auto with = [&](const std::string& core) {
    std::string b = body;
    b.replace(b.find("CORE"), 4, core);
    return test::write_temp("rowwise_cli.toml", head + b);
  };
  const test::Output list = test::bench_cli("list cores --experiment " + with("\"rowwise\""));
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("rowwise        exact softmax attention one query row at a time"), std::string::npos)
      << list.out;
  EXPECT_NE(list.out.find("test_plugins/rowwise_core/libbench_rowwise_core_example.so"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("materializing  "), std::string::npos) << list.out;

  const test::Output ok = test::bench_cli("validate " + with("\"rowwise\""));
  EXPECT_EQ(ok.code, 0) << ok.err;
  const std::string bad_file = with("\"nope\"");
  const test::Output bad = test::bench_cli("validate " + bad_file);
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_NE(bad.err.find(bad_file + ":9:"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("core = \"nope\" is not an attention core: the cores are auto, "), std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("rowwise"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;

  const std::string db = test::write_temp("rowwise.db", "");
  std::filesystem::remove(db);
  const std::string two = with("\"auto\"") + ".two.toml";
  std::ofstream(two) << test::read_file(with("\"auto\"")) << "[[variant]]\nname = \"materializing\"\n"
                     << "model.attention = { type = \"causal\", core = \"materializing\" }\n[[variant]]\n"
                     << "name = \"rowwise\"\nmodel.attention = { type = \"causal\", core = \"rowwise\" }\n";
  const test::Output run = test::bench_cli("-q --db " + db + " run " + two, "OMP_WAIT_POLICY=PASSIVE");
  ASSERT_EQ(run.code, 0) << run.err;
  const test::Output q = test::bench_cli(
      "--db " + db +
      " query \"SELECT c.variant, s.loss FROM steps s JOIN cases c ON c.id = s.case_id ORDER BY s.step, c.variant\" "
      "--format csv");
  ASSERT_EQ(q.code, 0) << q.err;
  std::map<std::string, std::vector<double>> losses;
  std::istringstream lines(q.out);
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    const size_t comma = line.rfind(',');
    losses[line.substr(0, comma)].push_back(std::stod(line.substr(comma + 1)));
  }
  const std::vector<double>& m = losses["materializing"];
  const std::vector<double>& r = losses["rowwise"];
  ASSERT_EQ(m.size(), 8u) << q.out;
  ASSERT_EQ(r.size(), m.size()) << q.out;
  for (size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(r[i], m[i], 1e-4 * m[i]) << "step " << i;
}

}  // namespace
}  // namespace rowwise_core_test
}  // namespace bench
