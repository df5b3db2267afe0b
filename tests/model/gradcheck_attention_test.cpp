// Whole-model float64 gradient checks of the attention options: local/global pattern, QK-norm
// (RMSNorm, LayerNorm with and without bias) with and without RoPE, attention-probability
// dropout (training-mode differences, so the masks match), MQA and GQA, combined with the
// window and soft-cap; linear biases (q/k/v only, and all) and the full-width QK-norm, with the
// gains and biases moved off their init; Gemma 2's query_pre_attn_scalar (with soft-capping and
// GQA). Every parameter (the QK-norm gains and biases included) against central differences of
// the objective.
#include <ostream>

#include "support/gradcheck.h"

namespace bench {
namespace gradcheck_attention_test {
namespace {

struct GradCase {
  std::string name;
  friend void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }
  std::string model;  // extra [model] lines
};

class AttentionGradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(AttentionGradCheck, EveryParameterMatchesFiniteDifferences) {
  test::expect_gradients_match(GetParam().model, GetParam().model.find("dropout") != std::string::npos);
}

std::vector<GradCase> cases() {
  return {
      {"pattern_local_global", "attention = { type = \"causal\", window = 2, pattern = \"LG\" }\n"},
      {"pattern_global_local_softcap",
       "attention = { type = \"causal\", window = 3, pattern = \"GL\", softcap = 1.5 }\n"},
      {"qk_rmsnorm", "attention = { type = \"causal\", qk_norm = \"rmsnorm\" }\n"},
      {"qk_layernorm", "attention = { type = \"causal\", qk_norm = \"layernorm\" }\n"},
      {"qk_layernorm_bias_interleaved",
       "attention = { type = \"causal\", qk_norm = \"layernorm\", qk_norm_bias = true }\n"
       "position = { type = \"rope\", layout = \"interleaved\" }\n"},
      {"qk_rmsnorm_bias_nope_softcap",
       "attention = { type = \"causal\", qk_norm = \"rmsnorm\", qk_norm_bias = true, softcap = 2.0 }\n"
       "position = \"none\"\n"},
      {"mqa_qk_rmsnorm_window",
       "n_kv_heads = 1\nattention = { type = \"causal\", qk_norm = \"rmsnorm\", window = 2 }\n"},
      {"gqa_qk_layernorm",
       "n_heads = 4\nn_kv_heads = 2\nd_head = 4\nattention = { type = \"causal\", qk_norm = \"layernorm\" }\n"},
      {"mqa", "n_heads = 4\nn_kv_heads = 1\nd_head = 4\n"},
      {"attention_dropout", "dropout_attention = 0.3\n"},
      {"attention_dropout_gqa_pattern_qk_norm",
       "n_heads = 4\nn_kv_heads = 2\nd_head = 4\ndropout_attention = 0.5\n"
       "attention = { type = \"causal\", window = 2, pattern = \"GL\", qk_norm = \"rmsnorm\", softcap = 3.0 }\n"},
      {"query_pre_attn_scalar", "attention = { type = \"causal\", query_pre_attn_scalar = 9.0 }\n"},
      {"query_pre_attn_scalar_gqa_softcap_pattern",
       "n_heads = 4\nn_kv_heads = 2\nd_head = 4\n"
       "attention = { type = \"causal\", query_pre_attn_scalar = 0.7, softcap = 2.0, window = 2, pattern = \"LG\" }\n"},
  };
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionGradCheck, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return tp.param.name; });

// The device's compositions, run by the emulated device in float64: the materializing core's
// (batched products over (batch, kv head), one softmax and one dropout for all rows) and the fused
// core's (kernels/attention_fused.h: one program per query row forward; per query row and per key
// row backward), which auto takes there: MHA with a local/global pattern and a cap, GQA with
// QK-norm, MQA, and dropout with GQA and a cap.
TEST(AttentionGradCheckOnTheEmulatedDevice, EveryParameterMatchesFiniteDifferences) {
  for (const char* core : {"materializing", "fused"}) {
    for (std::string lines :
         {std::string("attention = { type = \"causal\", window = 3, pattern = \"GL\", softcap = 1.5 }\n"),
          std::string(
              "n_heads = 4\nn_kv_heads = 2\nd_head = 4\nattention = { type = \"causal\", qk_norm = \"layernorm\" }\n"),
          std::string("n_heads = 4\nn_kv_heads = 1\nd_head = 4\nattention = { type = \"causal\" }\n"),
          std::string("n_heads = 4\nn_kv_heads = 2\nd_head = 4\ndropout_attention = 0.5\n"
                      "attention = { type = \"causal\", softcap = 3.0 }\n")}) {
      const std::string table = "attention = { type = \"causal\"";
      lines.replace(lines.find(table), table.size(), table + ", core = \"" + core + "\"");
      SCOPED_TRACE(lines);
      EXPECT_GT(test::expect_gradients_match(lines, lines.find("dropout") != std::string::npos, false,
                                             tile::Backend::kEmulated),
                0);
    }
  }
}

// Linear biases and the full-width QK-norm, gains and biases jittered off 1 and 0.
class AttentionBiasGradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(AttentionBiasGradCheck, EveryParameterMatchesFiniteDifferences) {
  test::expect_gradients_match(GetParam().model, false, /*jitter=*/true);
}

std::vector<GradCase> bias_cases() {
  return {
      {"bias_qkv", "attention = { type = \"causal\", bias = \"qkv\" }\n"},
      {"bias_all_gqa_rope",
       "n_heads = 4\nn_kv_heads = 2\nd_head = 4\nposition = \"rope\"\n"
       "attention = { type = \"causal\", bias = \"all\" }\n"},
      {"qk_full_rmsnorm", "attention = { type = \"causal\", qk_norm = \"rmsnorm\", qk_norm_scope = \"full\" }\n"},
      {"qk_full_layernorm_bias_gqa_rope_bias_all",
       "n_heads = 4\nn_kv_heads = 2\nd_head = 4\nposition = \"rope\"\n"
       "attention = { type = \"causal\", qk_norm = \"layernorm\", qk_norm_bias = true, qk_norm_scope = \"full\", "
       "bias = \"all\" }\n"},
      {"qk_full_rmsnorm_mqa_bias_qkv_softcap",
       "n_heads = 4\nn_kv_heads = 1\nd_head = 4\n"
       "attention = { type = \"causal\", qk_norm = \"rmsnorm\", qk_norm_scope = \"full\", bias = \"qkv\", "
       "softcap = 2.0 }\n"},
  };
}

INSTANTIATE_TEST_SUITE_P(Attention, AttentionBiasGradCheck, ::testing::ValuesIn(bias_cases()),
                         [](const auto& tp) { return tp.param.name; });

}  // namespace
}  // namespace gradcheck_attention_test
}  // namespace bench
