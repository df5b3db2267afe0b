// Whole-model float64 gradient checks of the parallel block under every norm position and norm
// type, with a plain MLP, and with residual dropout (the one mask on the sum of the branches);
// and with a norm position per branch (GPT-NeoX), gains and biases jittered off their init.
#include "support/gradcheck.h"

namespace bench {
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

}  // namespace
}  // namespace bench
