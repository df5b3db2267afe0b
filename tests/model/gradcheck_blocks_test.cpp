// Whole-model float64 gradient checks of the parallel block under every norm position and norm
// type, with a plain MLP, and with residual dropout (the one mask on the sum of the branches);
// and with a norm position per branch (GPT-NeoX), gains and biases jittered off their init; the
// norms with Gemma's unit offset (gain 1 + w) under each position, and two whole real-model
// shapes: Gemma 2 (sandwich norms with unit offset, embedding scale, query_pre_attn_scalar,
// soft-caps, local/global layers, tanh GeGLU, tied head) and GPT-NeoX (parallel per-branch
// LayerNorms, partial rotary, biases, GeLU MLP).
#include "support/gradcheck.h"

namespace bench {
namespace gradcheck_blocks_test {
namespace {

struct BlockGradCase {
  std::string name;
  std::string model;  // extra [model] lines
};

// Printed by name in test listings (not as bytes).
void PrintTo(const BlockGradCase& c, std::ostream* os) { *os << c.name; }

class BlockGradCheck : public ::testing::TestWithParam<BlockGradCase> {};

TEST_P(BlockGradCheck, EveryParameterMatchesFiniteDifferences) {
  test::expect_gradients_match(GetParam().model, GetParam().model.find("dropout") != std::string::npos);
}

std::vector<BlockGradCase> block_cases() {
  std::vector<BlockGradCase> out;
  for (const char* pos : {"pre", "post", "double", "output"})
    for (const char* norm : {"rmsnorm", "layernorm"})
      out.push_back({std::string("parallel_") + pos + "_" + norm,
                     std::string("block = \"parallel\"\nnorm_position = \"") + pos + "\"\nnorm = \"" + norm + "\"\n"});
  out.push_back({"parallel_pre_mlp_gqa",
                 "block = \"parallel\"\nffn = { type = \"mlp\", activation = \"silu\", d_ff = 16 }\n"
                 "n_heads = 4\nn_kv_heads = 2\nd_head = 3\n"});
  out.push_back(
      {"parallel_double_dropout", "block = \"parallel\"\nnorm_position = \"double\"\ndropout_residual = 0.3\n"});
  out.push_back({"parallel_pre_no_norm_tied", "block = \"parallel\"\nnorm = \"none\"\ntie_embeddings = true\n"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Blocks, BlockGradCheck, ::testing::ValuesIn(block_cases()),
                         [](const auto& tp) { return tp.param.name; });

class PerBranchGradCheck : public ::testing::TestWithParam<BlockGradCase> {};

TEST_P(PerBranchGradCheck, EveryParameterMatchesFiniteDifferences) {
  test::expect_gradients_match(GetParam().model, GetParam().model.find("dropout") != std::string::npos,
                               /*jitter=*/true);
}

std::vector<BlockGradCase> per_branch_cases() {
  std::vector<BlockGradCase> out;
  for (const char* pos : {"pre", "post", "double", "output"})
    out.push_back({std::string("per_branch_") + pos + "_layernorm",
                   std::string("block = { type = \"parallel\", norms = \"per_branch\" }\nnorm_position = \"") + pos +
                       "\"\nnorm = \"layernorm\"\n"});
  out.push_back({"per_branch_pre_rmsnorm_dropout",
                 "block = { type = \"parallel\", norms = \"per_branch\" }\nnorm = \"rmsnorm\"\n"
                 "dropout_residual = 0.3\n"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Blocks, PerBranchGradCheck, ::testing::ValuesIn(per_branch_cases()),
                         [](const auto& tp) { return tp.param.name; });

class RealModelGradCheck : public ::testing::TestWithParam<BlockGradCase> {};

TEST_P(RealModelGradCheck, EveryParameterMatchesFiniteDifferences) {
  test::expect_gradients_match(GetParam().model, false, /*jitter=*/true);
}

std::vector<BlockGradCase> real_model_cases() {
  std::vector<BlockGradCase> out;
  for (const char* pos : {"pre", "post", "double", "output"})
    out.push_back(
        {std::string("unit_offset_rmsnorm_") + pos,
         std::string("norm_position = \"") + pos + "\"\nnorm = { type = \"rmsnorm\", unit_offset = true }\n"});
  out.push_back({"unit_offset_layernorm_parallel",
                 "block = \"parallel\"\nnorm = { type = \"layernorm\", unit_offset = true }\n"});
  out.push_back({"gemma2_like",
                 "d_model = 12\nn_heads = 2\nn_kv_heads = 1\nd_head = 8\ntie_embeddings = true\n"
                 "norm_position = \"double\"\nnorm = { type = \"rmsnorm\", unit_offset = true }\n"
                 "embedding = { type = \"token\", scale = \"sqrt_d_model\" }\n"
                 "attention = { type = \"causal\", query_pre_attn_scalar = 6.0, softcap = 2.0, window = 2, "
                 "pattern = \"LG\" }\n"
                 "ffn = { type = \"geglu\", activation = \"gelu_tanh\", d_ff = 16 }\n"
                 "head = { type = \"lm_head\", softcap = 3.0 }\n"});
  out.push_back({"gpt_neox_like",
                 "d_model = 16\nn_heads = 2\nblock = { type = \"parallel\", norms = \"per_branch\" }\n"
                 "norm = \"layernorm\"\nposition = { type = \"rope\", rotary_fraction = 0.25 }\n"
                 "attention = { type = \"causal\", bias = \"all\" }\n"
                 "ffn = { type = \"mlp\", activation = \"gelu\", d_ff = 24, bias = true }\n"});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Blocks, RealModelGradCheck, ::testing::ValuesIn(real_model_cases()),
                         [](const auto& tp) { return tp.param.name; });

}  // namespace
}  // namespace gradcheck_blocks_test
}  // namespace bench
