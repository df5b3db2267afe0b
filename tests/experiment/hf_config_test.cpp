// Hugging Face config.json as a model: the fields read into our keys, TOML keys over them, and
// every unsupported field an error at its line.
#include "experiment/hf_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "experiment/diagnostics.h"
#include "experiment/resolve.h"
#include "support/toml_case.h"

namespace bench {
namespace {

/// Writes `json` as DIR/config.json under the temp directory; returns DIR.
std::string hf_dir(const std::string& name, const std::string& json) {
  const std::filesystem::path dir = std::filesystem::path(test::write_temp(name + ".keep", "")).parent_path() / name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << json;
  return dir.string();
}

const char* kQwen = R"({
  "architectures": ["Qwen2ForCausalLM"],
  "hidden_act": "silu",
  "hidden_size": 896,
  "intermediate_size": 4864,
  "max_position_embeddings": 32768,
  "max_window_layers": 24,
  "model_type": "qwen2",
  "num_attention_heads": 14,
  "num_hidden_layers": 24,
  "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "sliding_window": 32768,
  "tie_word_embeddings": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

TEST(HfConfig, QwenReadsIntoOurKeys) {
  const ResolvedCase rc = test::resolve_first("[model]\nfrom = \"" + hf_dir("hf_qwen", kQwen) + "\"\n[throughput]\n");
  const ModelSpec& m = rc.model;
  EXPECT_EQ(m.dims.d_model, 896);
  EXPECT_EQ(m.dims.n_layers, 24);
  EXPECT_EQ(m.dims.n_heads, 14);
  EXPECT_EQ(m.dims.n_kv_heads, 2);
  EXPECT_EQ(m.dims.d_head, 64);
  EXPECT_EQ(m.dims.vocab_size, 151936);
  EXPECT_EQ(m.dims.seq_len, 32768);
  EXPECT_TRUE(m.dims.tie_embeddings);
  EXPECT_EQ(m.weight_names, "llama");
  EXPECT_EQ(m.slot(Slot::kNormPosition).info->name, "pre");
  EXPECT_EQ(m.slot(Slot::kNorm).info->name, "rmsnorm");
  EXPECT_DOUBLE_EQ(m.slot(Slot::kNorm).params.number("eps"), 1e-6);
  EXPECT_EQ(m.slot(Slot::kAttention).params.string("bias"), "qkv");
  EXPECT_DOUBLE_EQ(m.slot(Slot::kPosition).params.number("base"), 1e6);
  EXPECT_EQ(m.slot(Slot::kPosition).params.string("layout"), "half");
  EXPECT_EQ(m.slot(Slot::kFfn).info->name, "swiglu");
  EXPECT_EQ(m.slot(Slot::kFfn).params.integer("d_ff"), 4864);
}

// "Qwen2.5-0.5B with post-norm" is one file: the TOML's keys go over the configuration's; a slot
// table without a type changes the configuration's options, a slot naming its component replaces it.
TEST(HfConfig, TomlKeysOverrideTheConfig) {
  const std::string dir = hf_dir("hf_qwen_override", kQwen);
  const ResolvedCase rc = test::resolve_first("[model]\nfrom = \"" + dir +
                                              "/config.json\"\nnorm_position = \"post\"\nn_layers = 2\nseq_len = "
                                              "64\nattention = {window = 16}\nnorm = {eps = 1e-5}\n[throughput]\n");
  EXPECT_EQ(rc.model.slot(Slot::kNormPosition).info->name, "post");
  EXPECT_EQ(rc.model.dims.n_layers, 2);
  EXPECT_EQ(rc.model.dims.seq_len, 64);
  EXPECT_EQ(rc.model.dims.n_kv_heads, 2);                                   // kept
  EXPECT_EQ(rc.model.slot(Slot::kAttention).params.string("bias"), "qkv");  // kept
  EXPECT_EQ(rc.model.slot(Slot::kAttention).params.integer("window"), 16);  // added
  EXPECT_EQ(rc.model.slot(Slot::kNorm).info->name, "rmsnorm");
  EXPECT_DOUBLE_EQ(rc.model.slot(Slot::kNorm).params.number("eps"), 1e-5);  // changed
  const ResolvedCase ln = test::resolve_first("[model]\nfrom = \"" + dir + "\"\nnorm = \"layernorm\"\n[throughput]\n");
  EXPECT_EQ(ln.model.slot(Slot::kNorm).info->name, "layernorm");
  EXPECT_DOUBLE_EQ(ln.model.slot(Slot::kNorm).params.number("eps"), 1e-5);  // layernorm's default, not Qwen's
  const ResolvedCase plain =
      test::resolve_first("[model]\nfrom = \"" + dir + "\"\nposition = {type = \"rope\"}\n[throughput]\n");
  EXPECT_DOUBLE_EQ(plain.model.slot(Slot::kPosition).params.number("base"), 10000.0);  // replaced: rope's default
  EXPECT_EQ(plain.model.slot(Slot::kAttention).params.string("bias"), "qkv");          // other slots kept
}

// Every field that is not read is an error naming it at its line, all in one pass; so is a
// value that bench cannot reproduce.
TEST(HfConfig, UnsupportedFieldsAreErrorsAtTheirLine) {
  const std::string dir = hf_dir("hf_bad", R"({
  "model_type": "llama",
  "hidden_size": 64,
  "num_hidden_layers": 2,
  "num_attention_heads": 4,
  "intermediate_size": 128,
  "vocab_size": 300,
  "quantization_config": {"bits": 4},
  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "mystery": 1},
  "hidden_act": "gelu"
})");
  try {
    read_hf_config(dir);
    FAIL() << "expected errors";
  } catch (const ConfigErrors& e) {
    std::string all;
    for (const ConfigError& x : e.all()) all += std::string(x.what()) + "\n";
    EXPECT_EQ(e.all().size(), 3u) << all;
    const std::string file = dir + "/config.json";
    EXPECT_NE(
        all.find(file + ":8:3: field 'quantization_config' ({\"bits\":4}) of model_type 'llama' is not supported"),
        std::string::npos)
        << all;
    EXPECT_NE(all.find(file + ":9:3: field 'rope_scaling.mystery' (1) is not supported"), std::string::npos) << all;
    EXPECT_NE(all.find(file + ":10:3: field 'hidden_act' = \"gelu\" is not supported"), std::string::npos) << all;
  }
  const std::string falcon = hf_dir("hf_falcon40", R"({
  "model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
  "vocab_size": 300, "new_decoder_architecture": true, "alibi": true
})");
  try {
    read_hf_config(falcon);
    FAIL() << "expected errors";
  } catch (const ConfigErrors& e) {
    ASSERT_EQ(e.all().size(), 2u);
    EXPECT_NE(std::string(e.all()[0].what()).find("field 'new_decoder_architecture' = true is not supported"),
              std::string::npos)
        << e.all()[0].what();
    EXPECT_NE(std::string(e.all()[1].what()).find("field 'alibi' = true is not supported (ALiBi positions)"),
              std::string::npos);
  }
  const std::string bert = hf_dir("hf_bert", "{\n  \"model_type\": \"bert\"\n}\n");
  EXPECT_THROW(
      {
        try {
          read_hf_config(bert);
        } catch (const ConfigError& e) {
          EXPECT_NE(std::string(e.what()).find("config.json:2:3: model_type 'bert' is not supported"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      ConfigError);
}

TEST(HfConfig, ScalingsAndArchitectureOptionsMap) {
  const std::string llama = hf_dir("hf_llama31", R"({
  "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 64,
  "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 32, "rope_type": "llama3"}
})");
  const ResolvedCase rc = test::resolve_first("[model]\nfrom = \"" + llama + "\"\n[throughput]\n");
  const Params& rope = rc.model.slot(Slot::kPosition).params;
  EXPECT_EQ(rope.string("scaling"), "llama3");
  EXPECT_EQ(rope.string("apply"), "always");
  EXPECT_DOUBLE_EQ(rope.number("factor"), 8.0);
  EXPECT_EQ(rope.integer("original_max_position"), 32);
  EXPECT_DOUBLE_EQ(rope.number("high_freq_factor"), 4.0);
  const std::string neox = hf_dir("hf_neox", R"({
  "model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 256, "vocab_size": 300, "rotary_pct": 0.25, "rotary_emb_base": 10000,
  "layer_norm_eps": 1e-5, "use_parallel_residual": true, "hidden_act": "gelu"
})");
  const ResolvedCase n = test::resolve_first("[model]\nfrom = \"" + neox + "\"\n[throughput]\n");
  EXPECT_EQ(n.model.weight_names, "gpt_neox");
  EXPECT_EQ(n.model.slot(Slot::kBlock).info->name, "parallel");
  EXPECT_EQ(n.model.slot(Slot::kBlock).params.string("norms"), "per_branch");
  EXPECT_DOUBLE_EQ(n.model.slot(Slot::kPosition).params.number("rotary_fraction"), 0.25);
  EXPECT_EQ(n.model.slot(Slot::kAttention).params.string("bias"), "all");
  EXPECT_TRUE(n.model.slot(Slot::kFfn).params.boolean("bias"));
  EXPECT_EQ(n.model.slot(Slot::kFfn).params.string("activation"), "gelu");
}

TEST(HfConfig, AMissingConfigIsAnErrorAtFrom) {
  try {
    test::resolve_first("[model]\nfrom = \"/nonexistent/model\"\n[throughput]\n");
    FAIL() << "expected an error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(":2:1: model.from: '/nonexistent/model' is neither a Hugging Face "
                                         "config.json nor a directory holding one"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace bench
