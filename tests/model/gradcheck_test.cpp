// Whole-model gradient checks in float64: every parameter's analytic gradient (explicit
// backward through embedding, blocks, norm positions, attention with RoPE, SwiGLU, final norm,
// head with z-loss, dropout) against central finite differences of the objective.
#include "support/gradcheck.h"

namespace bench {
namespace gradcheck_test {
namespace {

struct GradCase {
  std::string name;
  std::string model;  // extra [model] lines
};

class GradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradCheck, EveryParameterMatchesFiniteDifferences) {
  test::expect_gradients_match(GetParam().model, GetParam().model.find("dropout") != std::string::npos);
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
}  // namespace gradcheck_test
}  // namespace bench
