// Matched budgets: the widths a params match solves, checked against the block's closed-form
// parameter count; the steps a FLOP match solves; and the errors at the match keys.
#include "experiment/match.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "support/errors.h"
#include "support/toml_case.h"

namespace bench {
namespace match_test {
namespace {

struct Matched {
  std::vector<Case> cases;
  std::vector<Budget> budgets;
  std::vector<ResolvedCase> resolved;  ///< each with its measured budget
};

Matched match_of(const std::string& toml, const std::string& name = "match.toml") {
  const ExperimentFile f = test::read_file_experiment(test::write_temp(name, toml));
  Matched m;
  m.cases = expand_cases(f, test::builtin_registry(), "cpu");
  m.budgets = match_budgets(f, m.cases, test::builtin_registry());
  for (const Case& c : m.cases) {
    ResolvedCase rc = test::resolve(c);
    rc.budget = measure_budget(rc, test::builtin_registry());
    m.resolved.push_back(std::move(rc));
  }
  return m;
}

/// The error a matched experiment gives, from its file name on; "no error" when none.
std::string match_error(const std::string& toml) {
  const std::string w = test::error_of([&] { match_of(toml, "bad.toml"); });
  if (w.empty()) return "no error";
  const auto pos = w.find("bad.toml");
  return pos == std::string::npos ? w : w.substr(pos);
}

// A pre-norm RMSNorm block with RoPE (no position parameters) and no biases, untied head:
// non-embedding = L (4 d^2 + m d d_ff + 2 d) + d + V d, where m = 2 for a plain MLP and 3 for a
// gated FFN (two RMSNorm gains per block, a final norm, the LM head).
int64_t closed_form(int64_t d, int64_t layers, int64_t d_ff, int64_t matrices, int64_t vocab) {
  return layers * (4 * d * d + matrices * d * d_ff + 2 * d) + d + vocab * d;
}

constexpr const char* kShape =
    "[model]\nd_model = 64\nn_layers = 2\nn_heads = 4\nseq_len = 32\nbatch_size = 4\n"
    "norm = \"rmsnorm\"\nnorm_position = \"pre\"\nposition = \"rope\"\n";

TEST(Match, ParamsSolveTheGatedFfnWidthClosestToThePlainMlp) {
  const Matched m = match_of(std::string("match = \"params\"\nmatch_width = \"d_ff\"\nmatch_multiple = 8\n") + kShape +
                             "[stability]\nsteps = 5\n[throughput]\n"
                             "[[variant]]\nname = \"mlp\"\nmodel.ffn = \"mlp\"\n"
                             "[[variant]]\nname = \"swiglu\"\nmodel.ffn = \"swiglu\"\n");
  ASSERT_EQ(m.cases.size(), 4u);
  const int64_t vocab = m.resolved[0].model.dims.vocab_size;
  ASSERT_EQ(vocab, 256);
  const int64_t target = closed_form(64, 2, 256, 2, vocab);  // the MLP's d_ff = 4 d_model
  // The closest multiple of 8 for three matrices, found by scanning.
  int64_t best = 8;
  for (int64_t w = 8; w <= 1024; w += 8)
    if (std::llabs(closed_form(64, 2, w, 3, vocab) - target) < std::llabs(closed_form(64, 2, best, 3, vocab) - target))
      best = w;
  EXPECT_EQ(best, 168);  // 2 d_ff / 3 = 170.7
  for (size_t i = 0; i < m.cases.size(); ++i) {
    const Budget& b = m.resolved[i].budget;
    const bool mlp = m.cases[i].variant == "mlp";
    SCOPED_TRACE(m.cases[i].label + " " + m.cases[i].runner);
    EXPECT_EQ(b.d_ff, mlp ? 256 : best);
    EXPECT_EQ(b.params_non_embedding, closed_form(64, 2, mlp ? 256 : best, mlp ? 2 : 3, vocab));
    EXPECT_EQ(b.params_total, b.params_non_embedding + vocab * 64);
    EXPECT_EQ(m.budgets[i].match, "params");
    EXPECT_EQ(m.budgets[i].match_target, static_cast<double>(target));
    EXPECT_DOUBLE_EQ(m.budgets[i].match_gap,
                     static_cast<double>(b.params_non_embedding - target) / static_cast<double>(target));
  }
  EXPECT_EQ(m.resolved[3].model.slot(Slot::kFfn).params.integer("d_ff"), best);
}

TEST(Match, ParamsSolveDepthAndWidth) {
  // n_layers: a model of 4 layers against one of twice the width; the closest depth by the
  // closed form (d_ff = 8/3 d rounded up to 32: 192 at 64, 352 at 128).
  const Matched depth = match_of(std::string("match = \"params\"\nmatch_width = \"n_layers\"\n") + kShape +
                                 "[stability]\nsteps = 5\n[[variant]]\nname = \"wide\"\nmodel.d_model = 128\n"
                                 "[[variant]]\nname = \"narrow\"\nmodel.n_layers = 9\n");
  const int64_t target = closed_form(128, 2, 352, 3, 256);
  int64_t best = 1;
  for (int64_t l = 1; l <= 64; ++l)
    if (std::llabs(closed_form(64, l, 192, 3, 256) - target) < std::llabs(closed_form(64, best, 192, 3, 256) - target))
      best = l;
  EXPECT_EQ(best, 8);
  EXPECT_EQ(depth.resolved[1].model.dims.n_layers, best);
  EXPECT_EQ(depth.resolved[1].budget.params_non_embedding, closed_form(64, best, 192, 3, 256));

  // d_model: must stay divisible by n_heads = 6, so only multiples of 12 of the 4s are candidates.
  const Matched width = match_of(std::string("match = \"params\"\nmatch_width = \"d_model\"\nmatch_multiple = 4\n"
                                             "match_tolerance = 0.2\n") +
                                 kShape +
                                 "[stability]\nsteps = 5\n[[variant]]\nname = \"base\"\n"
                                 "[[variant]]\nname = \"shallow\"\nmodel.n_layers = 1\nmodel.n_heads = 6\n"
                                 "model.ffn = { type = \"swiglu\", d_ff = 256 }\n");
  const int64_t target2 = closed_form(64, 2, 192, 3, 256);
  int64_t best2 = 12;
  for (int64_t d = 12; d <= 512; d += 12)
    if (std::llabs(closed_form(d, 1, 256, 3, 256) - target2) < std::llabs(closed_form(best2, 1, 256, 3, 256) - target2))
      best2 = d;
  EXPECT_EQ(width.resolved[1].model.dims.d_model, best2);
  EXPECT_EQ(best2 % 6, 0);
  EXPECT_EQ(width.resolved[1].budget.params_non_embedding, closed_form(best2, 1, 256, 3, 256));
}

TEST(Match, FlopsSolveTheStepsAndLeaveThroughputAlone) {
  const Matched m = match_of(std::string("match = \"flops\"\n") + kShape +
                             "[stability]\nsteps = 60\n[throughput]\n"
                             "[[variant]]\nname = \"small\"\n[[variant]]\nname = \"deep\"\nmodel.n_layers = 4\n");
  ASSERT_EQ(m.cases.size(), 4u);  // small: throughput, stability; deep: the same
  const Budget& ref = m.resolved[1].budget;
  EXPECT_EQ(ref.train_tokens, 60 * 4 * 32);
  EXPECT_DOUBLE_EQ(ref.train_flops_total, ref.flops_per_token * 60 * 4 * 32);
  const Budget& deep = m.resolved[3].budget;
  const double per_step = deep.flops_per_token * 4 * 32;
  const auto steps = static_cast<int64_t>(std::llround(ref.train_flops_total / per_step));
  EXPECT_EQ(m.resolved[3].runner.integer("steps"), steps);
  EXPECT_LT(steps, 60);
  EXPECT_EQ(deep.train_tokens, steps * 4 * 32);
  EXPECT_EQ(m.budgets[3].match, "flops");
  EXPECT_DOUBLE_EQ(m.budgets[3].match_target, ref.train_flops_total);
  EXPECT_LE(std::fabs(m.budgets[3].match_gap), 0.5 * per_step / ref.train_flops_total + 1e-12);
  EXPECT_EQ(m.budgets[0].match, "");  // throughput cases do not train: not matched
  EXPECT_EQ(m.budgets[2].match, "");
  EXPECT_EQ(m.resolved[2].model.dims.n_layers, 4);
  EXPECT_EQ(m.resolved[2].budget.train_tokens, 0);
}

TEST(Match, FlopsSolveTheBatchSize) {
  const Matched m =
      match_of(std::string("match = \"flops\"\nmatch_by = \"batch_size\"\nmatch_tolerance = 0.1\n") + kShape +
               "[stability]\nsteps = 60\n"
               "[[variant]]\nname = \"small\"\n[[variant]]\nname = \"deep\"\nmodel.n_layers = 4\n");
  const Budget& ref = m.resolved[0].budget;
  const Budget& deep = m.resolved[1].budget;
  const int64_t batch = m.resolved[1].model.dims.batch_size;
  EXPECT_EQ(batch, 2);  // about 1.9x the FLOPs per token: 4 / 1.9 = 2.1 sequences
  const double per_sequence = deep.flops_per_token * 32 * 60;
  for (const int64_t other : {int64_t{1}, int64_t{3}})
    EXPECT_LT(std::fabs(per_sequence * static_cast<double>(batch) - ref.train_flops_total),
              std::fabs(per_sequence * static_cast<double>(other) - ref.train_flops_total));
  EXPECT_EQ(deep.train_tokens, 60 * batch * 32);
  EXPECT_DOUBLE_EQ(m.budgets[1].match_gap, (deep.train_flops_total - ref.train_flops_total) / ref.train_flops_total);
}

TEST(Match, WithoutMatchNothingChanges) {
  const std::string text = std::string(kShape) +
                           "[stability]\nsteps = 5\n[[variant]]\nname = \"a\"\n"
                           "[[variant]]\nname = \"b\"\nmodel.ffn = \"mlp\"\n";
  const Matched m = match_of(text);
  const auto plain = test::cases_of(text);
  ASSERT_EQ(m.cases.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(m.cases[i].config.json(), plain[i].config.json());
    EXPECT_EQ(m.budgets[i].match, "");
  }
}

TEST(Match, ImpossibleMatchesAndBadKeysAreErrorsAtTheKey) {
  const std::string body = std::string(kShape) +
                           "[stability]\nsteps = 5\n[[variant]]\nname = \"base\"\nmodel.n_layers = 4\n"
                           "[[variant]]\nname = \"wide\"\nmodel.d_model = 96\n";
  // Whole layers cannot come within 2 %: 2 layers of width 96 are 7 % over the reference's 4 of 64.
  EXPECT_EQ(match_error("match = \"params\"\nmatch_width = \"n_layers\"\nmatch_tolerance = 0.02\n" + body),
            "bad.toml:3:1: match = \"params\": variant 'wide' (case 1, stability wide) cannot come within 2.00% of "
            "the reference's 229,952 non-embedding parameters: the closest, n_layers = 2, gives 246,240 (+7.08%)");
  // The default tolerance says where to change it.
  EXPECT_EQ(match_error("match = \"params\"\nmatch_width = \"n_layers\"\n" + body),
            "bad.toml:1:1: match = \"params\": variant 'wide' (case 1, stability wide) cannot come within 5.00% of "
            "the reference's 229,952 non-embedding parameters: the closest, n_layers = 2, gives 246,240 (+7.08%); "
            "match_tolerance (default 0.05) accepts a larger gap");
  EXPECT_EQ(match_error("match = \"parameters\"\n" + body),
            "bad.toml:1:1: match must be \"params\" or \"flops\", found \"parameters\"");
  EXPECT_EQ(match_error("match = \"params\"\nmatch_width = \"width\"\n" + body),
            "bad.toml:2:1: match_width must be one of d_ff, d_head, d_model, n_heads, n_kv_heads, n_layers, "
            "vocab_size or a key path under model (\"model.ffn.d_ff\"), found \"width\"");
  EXPECT_EQ(match_error("match = \"params\"\nmatch_reference = \"bsae\"\n" + body),
            "bad.toml:2:1: match_reference names no variant: 'bsae'; variants: base, wide");
  EXPECT_EQ(match_error("match = \"flops\"\nmatch_by = \"lr\"\n" + body),
            "bad.toml:2:1: match_by must be \"steps\" or \"batch_size\", found \"lr\"");
  EXPECT_EQ(match_error("match_multiple = 64\n" + body),
            "bad.toml:1:1: match_multiple needs match = \"params\" or \"flops\"");
  EXPECT_EQ(match_error("match = \"params\"\nmatch_multiple = 0\n" + body),
            "bad.toml:2:1: match_multiple must be a positive integer, found 0");
  // A width the match solves cannot be swept as well.
  EXPECT_EQ(match_error("match = \"params\"\nmatch_width = \"n_layers\"\n" + std::string(kShape) +
                        "[stability]\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\nmodel.n_layers = [1, 2]\n"),
            "bad.toml:2:1: match = \"params\": variant 'b' (case 1, stability b n_layers=1) sweeps n_layers, which the "
            "match solves; sweep another key");
  // No variants: nothing to match.
  EXPECT_EQ(match_error("match = \"params\"\n" + std::string(kShape) + "[stability]\n"),
            "bad.toml:1:1: match needs two or more [[variant]]s: one to match and a reference");
}

}  // namespace
}  // namespace match_test
}  // namespace bench
