// Hugging Face config.json as a model: the fields read into our keys, TOML keys over them, and
// every unsupported field an error at its line.
#include "experiment/hf_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numbers>

#include "experiment/diagnostics.h"
#include "experiment/resolve.h"
#include "kernels/activation.h"
#include "support/toml_case.h"

namespace bench {
namespace hf_config_test {
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

/// The [model] of `json` resolved (a throughput case: the model alone).
ModelSpec model_of(const std::string& name, const std::string& json) {
  return test::resolve_first("[model]\nfrom = \"" + hf_dir(name, json) + "\"\n[throughput]\n").model;
}

/// All error lines of reading `json`, or "" when it reads.
std::string errors_of(const std::string& name, const std::string& json) {
  try {
    read_hf_config(hf_dir(name, json));
  } catch (const ConfigErrors& e) {
    std::string all;
    for (const ConfigError& x : e.all()) all += std::string(x.what()) + "\n";
    return all;
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

const char* kTinyMistral = R"({
  "model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 8192)";

// null means what transformers makes of it, field by field; absent is the class's default.
TEST(HfConfig, NullFieldsMeanWhatTransformersMakesOfThem) {
  // Mistral 7B v0.3 and Mistral Nemo: "sliding_window": null is no window, "head_dim": null is
  // hidden_size / heads; absent, MistralConfig's window is 4096.
  const ModelSpec null_window = model_of("hf_null_window", std::string(kTinyMistral) +
                                                               ", \"sliding_window\": null, \"head_dim\": null, "
                                                               "\"rope_scaling\": null, \"bos_token_id\": null}");
  EXPECT_EQ(null_window.slot(Slot::kAttention).params.integer("window"), 0);
  EXPECT_FALSE(null_window.slot(Slot::kAttention).params.given("window"));
  EXPECT_EQ(null_window.dims.d_head, 16);
  EXPECT_EQ(null_window.slot(Slot::kPosition).params.string("scaling"), "none");
  const ModelSpec absent = model_of("hf_absent_window", std::string(kTinyMistral) + "}");
  EXPECT_EQ(absent.slot(Slot::kAttention).params.integer("window"), 4096);
  const ModelSpec given = model_of("hf_given_window", std::string(kTinyMistral) + ", \"sliding_window\": 512}");
  EXPECT_EQ(given.slot(Slot::kAttention).params.integer("window"), 512);
  // Phi-3: null and absent are both no window (Phi3Config's default is None).
  const std::string phi = R"({
  "model_type": "phi3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 64)";
  EXPECT_FALSE(
      model_of("hf_phi_null", phi + ", \"sliding_window\": null}").slot(Slot::kAttention).params.given("window"));
  EXPECT_FALSE(model_of("hf_phi_absent", phi + "}").slot(Slot::kAttention).params.given("window"));
  // Gemma 2: null soft-caps are none; absent, Gemma2Config's 50 and 30 and window 4096.
  const std::string gemma2 = R"({
  "model_type": "gemma2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 16,
  "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 64)";
  const ModelSpec caps_null =
      model_of("hf_gemma2_null", gemma2 +
                                     ", \"attn_logit_softcapping\": null, "
                                     "\"final_logit_softcapping\": null, \"sliding_window\": null}");
  EXPECT_FALSE(caps_null.slot(Slot::kAttention).params.given("softcap"));
  EXPECT_FALSE(caps_null.slot(Slot::kHead).params.given("softcap"));
  EXPECT_FALSE(caps_null.slot(Slot::kAttention).params.given("window"));
  const ModelSpec caps_absent = model_of("hf_gemma2_absent", gemma2 + "}");
  EXPECT_DOUBLE_EQ(caps_absent.slot(Slot::kAttention).params.number("softcap"), 50.0);
  EXPECT_DOUBLE_EQ(caps_absent.slot(Slot::kHead).params.number("softcap"), 30.0);
  EXPECT_EQ(caps_absent.slot(Slot::kAttention).params.integer("window"), 4096);
  EXPECT_EQ(caps_absent.slot(Slot::kAttention).params.string("pattern"), "LG");
  // Gemma's head_dim: absent is GemmaConfig's 256.
  EXPECT_EQ(model_of("hf_gemma2_head", R"({
  "model_type": "gemma2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 64})")
                .dims.d_head,
            256);
  // A null field no model type reads is a feature transformers does not use either.
  EXPECT_EQ(errors_of("hf_null_unknown", std::string(kTinyMistral) + ", \"quantization_config\": null}"), "");
  EXPECT_NE(errors_of("hf_unknown", std::string(kTinyMistral) + ", \"quantization_config\": {}}")
                .find("field 'quantization_config' ({}) of model_type 'mistral' is not supported"),
            std::string::npos);
}

// Phi-3's LongRoPE: the attention factor at every length, as transformers applies it
// (apply = "always"); the factors still follow the length.
TEST(HfConfig, LongRopeAppliesItsAttentionFactorAtEveryLength) {
  const ModelSpec m = model_of("hf_longrope", R"({
  "model_type": "phi3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 256,
  "original_max_position_embeddings": 64,
  "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1, 1, 1, 1, 1],
                   "long_factor": [1, 2, 3, 4, 5, 6, 7, 8]}})");
  const Params& rope = m.slot(Slot::kPosition).params;
  EXPECT_EQ(rope.string("scaling"), "longrope");
  EXPECT_EQ(rope.string("apply"), "always");
  EXPECT_DOUBLE_EQ(rope.number("factor"), 4.0);
  EXPECT_EQ(rope.integer("original_max_position"), 64);
}

TEST(HfConfig, Gpt2GemmaAndOlmoReadIntoOurKeys) {
  const std::string root = std::string(BENCH_SOURCE_DIR) + "/tests/accounting/hf/";
  const ModelSpec gpt2 = test::resolve_first("[model]\nfrom = \"" + root + "gpt2\"\n[throughput]\n").model;
  EXPECT_EQ(gpt2.weight_names, "gpt2");
  EXPECT_EQ(gpt2.dims.d_model, 768);
  EXPECT_EQ(gpt2.dims.n_heads, 12);
  EXPECT_EQ(gpt2.dims.seq_len, 1024);
  EXPECT_EQ(gpt2.dims.vocab_size, 50257);
  EXPECT_TRUE(gpt2.dims.tie_embeddings);
  EXPECT_DOUBLE_EQ(gpt2.dims.dropout_residual, 0.1);
  EXPECT_EQ(gpt2.slot(Slot::kNormPosition).info->name, "pre");
  EXPECT_EQ(gpt2.slot(Slot::kNorm).info->name, "layernorm");
  EXPECT_TRUE(gpt2.slot(Slot::kNorm).params.boolean("bias"));
  EXPECT_DOUBLE_EQ(gpt2.slot(Slot::kNorm).params.number("eps"), 1e-5);
  EXPECT_EQ(gpt2.slot(Slot::kPosition).info->name, "learned");
  EXPECT_EQ(gpt2.slot(Slot::kAttention).params.string("bias"), "all");
  EXPECT_EQ(gpt2.slot(Slot::kFfn).info->name, "mlp");
  EXPECT_EQ(gpt2.slot(Slot::kFfn).params.string("activation"), "gelu_tanh");  // gelu_new
  EXPECT_EQ(gpt2.slot(Slot::kFfn).params.integer("d_ff"), 3072);              // n_inner absent: 4 n_embd
  EXPECT_TRUE(gpt2.slot(Slot::kFfn).params.boolean("bias"));

  const ModelSpec gemma = test::resolve_first("[model]\nfrom = \"" + root + "gemma-2b\"\n[throughput]\n").model;
  EXPECT_EQ(gemma.weight_names, "llama");
  EXPECT_EQ(gemma.dims.d_head, 256);
  EXPECT_EQ(gemma.dims.n_kv_heads, 1);
  EXPECT_TRUE(gemma.dims.tie_embeddings);
  EXPECT_EQ(gemma.slot(Slot::kNormPosition).info->name, "pre");
  EXPECT_TRUE(gemma.slot(Slot::kNorm).params.boolean("unit_offset"));
  EXPECT_EQ(gemma.slot(Slot::kEmbedding).params.string("scale"), "sqrt_d_model");
  EXPECT_EQ(gemma.slot(Slot::kFfn).info->name, "geglu");
  // hidden_act "gelu" is ignored, as transformers ignores it: hidden_activation absent is the tanh form.
  EXPECT_EQ(gemma.slot(Slot::kFfn).params.string("activation"), "gelu_tanh");
  EXPECT_FALSE(gemma.slot(Slot::kAttention).params.given("softcap"));
  EXPECT_FALSE(gemma.slot(Slot::kAttention).params.given("window"));

  const ModelSpec olmo = test::resolve_first("[model]\nfrom = \"" + root + "OLMo-1B-hf\"\n[throughput]\n").model;
  EXPECT_EQ(olmo.weight_names, "llama");
  EXPECT_EQ(olmo.slot(Slot::kNorm).info->name, "layernorm");
  EXPECT_FALSE(olmo.slot(Slot::kNorm).params.boolean("weight"));
  EXPECT_FALSE(olmo.slot(Slot::kNorm).params.boolean("bias"));
  EXPECT_DOUBLE_EQ(olmo.slot(Slot::kNorm).params.number("eps"), 1e-5);
  EXPECT_EQ(olmo.slot(Slot::kFfn).info->name, "swiglu");
  EXPECT_TRUE(olmo.dims.tie_embeddings);
  // clip_qkv: null (OLMo-1B-hf) is no clipping; a number is the attention's clip_qkv; 0 or less
  // is refused at its line.
  EXPECT_DOUBLE_EQ(olmo.slot(Slot::kAttention).params.number("clip_qkv"), 0.0);
  const std::string clip_dir = hf_dir("hf_olmo_clip_ok", R"({
  "model_type": "olmo", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 128, "vocab_size": 300, "clip_qkv": 8.0
})");
  const ModelSpec clipped = test::resolve_first("[model]\nfrom = \"" + clip_dir + "\"\n[throughput]\n").model;
  EXPECT_DOUBLE_EQ(clipped.slot(Slot::kAttention).params.number("clip_qkv"), 8.0);
  EXPECT_NE(errors_of("hf_olmo_clip", R"({
  "model_type": "olmo", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 128, "vocab_size": 300,
  "clip_qkv": 0
})")
                .find("config.json:4:3: field 'clip_qkv' = 0 must be > 0 (or null: no clipping)"),
            std::string::npos);
  // Another type is one error, the type's.
  const std::string typed = errors_of("hf_olmo_clip_type", R"({
  "model_type": "olmo", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 128, "vocab_size": 300,
  "clip_qkv": "8"
})");
  EXPECT_NE(typed.find("config.json:4:3: field 'clip_qkv' must be a number, found \"8\""), std::string::npos) << typed;
  EXPECT_EQ(typed.find("must be > 0"), std::string::npos) << typed;
  // GPT-2's variants bench does not reproduce are refused.
  const std::string bad = errors_of("hf_gpt2_bad", R"({
  "model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 300, "n_positions": 32,
  "scale_attn_by_inverse_layer_idx": true
})");
  EXPECT_NE(bad.find("config.json:3:3: field 'scale_attn_by_inverse_layer_idx' = true is not supported"),
            std::string::npos)
      << bad;
}

/// transformers' activation functions (activations.py), written out as there.
double transformers_activation(const std::string& name, double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  if (name == "gelu" || name == "gelu_python") return x * 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_accurate")
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * std::pow(x, 3.0))));
  if (name == "gelu_fast") return 0.5 * x * (1.0 + std::tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)));
  if (name == "quick_gelu") return x / (1.0 + std::exp(-1.702 * x));
  if (name == "silu" || name == "swish") return x / (1.0 + std::exp(-x));
  if (name == "relu") return std::max(x, 0.0);
  if (name == "relu2") return std::max(x, 0.0) * std::max(x, 0.0);
  ADD_FAILURE() << "no formula for " << name;
  return NAN;
}

// Every name of transformers' ACT2FN that is a function bench has reads as it, and computes
// transformers' formula; the others are refused with the list of accepted names.
TEST(HfConfig, EveryTransformersActivationNameComputesItsFormula) {
  const std::map<std::string, kernels::Activation> ours = {
      {"gelu", kernels::Activation::kGelu},   {"gelu_tanh", kernels::Activation::kGeluTanh},
      {"silu", kernels::Activation::kSilu},   {"relu", kernels::Activation::kRelu},
      {"relu2", kernels::Activation::kRelu2}, {"quick_gelu", kernels::Activation::kQuickGelu}};
  const std::vector<std::string> accepted = {
      "gelu", "gelu_python", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_accurate", "quick_gelu",
      "silu", "swish",       "relu",     "relu2"};
  for (const std::string& name : accepted) {
    SCOPED_TRACE(name);
    const ModelSpec m = model_of("hf_act_" + name, R"({
  "model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 300, "n_positions": 32,
  "activation_function": ")" + name + "\"}");
    const std::string act = m.slot(Slot::kFfn).params.string("activation");
    ASSERT_EQ(ours.count(act), 1u) << act;
    for (double x = -7.0; x <= 7.0; x += 0.25) {
      const double want = transformers_activation(name, x);
      EXPECT_NEAR(kernels::activation_reference(ours.at(act), x), want, 1e-10 * (1 + std::abs(want))) << x;
    }
  }
  for (const char* name : {"gelu_10", "laplace", "leaky_relu", "linear", "mish", "relu6", "sigmoid", "tanh", "prelu"}) {
    SCOPED_TRACE(name);
    const std::string err = errors_of(std::string("hf_act_bad_") + name, R"({
  "model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
  "intermediate_size": 256, "vocab_size": 300,
  "hidden_act": ")" + std::string(name) + "\"\n}");
    EXPECT_NE(err.find("config.json:4:3: field 'hidden_act' = \"" + std::string(name) +
                       "\" is not supported (bench reproduces gelu, gelu_python, gelu_new, gelu_fast, "
                       "gelu_pytorch_tanh, gelu_accurate, quick_gelu, silu, swish, relu, relu2;"),
              std::string::npos)
        << err;
  }
}

}  // namespace
}  // namespace hf_config_test
}  // namespace bench
