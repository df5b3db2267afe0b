// Whole-model float64 gradient checks of every FFN: the plain MLP with each activation and the
// gated units (SwiGLU, GeGLU with the erf and the tanh GeLU, ReGLU), with d_ff given or derived
// from ratio and multiple_of; and each with biases on every matrix (jittered off zero), in serial
// and parallel blocks.
#include "support/gradcheck.h"

namespace bench {
namespace gradcheck_ffn_test {
namespace {

struct FfnGradCase {
  std::string name;
  std::string model;  // extra [model] lines
};

// Printed by name in test listings (not as bytes).
void PrintTo(const FfnGradCase& c, std::ostream* os) { *os << c.name; }

class FfnGradCheck : public ::testing::TestWithParam<FfnGradCase> {};

TEST_P(FfnGradCheck, EveryParameterMatchesFiniteDifferences) { test::expect_gradients_match(GetParam().model); }

std::vector<FfnGradCase> ffn_cases() {
  std::vector<FfnGradCase> out;
  for (const char* act : {"relu", "gelu", "gelu_tanh", "silu", "relu2"})
    out.push_back({std::string("mlp_") + act,
                   std::string("ffn = { type = \"mlp\", activation = \"") + act + "\", d_ff = 16 }\n"});
  for (const char* gated : {"swiglu", "geglu", "reglu"})
    out.push_back({gated, std::string("ffn = { type = \"") + gated + "\", d_ff = 12 }\n"});
  out.push_back({"geglu_gelu_tanh", "ffn = { type = \"geglu\", activation = \"gelu_tanh\", d_ff = 12 }\n"});
  // d_ff from the ratio rule (8/3 * 8 = 21.3 -> 24 with multiple_of 8; 4 * 8 = 32), without the
  // scaled output init, under the other norm positions.
  out.push_back(
      {"geglu_ratio_post",
       "ffn = { type = \"geglu\", multiple_of = 8, scaled_output_init = false }\nnorm_position = \"post\"\n"});
  out.push_back({"mlp_default_ratio_double", "ffn = \"mlp\"\nnorm_position = \"double\"\n"});
  out.push_back({"reglu_output_layernorm",
                 "ffn = { type = \"reglu\", d_ff = 10 }\nnorm_position = \"output\"\nnorm = \"layernorm\"\n"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ffn, FfnGradCheck, ::testing::ValuesIn(ffn_cases()),
                         [](const auto& tp) { return tp.param.name; });

class FfnBiasGradCheck : public ::testing::TestWithParam<FfnGradCase> {};

TEST_P(FfnBiasGradCheck, EveryParameterMatchesFiniteDifferences) {
  test::expect_gradients_match(GetParam().model, false, /*jitter=*/true);
}

std::vector<FfnGradCase> ffn_bias_cases() {
  std::vector<FfnGradCase> out;
  for (const char* act : {"relu", "gelu", "gelu_tanh", "silu", "relu2"})
    out.push_back({std::string("mlp_bias_") + act,
                   std::string("ffn = { type = \"mlp\", activation = \"") + act + "\", d_ff = 16, bias = true }\n"});
  for (const char* gated : {"swiglu", "geglu", "reglu"}) {
    out.push_back(
        {std::string(gated) + "_bias", std::string("ffn = { type = \"") + gated + "\", d_ff = 12, bias = true }\n"});
    out.push_back({std::string(gated) + "_bias_parallel",
                   std::string("block = \"parallel\"\nffn = { type = \"") + gated + "\", d_ff = 12, bias = true }\n"});
  }
  out.push_back(
      {"geglu_gelu_tanh_bias", "ffn = { type = \"geglu\", activation = \"gelu_tanh\", d_ff = 12, bias = true }\n"});
  out.push_back({"mlp_bias_parallel_per_branch_layernorm",
                 "block = { type = \"parallel\", norms = \"per_branch\" }\nnorm = \"layernorm\"\n"
                 "ffn = { type = \"mlp\", activation = \"gelu\", d_ff = 16, bias = true }\n"
                 "attention = { type = \"causal\", bias = \"all\" }\n"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ffn, FfnBiasGradCheck, ::testing::ValuesIn(ffn_bias_cases()),
                         [](const auto& tp) { return tp.param.name; });

}  // namespace
}  // namespace gradcheck_ffn_test
}  // namespace bench
