// Experiment files: sweeps, variants, device overrides, and errors that point at file:line:col.
#include <gtest/gtest.h>

#include "experiment/diagnostics.h"
#include "experiment/resolve.h"
#include "support/errors.h"
#include "support/toml_case.h"

namespace bench {
namespace experiment_test {
namespace {

/// The error an experiment's cases give when resolved and validated, from its file name on;
/// "no error" when they give none.
std::string error_in(const std::string& toml) {
  const std::string w = test::error_of([&] {
    for (const auto& c : test::cases_of(toml, "cpu", "bad.toml"))
      validate_case(test::resolve(c), test::builtin_registry());
  });
  if (w.empty()) return "no error";
  const auto pos = w.find("bad.toml");
  return pos == std::string::npos ? w : w.substr(pos);
}

TEST(Experiment, ListsExpandToTheirCrossProduct) {
  const auto cases = test::cases_of(
      "[model]\nnorm_position = [\"post\", \"pre\"]\nnorm = [\"layernorm\", \"rmsnorm\", \"none\"]\n"
      "[throughput]\n[stability]\nlr = [1e-3, 3e-3]\n");
  // throughput: 2 x 3; stability: 2 x 3 x 2 (its lr sweep does not multiply throughput cases)
  ASSERT_EQ(cases.size(), 6u + 12u);
  EXPECT_EQ(cases[0].runner, "throughput");
  EXPECT_EQ(cases[0].label, "norm_position=post norm=layernorm");
  EXPECT_EQ(cases[5].label, "norm_position=pre norm=none");
  EXPECT_EQ(cases[6].runner, "stability");
  EXPECT_EQ(cases[6].label, "norm_position=post norm=layernorm lr=0.001");
  EXPECT_EQ(cases[7].label, "norm_position=post norm=layernorm lr=0.003");
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(cases[i].ordinal, static_cast<int64_t>(i));
}

TEST(Experiment, ListValuedParametersAreNotSweeps) {
  const auto cases = test::cases_of("[throughput]\nmodes = [\"forward\", \"train_step\"]\n");
  ASSERT_EQ(cases.size(), 1u);
  const ResolvedCase rc = test::resolve(cases[0]);
  EXPECT_EQ(rc.runner.strings("modes"), (std::vector<std::string>{"forward", "train_step"}));
}

TEST(Experiment, VariantsOverrideTheBaseAndDeviceTablesShrinkIt) {
  const auto cases = test::cases_of(
      "seed = 5\n[model]\nd_model = 256\nnorm = { type = \"rmsnorm\", eps = 1e-3 }\n[stability]\nsteps = 1000\n"
      "[cpu]\nmodel.d_model = 64\nstability.steps = 10\n"
      "[[variant]]\nname = \"ln\"\nmodel.norm = \"layernorm\"\n"
      "[[variant]]\nname = \"wide\"\nmodel.d_model = 128\ncpu.stability.steps = 20\n");
  ASSERT_EQ(cases.size(), 2u);
  const ResolvedCase ln = test::resolve(cases[0]);
  const ResolvedCase wide = test::resolve(cases[1]);
  EXPECT_EQ(cases[0].label, "ln");
  EXPECT_EQ(ln.model.dims.d_model, 64);  // [cpu] applies to the base
  EXPECT_EQ(ln.model.slot(Slot::kNorm).info->name, "layernorm");
  EXPECT_DOUBLE_EQ(ln.model.slot(Slot::kNorm).params.number("eps"), 1e-3);  // kept from the base table
  EXPECT_EQ(ln.runner.integer("steps"), 10);
  EXPECT_EQ(wide.model.dims.d_model, 128);  // the variant wins over [cpu]
  EXPECT_EQ(wide.runner.integer("steps"), 20);
  EXPECT_EQ(wide.seed, 5);
}

TEST(Experiment, SeedListIsASweepAndDefaultsApply) {
  const auto cases = test::cases_of("seed = [1, 2, 3]\n[stability]\n");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[2].label, "seed=3");
  const ResolvedCase rc = test::resolve(cases[1]);
  EXPECT_EQ(rc.seed, 2);
  EXPECT_EQ(rc.model.slot(Slot::kNormPosition).info->name, "pre");
  EXPECT_EQ(rc.model.slot(Slot::kFfn).info->name, "swiglu");
  EXPECT_EQ(rc.model.dims.vocab_size, 256);  // from the dataset
  EXPECT_EQ(rc.model.dims.d_head, 32);
}

TEST(Experiment, ErrorsNameFileLineAndColumn) {
  EXPECT_EQ(error_in("[model]\nd_model = 100\nn_heads = 3\n[stability]\n"),
            "bad.toml:3:1: d_model (100) is not divisible by n_heads (3); change one, or set d_head explicitly");
  EXPECT_EQ(error_in("[model]\nn_heads = 4\nn_kv_heads = 3\n[stability]\n"),
            "bad.toml:3:1: n_heads (4) is not a multiple of n_kv_heads (3)");
  EXPECT_EQ(error_in("[model]\nnorm = \"rmsnrom\"\n[stability]\n"),
            "bad.toml:2:1: unknown norm 'rmsnrom' (did you mean 'rmsnorm'?); available: layernorm, none, rmsnorm");
  EXPECT_EQ(error_in("[model]\nd_modle = 64\n[stability]\n").substr(0, 52),
            "bad.toml:2:1: unknown key 'd_modle' in [model] (did ");
  EXPECT_EQ(error_in("[model]\nd_model = \"big\"\n[stability]\n"),
            "bad.toml:2:1: 'd_model' of [model] must be an integer, found string \"big\"");
  EXPECT_EQ(error_in("[model]\nd_model = 0\n[stability]\n"),
            "bad.toml:2:1: 'd_model' of [model] must be >= 1, found 0");
  EXPECT_EQ(error_in("[model]\nd_model = 64\n[stability]\nsteps = [ ]\n"),
            "bad.toml:4:1: empty sweep: stability.steps = []");
  EXPECT_EQ(error_in("[model]\nnorm = { type = \"rmsnorm\", eps = [] }\n[stability]\n"),
            "bad.toml:2:28: empty sweep: model.norm.eps = []");
  // A component's parameter written a level too high gets its slot's key as the hint.
  EXPECT_EQ(error_in("[model]\nwindow = 4\n[stability]\n"),
            "bad.toml:2:1: unknown key 'window' in [model] (did you mean 'attention.window'?)");
  EXPECT_EQ(error_in("[model]\nnorm = \"layernorm\"\neps = 1e-6\n[stability]\n"),
            "bad.toml:3:1: unknown key 'eps' in [model] (did you mean 'norm.eps'?)");
  EXPECT_EQ(error_in("[model\nd_model = 1\n").substr(0, 33), "bad.toml:1:7: TOML syntax error: ");
  EXPECT_EQ(error_in("[modle]\n[stability]\n").substr(0, 51), "bad.toml:1:2: unknown key 'modle' in the experiment");
  EXPECT_EQ(error_in("[model]\nffn = { type = \"swiglu\", d_f = 3 }\n[stability]\n").substr(0, 61),
            "bad.toml:2:26: unknown key 'd_f' for ffn 'swiglu' (model.ffn)");
  EXPECT_EQ(error_in("[model]\nposition = { type = \"rope\" }\nd_head = 7\nn_heads = 2\nd_model = 14\n[stability]\n"),
            "bad.toml:3:1: RoPE rotates pairs of features: d_head (7) must be even");
  EXPECT_EQ(error_in("[model]\nd_model = 64\n"),
            "bad.toml: nothing to run: add a [throughput], a [stability] or a [diagnostics] section");
  EXPECT_EQ(error_in("[stability]\nschedule = \"cosin\"\n"),
            "bad.toml:2:1: unknown value \"cosin\" for 'schedule' of [stability]; expected one of cosine, linear, "
            "constant (did you mean \"cosine\"?)");
  EXPECT_EQ(error_in("[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"\n[stability]\n"),
            "bad.toml:4:1: duplicate variant name 'a'");
  EXPECT_EQ(error_in("[data]\ntype = \"text\"\npath = \"missing.txt\"\n[stability]\n").substr(0, 40),
            "bad.toml:3:1: no such file: /tmp/bench_t");
  // The text dataset's tokenizer: each mistake at its key.
  EXPECT_EQ(error_in("[data]\ntype = \"text\"\npath = \"bad.toml\"\ntokenizer = \"bpf\"\n[stability]\n"),
            "bad.toml:4:1: unknown value \"bpf\" for 'tokenizer' of dataset 'text' ([data]); expected one of bytes, "
            "bpe (did you mean \"bpe\"?)");
  EXPECT_EQ(error_in("[data]\ntype = \"text\"\npath = \"bad.toml\"\ntokenizer = \"bpe\"\n[stability]\n"),
            "bad.toml:4:1: tokenizer = \"bpe\" needs a vocab_size (the pieces it trains)");
  EXPECT_EQ(error_in("[data]\ntype = \"text\"\npath = \"bad.toml\"\nvocab_size = 512\n[stability]\n"),
            "bad.toml:4:1: vocab_size is for tokenizer = \"bpe\"; the bytes tokenizer has 256");
  EXPECT_EQ(error_in("[data]\ntype = \"text\"\npath = \"bad.toml\"\ntokenizer = \"bpe\"\nvocab_size = 100\n"
                     "[stability]\n"),
            "bad.toml:5:1: 'vocab_size' of dataset 'text' ([data]) must be >= 260, found 100");
  EXPECT_EQ(error_in("[data]\ntype = \"text\"\npath = \"bad.toml\"\ntokenizers = \"bpe\"\n[stability]\n").substr(0, 38),
            "bad.toml:4:1: unknown key 'tokenizers'");
}

TEST(Experiment, NonUtf8AndUnreadableFilesAreErrors) {
  const std::string path = test::write_temp("latin1.toml", "name = \"caf\xe9\"\n[stability]\n");
  try {
    test::read_file_experiment(path);
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.loc().line, 1) << e.what();
  }
  EXPECT_THROW(test::read_file_experiment("/nonexistent/exp.toml"), ConfigError);
}

TEST(Experiment, TooManyCasesIsAnErrorThatSaysHowMany) {
  std::string many = "seed = [";
  for (int i = 0; i < 200; ++i) many += std::to_string(i) + ",";
  many += "1]\n[model]\nd_model = [";
  for (int i = 1; i <= 100; ++i) many += std::to_string(i * 8) + ",";
  many += "8]\n[stability]\n";
  // 201 seeds x 101 widths, counted without being made.
  const std::string e = test::error_of([&] { test::cases_of(many, "cpu", "many.toml"); });
  EXPECT_NE(e.find("many.toml: the sweeps expand to 20301 cases, more than the 10000 allowed"), std::string::npos) << e;
}

// Past the limit the cases are counted, not made: the count must be what expanding them makes,
// with sweeps whose later keys depend on the choice (a component's type: each has its own
// parameters), variants and two runners.
TEST(Experiment, TheCountPastTheLimitIsWhatExpansionMakes) {
  const std::string toml =
      "seed = [1, 2]\n[model]\nd_model = [16, 32, 48]\n"
      "norm = { type = [\"layernorm\", \"rmsnorm\"], eps = [1e-5, 1e-6] }\n"
      "ffn = { type = [\"mlp\", \"swiglu\"], d_ff = [32, 64, 96] }\n"
      "[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\nmodel.n_layers = [1, 2]\n"
      "[throughput]\n[stability]\nlr = [1e-3, 2e-3]\n";
  const ExperimentFile f = test::read_file_experiment(test::write_temp("count.toml", toml));
  const size_t made = expand_cases(f, test::builtin_registry(), "cpu").size();
  EXPECT_EQ(made, 1296u);  // per variant 2 x 3 x (2 x 2) x (2 x 3) x (1 + 2 learning rates); b: x 2 layers
  for (const size_t limit : {size_t{1}, size_t{7}, made - 1}) {
    const std::string e = test::error_of([&] { expand_cases(f, test::builtin_registry(), "cpu", limit); });
    EXPECT_NE(e.find("the sweeps expand to " + std::to_string(made) + " cases, more than the " + std::to_string(limit) +
                     " allowed"),
              std::string::npos)
        << e;
  }
  EXPECT_EQ(expand_cases(f, test::builtin_registry(), "cpu", made).size(), made);
}

// Every independent mistake of a case is reported, in file order; what() is the first and the
// count of the rest.
TEST(Experiment, ACaseReportsEveryIndependentMistake) {
  const auto cases = test::cases_of(
      "[model]\nd_modle = 32\nwindow = 4\nn_layers = 0\nnorm = { type = \"rmsnorm\", epsilon = 1 }\n"
      "[stability]\nsteps = 0\nlr = \"fast\"\n",
      "cpu", "many.toml");
  ASSERT_EQ(cases.size(), 1u);
  try {
    test::resolve(cases[0]);
    FAIL() << "expected the mistakes";
  } catch (const ConfigErrors& e) {
    std::vector<std::string> lines;
    for (const ConfigError& one : e.all()) lines.push_back(one.what());
    ASSERT_EQ(lines.size(), 6u) << e.what();
    const std::string at = e.all()[0].loc().file;
    EXPECT_EQ(lines[0], at + ":2:1: unknown key 'd_modle' in [model] (did you mean 'd_model'?)");
    EXPECT_EQ(lines[1], at + ":3:1: unknown key 'window' in [model] (did you mean 'attention.window'?)");
    EXPECT_EQ(lines[2], at + ":4:1: 'n_layers' of [model] must be >= 1, found 0");
    EXPECT_EQ(lines[3].rfind(at + ":5:28: unknown key 'epsilon' for norm 'rmsnorm' (model.norm)", 0), 0u) << lines[3];
    EXPECT_EQ(lines[4], at + ":7:1: 'steps' of [stability] must be >= 1, found 0");
    EXPECT_EQ(lines[5], at + ":8:1: 'lr' of [stability] must be a number, found string \"fast\"");
    EXPECT_EQ(std::string(e.what()), lines[0] + " (and 5 more; bench validate lists them)");
  }
}

}  // namespace
}  // namespace experiment_test
}  // namespace bench
