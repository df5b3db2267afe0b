// The runner table: every runner once, in the order cases expand; what the experiment layer gets
// of them; the diagnostics runner measures exactly what the stability runner's init_probe_batches
// measures before it trains (the same code, the same seeds); the stability runner groups a
// learning-rate grid for finish() and for shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <numbers>
#include <set>

#include "bench/sha256.h"
#include "runners/registry.h"
#include "store/tables.h"
#include "support/toml_case.h"

namespace bench {
namespace runners_test {
namespace {

const char* const kModel =
    "[model]\nd_model = 16\nn_heads = 2\nn_layers = 3\nseq_len = 8\nbatch_size = 2\nnorm_position = \"post\"\n";

CaseResult run_first(const std::string& toml, const std::string& runner) {
  for (const Case& c : test::cases_of(toml)) {
    if (c.runner != runner) continue;
    const DeviceInfo device;
    Progress progress(true);
    RunnerEnv env{test::builtin_registry(), device, progress, "", nullptr, "", ""};
    return run_case(runner_of(c), c, test::resolve(c), env);
  }
  ADD_FAILURE() << "no " << runner << " case";
  return {};
}

TEST(Runners, OneTableInExpansionOrder) {
  std::vector<std::string> names;
  for (const Runner* r : runners()) names.emplace_back(r->name());
  EXPECT_EQ(names, (std::vector<std::string>{"throughput", "stability", "diagnostics"}));
  const RunnerSections& sections = runner_sections();
  ASSERT_EQ(sections.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(sections[i].name, names[i]);
    EXPECT_EQ(sections[i].params.size(), runners()[i]->params().size());
    EXPECT_EQ(find_runner(names[i]), runners()[i]);
  }
  EXPECT_EQ(find_runner("demo"), nullptr);
  Case c;
  c.runner = "nope";
  EXPECT_THROW(runner_of(c), Error);
  // Each section a file can have, in a variant's expansion order.
  const auto cases = test::cases_of(std::string(kModel) + "[diagnostics]\n[stability]\nsteps = 2\n[throughput]\n");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].runner, "throughput");
  EXPECT_EQ(cases[1].runner, "stability");
  EXPECT_EQ(cases[2].runner, "diagnostics");
}

TEST(Runners, TheStabilityRunnerChecksItsSettingsAndSetsTheDecayGroups) {
  const ResolvedCase rc =
      test::resolve_first(std::string(kModel) + "[stability]\nweight_decay_groups = [\"matrix\", \"gain\"]\n");
  EXPECT_EQ(rc.model.decay_groups, (std::vector<std::string>{"matrix", "gain"}));
  EXPECT_THROW(test::resolve_first(std::string(kModel) + "[stability]\neval_lengths = [16, 0]\n"), ConfigError);
  // Throughput cases keep the default groups.
  EXPECT_EQ(test::resolve_first(std::string(kModel) + "[throughput]\n").model.decay_groups,
            (std::vector<std::string>{"matrix", "embedding"}));
}

TEST(Runners, DiagnosticsMeasureWhatTheStabilityRunnersInitProbeMeasures) {
  const CaseResult alone = run_first(std::string(kModel) + "[diagnostics]\nbatches = 2\nseeds = 2\n", "diagnostics");
  const CaseResult before_training = run_first(
      std::string(kModel) + "[stability]\nsteps = 1\ninit_probe_batches = 2\ninit_probe_seeds = 2\n", "stability");
  ASSERT_EQ(alone.status, "completed") << alone.error;
  ASSERT_EQ(before_training.status, "completed") << before_training.error;
  int compared = 0;
  for (const Metric& m : alone.metrics) {
    EXPECT_EQ(before_training.metric(m.name), m.value) << m.name;  // bit for bit
    ++compared;
  }
  EXPECT_EQ(compared, 6);
  ASSERT_EQ(alone.series.size(), 2u * 3u);  // grad norm and block RMS per layer
  for (size_t i = 0; i < alone.series.size(); ++i) {
    EXPECT_EQ(alone.series[i].name, before_training.series[i].name);
    EXPECT_EQ(alone.series[i].value, before_training.series[i].value);
    EXPECT_EQ(alone.series[i].step, -1);
  }
  EXPECT_GT(*alone.metric("init_grad_norm_ratio"), 0.0);
  EXPECT_GT(alone.n_params.value_or(0), 0);
  EXPECT_TRUE(alone.steps.empty()) << "no training step";
}

// Each figure is declared once, by the runner that makes it (docs/design.md, "One record, declared
// once"): no name twice; what a runner stores under a declared name carries the declared unit; each
// column of `bench results` is a metric the runner's cases have (but for the ones shown only when
// present, and the step of a divergence); a curve of a steps column names a declared column.
TEST(Runners, EachFigureIsDeclaredOnceWithTheUnitItsRunnerStores) {
  const std::string toml = std::string(kModel) +
                           "[stability]\nsteps = 3\neval_batches = 1\n"
                           "[throughput]\nmodes = [\"forward\"]\nrepetitions = 2\nmin_time = 0.001\n"
                           "warmup_time = 0\nmax_time = 0.05\nprofile_steps = 1\n"
                           "[diagnostics]\nbatches = 1\n";
  int checked = 0;
  for (const Runner* r : runners()) {
    std::set<std::string> names;
    for (const MetricSpec& m : r->metrics())
      EXPECT_TRUE(names.insert(m.pattern()).second) << r->name() << ": " << m.pattern();
    for (const ModeMetric& m : r->mode_metrics())
      EXPECT_TRUE(names.insert(m.name).second) << r->name() << ": " << m.name;
    const CaseResult result = run_first(toml, std::string(r->name()));
    ASSERT_EQ(result.status, "completed") << r->name() << ": " << result.error;
    for (const Metric& m : result.metrics) {
      const MetricSpec* spec = r->declaration(m.name);
      ASSERT_NE(spec, nullptr) << r->name() << " stores " << m.name << ", which it does not declare";
      if (!spec->unit_varies) {
        EXPECT_EQ(spec->unit, m.unit) << r->name() << ": " << m.name;
      }
      ++checked;
    }
    for (const MetricSpec& m : r->metrics()) {
      if (!m.column.empty() && !m.when_present && m.name != "diverged_step") {
        EXPECT_TRUE(result.metric(m.name).has_value()) << r->name() << ": column " << m.name << " is never stored";
      }
    }
    const auto& steps = store::step_table().columns;
    for (const CurveSpec& c : r->curves()) {
      if (c.source == CurveSpec::Source::kStepColumn) {
        EXPECT_TRUE(std::any_of(steps.begin(), steps.end(), [&](const auto& col) { return col.name == c.name; }))
            << c.name;
      }
    }
    if (r->table().timings) {
      ASSERT_FALSE(result.timings.empty());
      for (const ModeMetric& m : r->mode_metrics())  // no MFU: the test's device has no measured peak
        EXPECT_EQ(m.value(result.timings[0]).has_value(), m.name != "mfu_percent") << m.name;
    }
  }
  EXPECT_GT(checked, 20);
}

// A declaration's name pattern: the name itself, "<name>/<mode>", "<name>_L<layer>" or
// "<name><number>", and nothing else; the first declaration that matches wins.
TEST(Runners, ADeclarationMatchesItsNameItsModesItsLayersOrItsNumbers) {
  const MetricSpec plain("max_attn_logit");
  EXPECT_TRUE(plain.matches("max_attn_logit"));
  EXPECT_FALSE(plain.matches("max_attn_logit_L0"));
  EXPECT_FALSE(plain.matches("max_attn_logi"));
  const MetricSpec layered = MetricSpec("final_grad_rms").per_layer();
  EXPECT_TRUE(layered.matches("final_grad_rms_L0"));
  EXPECT_TRUE(layered.matches("final_grad_rms_L12"));
  EXPECT_FALSE(layered.matches("final_grad_rms"));
  EXPECT_FALSE(layered.matches("final_grad_rms_L"));
  EXPECT_FALSE(layered.matches("final_grad_rms_Lx"));
  EXPECT_FALSE(layered.matches("final_grad_rms_max"));
  const MetricSpec numbered = MetricSpec("val_loss_at_", "nats").followed_by_number();
  EXPECT_TRUE(numbered.matches("val_loss_at_512"));
  EXPECT_FALSE(numbered.matches("val_loss_at_"));
  EXPECT_FALSE(numbered.matches("val_loss_at_long"));
  const MetricSpec per_mode("profile_step_ms/", "ms");
  EXPECT_TRUE(per_mode.matches("profile_step_ms/train_step"));
  EXPECT_FALSE(per_mode.matches("profile_step_ms"));
  EXPECT_EQ(layered.pattern(), "final_grad_rms_L<n>");
  EXPECT_EQ(numbered.pattern(), "val_loss_at_<n>");
  EXPECT_EQ(per_mode.pattern(), "profile_step_ms/<mode>");
  // The scheduler's budget is every runner's; the learning-rate grid's figures are stability's.
  for (const Runner* r : runners()) ASSERT_NE(r->declaration("params_total"), nullptr) << r->name();
  const Runner* stability = find_runner("stability");
  ASSERT_NE(stability, nullptr);
  EXPECT_EQ(stability->declaration("lr_sensitivity")->unit, "nats");
  EXPECT_EQ(stability->declaration("final_attn_entropy_L3")->unit, "nats");
  EXPECT_EQ(stability->declaration("a_plugins_own_probe"), nullptr);
}

TEST(Runners, AStabilityGridIsOneGroupForFinishAndForShards) {
  const auto cases = test::cases_of(std::string(kModel) + "[stability]\nlr = [0.01, 0.1]\nsteps = 3\n[throughput]\n");
  ASSERT_EQ(cases.size(), 3u);
  const ResolvedCase tp = test::resolve(cases[0]), a = test::resolve(cases[1]), b = test::resolve(cases[2]);
  const Runner& stability = runner_of(cases[1]);
  EXPECT_EQ(stability.group_key(a), stability.group_key(b));
  EXPECT_NE(resolved_json(a), resolved_json(b));
  EXPECT_EQ(shard_unit_key(cases[0], tp), "throughput\n" + resolved_json(tp));
  Value without_lr = resolved_value(a);
  without_lr["runner"].erase("lr");
  EXPECT_EQ(shard_unit_key(cases[1], a), "stability\n" + without_lr.json());
  // finish(): lr_sensitivity over the two learning rates, for both cases.
  CaseResult ra, rb;
  ra.metrics = {{"lr", 0.01, ""}, {"initial_loss", 5.0, "nats"}, {"final_val_loss", 3.0, "nats"}};
  rb.metrics = {{"lr", 0.1, ""}, {"initial_loss", 5.0, "nats"}, {"final_val_loss", 4.0, "nats"}};
  const auto added = stability.finish({{1, &a, &ra}, {2, &b, &rb}});
  ASSERT_EQ(added.size(), 2u);
  std::set<size_t> indices;
  for (const CaseMetrics& m : added) {
    indices.insert(m.index);
    ASSERT_EQ(m.metrics.size(), 2u);
    EXPECT_EQ(m.metrics[0].name, "lr_sensitivity");
    EXPECT_DOUBLE_EQ(m.metrics[0].value, 3.5 - 3.0);  // mean(3, 4) - min(3, 4)
    EXPECT_EQ(m.metrics[1].value, 2);
  }
  EXPECT_EQ(indices, (std::set<size_t>{1, 2}));
  EXPECT_TRUE(runner_of(cases[0]).finish({{0, &tp, &ra}}).empty());
}

TEST(Runners, BitsPerByteIsTheLossPerTokenOverTheBytesTheTokensStandFor) {
  // The closed form by hand: 2 nats/token over 10 tokens that stand for 25 bytes is
  // 20 nats / 25 bytes = 0.8 nats/byte = 0.8 / ln 2 bits/byte.
  EXPECT_DOUBLE_EQ(bits_per_byte(2.0, 10, 25), 1.1541560327111707);
  EXPECT_TRUE(std::isnan(bits_per_byte(2.0, 10, -1)));
  EXPECT_TRUE(std::isnan(bits_per_byte(2.0, 10, 0)));
  // Bytes as tokens: exactly the loss over ln 2, bit for bit.
  for (double loss : {0.1, 1.0, 2.302585092994046, 5.545177444479562})
    EXPECT_EQ(bits_per_byte(loss, 4096, 4096), loss / std::numbers::ln2);

  std::string text;
  for (int i = 0; i < 200; ++i) text += "A line of text, number " + std::to_string(i) + ".\n";
  test::write_temp("bpb.txt", text);
  const std::string toml = std::string(kModel) + "[stability]\nsteps = 3\neval_batches = 2\n[data]\ntype = \"text\"\n";
  const CaseResult bytes = run_first(toml + "path = \"bpb.txt\"\n", "stability");
  ASSERT_EQ(bytes.status, "completed") << bytes.error;
  EXPECT_EQ(*bytes.metric("final_val_bpb"), *bytes.metric("final_val_loss") / std::numbers::ln2);
  EXPECT_TRUE(bytes.artifacts.empty());
  // BPE: the tokenizer is an artifact of the case; bits per byte differ from nats per token.
  const CaseResult bpe = run_first(toml + "path = \"bpb.txt\"\ntokenizer = \"bpe\"\nvocab_size = 320\n", "stability");
  ASSERT_EQ(bpe.status, "completed") << bpe.error;
  ASSERT_EQ(bpe.artifacts.size(), 1u);
  EXPECT_EQ(bpe.artifacts[0].kind, "tokenizer");
  EXPECT_EQ(bpe.artifacts[0].sha256.size(), 64u);
  EXPECT_TRUE(std::isfinite(*bpe.metric("final_val_bpb")));
  EXPECT_NE(*bpe.metric("final_val_bpb"), *bpe.metric("final_val_loss") / std::numbers::ln2);
  // Generated data has no bytes: no bits per byte.
  EXPECT_FALSE(run_first(std::string(kModel) + "[stability]\nsteps = 2\n", "stability").metric("final_val_bpb"));
}

}  // namespace
}  // namespace runners_test
}  // namespace bench
