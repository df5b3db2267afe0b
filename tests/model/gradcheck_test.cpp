// Whole-model gradient checks in float64: every parameter's analytic gradient (explicit
// backward through embedding, blocks, norm positions, attention with RoPE, SwiGLU, final norm,
// head with z-loss) against central finite differences of the objective.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/interfaces.h"
#include "model/model.h"
#include "support/toml_case.h"

namespace bench {
namespace {

struct GradCase {
  std::string name;
  std::string model;  // extra [model] lines
};

std::string experiment(const std::string& model_lines) {
  const std::string heads = model_lines.find("n_heads") == std::string::npos ? "n_heads = 2\n" : "";
  return "[model]\nd_model = 8\nn_layers = 2\nseq_len = 6\nbatch_size = 2\ndtype = \"float64\"\n" + heads +
         "init_std = 0.3\nffn = { type = \"swiglu\", d_ff = 12 }\n" + model_lines +
         "\n[data]\ntype = \"synthetic\"\nvocab_size = 16\nreference_tokens = 2048\n[stability]\n";
}

class GradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradCheck, EveryParameterMatchesFiniteDifferences) {
  const ResolvedCase rc = test::resolve_first(experiment(GetParam().model));
  Model model(rc.model, test::builtin_registry(), 7);
  const ModelDims& d = rc.model.dims;
  std::unique_ptr<Component> ds = test::builtin_registry().create(*rc.data.info, rc.data.params);
  std::vector<int32_t> in(static_cast<size_t>(d.tokens())), tg(in.size());
  dynamic_cast<Dataset*>(ds.get())->batch(Split::kTrain, 3, d.batch_size, d.seq_len, in.data(), tg.data());

  RunContext ctx;
  ctx.probes = false;
  ctx.seed = 5;
  ctx.step = 3;
  model.zero_grad();
  ctx.training = true;
  const double base = model.forward(in.data(), tg.data(), ctx).objective();
  ASSERT_TRUE(std::isfinite(base));
  model.backward(ctx);

  // With dropout the perturbed objectives must see the same masks: evaluate them in training mode
  // at the same step and seed (the masks depend on nothing else).
  ctx.training = GetParam().model.find("dropout") != std::string::npos;
  auto objective = [&] { return model.forward(in.data(), tg.data(), ctx).objective(); };
  const double h = 1e-5;
  int checked = 0;
  for (Param* p : model.params()) {
    double* v = p->value.data<double>();
    const double* g = p->grad.data<double>();
    const int64_t n = p->value.numel();
    for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 5)) {
      const double keep = v[i];
      v[i] = keep + h;
      const double lp = objective();
      v[i] = keep - h;
      const double lm = objective();
      v[i] = keep;
      const double fd = (lp - lm) / (2 * h);
      EXPECT_NEAR(g[i], fd, 1e-7 + 1e-5 * std::abs(fd)) << p->name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

std::vector<GradCase> cases() {
  std::vector<GradCase> out;
  for (const char* pos : {"post", "pre", "double", "output"})
    for (const char* norm : {"layernorm", "rmsnorm", "none"})
      out.push_back(
          {std::string(pos) + "_" + norm, std::string("norm_position = \"") + pos + "\"\nnorm = \"" + norm + "\"\n"});
  out.push_back({"rmsnorm_bias_tied_zloss",
                 "norm = { type = \"rmsnorm\", bias = true }\ntie_embeddings = true\n"
                 "head = { type = \"lm_head\", z_loss = 0.01 }\n"});
  out.push_back({"layernorm_no_affine_final_off",
                 "norm = { type = \"layernorm\", weight = false, bias = false }\nfinal_norm = \"off\"\n"});
  out.push_back({"mqa_window_softcap_interleaved",
                 "n_kv_heads = 1\nattention = { type = \"causal\", window = 3, softcap = 2.0 }\n"
                 "position = { type = \"rope\", layout = \"interleaved\" }\n"});
  out.push_back({"gqa_nope_post_final_on",
                 "n_heads = 4\nn_kv_heads = 2\nd_head = 3\nposition = \"none\"\n"
                 "norm_position = \"post\"\nfinal_norm = \"on\"\n"});
  out.push_back(
      {"dropout_everywhere", "dropout_embedding = 0.2\ndropout_residual = 0.3\nnorm_position = \"double\"\n"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Model, GradCheck, ::testing::ValuesIn(cases()), [](const auto& tp) { return tp.param.name; });

}  // namespace
}  // namespace bench
