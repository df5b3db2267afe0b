// Accounting against published numbers: parameter counts of real models, the lecture's KV-cache
// example and ratios, and the analytic count against the model's own components.
#include "accounting/accounting.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/error.h"
#include "support/toml_case.h"

namespace bench::accounting {
namespace accounting_test {
namespace {

const Architecture& model(const char* name) {
  const Architecture* a = find_model(name);
  EXPECT_NE(a, nullptr) << name;
  return *a;
}

// Exact counts from the checkpoints (Hugging Face num_parameters() / safetensors totals).
TEST(RealModels, ParameterCountsMatchTheCheckpoints) {
  const std::pair<const char*, int64_t> exact[] = {
      {"GPT-2 XL", 1557611200},     {"T5 11B", 11307321344},    {"Llama 2 7B", 6738415616},
      {"Llama 2 70B", 68976648192}, {"Mistral 7B", 7241732096}, {"Llama 3 8B", 8030261248},
      {"Qwen2.5 7B", 7615616512},   {"Gemma 2 9B", 9241705984}, {"OLMo 2 7B", 7298617344},
  };
  for (const auto& [name, published] : exact) {
    EXPECT_EQ(count_params(model(name)), published) << name;
    EXPECT_EQ(model(name).published_params, published) << name;
  }
}

TEST(RealModels, Gpt3IsWithinTheRoundingOfItsPaper) {
  // The paper gives 175.0B; the architecture it describes counts 174.6B.
  const double n = static_cast<double>(count_params(model("GPT-3 175B")));
  EXPECT_NEAR(n / 175e9, 1.0, 0.005);
  EXPECT_LT(n, 175e9);
}

TEST(RealModels, TableHasTheLecturesModelsInOrder) {
  const char* names[] = {"GPT-2 XL",   "GPT-3 175B", "T5 11B",     "Llama 2 7B", "Llama 2 70B",
                         "Mistral 7B", "Llama 3 8B", "Qwen2.5 7B", "Gemma 2 9B", "OLMo 2 7B"};
  ASSERT_EQ(real_models().size(), std::size(names));
  for (size_t i = 0; i < std::size(names); ++i) EXPECT_EQ(real_models()[i].name, names[i]);
}

TEST(RealModels, NamesMatchLoosely) {
  EXPECT_EQ(find_model("llama-2-70b"), find_model("Llama 2 70B"));
  EXPECT_EQ(find_model("gpt2-xl")->name, "GPT-2 XL");
  EXPECT_EQ(find_model("qwen2.5-7b")->name, "Qwen2.5 7B");
  EXPECT_EQ(find_model("llama 4"), nullptr);
}

TEST(KvCache, LecturesLlama2_70bExample) {
  // bf16: 2 x 80 layers x 8 KV heads x 128 x 2 bytes = 327,680 bytes (0.33 MB) per token; with
  // MHA (64 KV heads) 2,621,440 bytes (2.6 MB).
  const Accounts a = account(model("Llama 2 70B"), 4096, 1, 2.0);
  EXPECT_DOUBLE_EQ(a.kv_bytes_per_token, 327680.0);
  EXPECT_DOUBLE_EQ(a.kv_bytes_per_token_mha, 2621440.0);
  EXPECT_NEAR(a.kv_bytes_per_token / 1e6, 0.33, 0.005);
  EXPECT_NEAR(a.kv_bytes_per_token_mha / 1e6, 2.6, 0.05);
  EXPECT_DOUBLE_EQ(a.kv_bytes_total, 327680.0 * 4096);
  // Batch and element size scale it linearly.
  EXPECT_DOUBLE_EQ(account(model("Llama 2 70B"), 4096, 8, 1.0).kv_bytes_total, 327680.0 * 4096 * 8 / 2);
}

TEST(KvCache, SlidingWindowLayersHoldOnlyTheWindow) {
  // Gemma 2 9B: 21 of 42 layers attend within 4096 tokens; at 8192 tokens they hold 4096.
  const Architecture& g = model("Gemma 2 9B");
  const Accounts a = account(g, 8192, 1, 2.0);
  const double per_layer = 2.0 * 8 * 256 * 2;
  EXPECT_DOUBLE_EQ(a.kv_bytes_per_token, 42 * per_layer);
  EXPECT_DOUBLE_EQ(a.kv_bytes_total, per_layer * (21 * 8192 + 21 * 4096));
  EXPECT_DOUBLE_EQ(account(g, 4096, 1, 2.0).kv_bytes_total, 42 * per_layer * 4096);
}

TEST(Ratios, LecturesTable) {
  EXPECT_NEAR(account(model("Llama 2 7B"), 0, 1, 2).ffn_ratio, 2.69, 0.005);
  EXPECT_NEAR(account(model("GPT-3 175B"), 0, 1, 2).ffn_ratio, 4.0, 1e-12);
  EXPECT_NEAR(account(model("T5 11B"), 0, 1, 2).ffn_ratio, 64.0, 1e-12);
  EXPECT_NEAR(account(model("GPT-2 XL"), 0, 1, 2).aspect_ratio, 33.3, 0.05);
  EXPECT_NEAR(account(model("T5 11B"), 0, 1, 2).aspect_ratio, 42.7, 0.05);
  EXPECT_NEAR(account(model("Llama 2 70B"), 0, 1, 2).aspect_ratio, 102.4, 1e-9);
  EXPECT_NEAR(account(model("T5 11B"), 0, 1, 2).head_ratio, 16.0, 1e-12);
  EXPECT_NEAR(account(model("Gemma 2 9B"), 0, 1, 2).head_ratio, 1.14, 0.005);
  EXPECT_NEAR(account(model("Llama 2 7B"), 0, 1, 2).head_ratio, 1.0, 1e-12);
  EXPECT_NEAR(account(model("Qwen2.5 7B"), 0, 1, 2).query_per_kv_head, 7.0, 1e-12);
}

TEST(Flops, SixNPlusTheAttentionTerm) {
  // Llama 2 7B at 4096 tokens: N = non-embedding parameters (the untied head is among them).
  const Architecture& l = model("Llama 2 7B");
  const Accounts a = account(l, 4096, 1, 2);
  const double n = 6738415616.0 - 32000.0 * 4096;
  EXPECT_DOUBLE_EQ(a.n_matmul, n);
  EXPECT_DOUBLE_EQ(a.flops_train_per_token, 6 * n + 6.0 * 32 * 4096 * 4096);
  EXPECT_DOUBLE_EQ(a.flops_forward_per_token * 3, a.flops_train_per_token);
  // Tied embeddings: the output projection still costs 2 V d per token forward.
  const Architecture& g = model("GPT-2 XL");
  const Accounts b = account(g, 1024, 1, 2);
  EXPECT_DOUBLE_EQ(b.n_matmul, static_cast<double>(b.params_non_embedding) + 50257.0 * 1600);
  EXPECT_EQ(b.params_embedding, (50257 + 1024) * 1600);
}

const char* kLlamaLike =
    "name = \"llama_like\"\n"
    "[model]\nd_model = 64\nn_layers = 3\nn_heads = 4\nn_kv_heads = 2\nseq_len = 32\nbatch_size = 2\n"
    "norm_position = \"pre\"\nnorm = \"rmsnorm\"\nposition = \"rope\"\nattention = \"causal\"\nffn = \"swiglu\"\n"
    "[data]\ntype = \"synthetic\"\nreference_tokens = 4096\n"
    "[throughput]\nmodes = [\"forward\"]\n"
    "[stability]\nsteps = 10\nlr = [1e-3, 1e-2]\n";

TEST(ConfigAccounts, CountsFromTheComponentsAgreeWithTheFormula) {
  const std::string path = test::write_temp("llama_like.toml", kLlamaLike);
  const auto models = config_accounts(path, "cpu", 0, 0, 2.0);
  // One model: the throughput case and both learning rates build the same one.
  ASSERT_EQ(models.size(), 1u);
  const ConfigAccounts& m = models[0];
  EXPECT_EQ(m.ordinals, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(m.shape.d_ff, 192);  // 8/3 x 64 = 170.7, rounded up to a multiple of 32
  // The same architecture counted by the formula: Llama layout (RMSNorm, SwiGLU, no biases, untied).
  Architecture a = m.shape;
  a.gated_ffn = true;
  a.norm = NormKind::kRmsNorm;
  EXPECT_EQ(m.accounts.params, count_params(a));
  EXPECT_EQ(m.accounts.params_embedding, 256 * 64);
  EXPECT_DOUBLE_EQ(m.accounts.kv_bytes_per_token, 2.0 * 3 * 2 * 16 * 2);
  EXPECT_DOUBLE_EQ(m.accounts.kv_bytes_total, m.accounts.kv_bytes_per_token * 32 * 2);
  // The components' declared FLOPs are close to 6N + 6 L T d_attn (they add element-wise work
  // and count (T+1)/2 keys per query).
  EXPECT_NEAR(m.flops_declared_train_per_token / m.accounts.flops_train_per_token, 1.0, 0.1);
  EXPECT_NEAR(m.flops_declared_forward_per_token * 3 / m.flops_declared_train_per_token, 1.0, 0.05);
}

// A vocabulary that is not a multiple of 64: the model stores the head padded (1000 -> 1024 rows),
// but the counts and N are the real vocabulary's, untied and tied (the declared FLOPs: the model
// test vocab_padding_test.cpp).
TEST(ConfigAccounts, APaddedVocabularyCountsTheRealOne) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    std::string toml = kLlamaLike;
    toml.replace(toml.find("[model]\n"), 8,
                 std::string("[model]\nvocab_size = 1000\ntie_embeddings = ") + (tied ? "true" : "false") + "\n");
    const std::string path = test::write_temp("padded_vocab.toml", toml);
    const auto models = config_accounts(path, "cpu", 0, 0, 2.0);
    ASSERT_EQ(models.size(), 1u);
    const ConfigAccounts& m = models[0];
    EXPECT_EQ(m.shape.vocab_size, 1000);
    Architecture a = m.shape;
    a.gated_ffn = true;
    a.norm = NormKind::kRmsNorm;
    EXPECT_EQ(m.accounts.params, count_params(a));
    EXPECT_EQ(m.accounts.params_embedding, 1000 * 64);
    // 6N: the head's matrix counts 1000 x 64 in N whether or not it is tied.
    EXPECT_DOUBLE_EQ(m.accounts.n_matmul,
                     static_cast<double>(m.accounts.params_non_embedding) + (tied ? 1000.0 * 64 : 0.0));
  }
}

// d_ff and the sliding window come from what the components report (Component::accounting), not
// from parameter names: an MLP with an explicit width, a SwiGLU by its rule, a window.
TEST(ConfigAccounts, WidthsAndWindowsComeFromTheComponents) {
  const std::string path =
      test::write_temp("facts.toml",
                       "[model]\nd_model = 64\nn_layers = 2\nn_heads = 4\nseq_len = 32\nbatch_size = 2\n"
                       "attention = { type = \"causal\", window = 8 }\n[[variant]]\nname = \"mlp\"\n"
                       "model.ffn = { type = \"mlp\", d_ff = 100 }\n[[variant]]\nname = \"glu\"\n[throughput]\n");
  const auto models = config_accounts(path, "cpu", 0, 0, 2.0);
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].shape.d_ff, 100);
  EXPECT_EQ(models[1].shape.d_ff, 192);
  for (const auto& m : models) {
    EXPECT_EQ(m.shape.sliding_window, 8);
    EXPECT_EQ(m.shape.local_layers, 2);
    // A window of 8 keeps 8 tokens of the 32 in the cache.
    EXPECT_DOUBLE_EQ(m.accounts.kv_bytes_total, m.accounts.kv_bytes_per_token * 8 * 2);
  }
}

// Real models written as experiment files (tests/accounting/models/), counted from their own
// components as `bench calc FILE` counts them, against the checkpoints' totals: linear biases on
// q, k, v only (Qwen2.5), on every linear layer with a LayerNorm per parallel branch (GPT-NeoX),
// and the full-width QK-norm (OLMo 2).
TEST(ConfigAccounts, RealModelFilesCountExactly) {
  constexpr int64_t kD8192 = 8192, kD6144 = 6144, kD5120 = 5120;  // the three d_model
  const std::pair<const char*, int64_t> exact[] = {
      {"qwen2_5_72b.toml", 72706203648},
      {"gpt_neox_20b.toml", 20554567680},
      {"olmo2_13b.toml", 13716198400},
  };
  for (const auto& [file, published] : exact) {
    SCOPED_TRACE(file);
    const auto models =
        config_accounts(std::string(BENCH_SOURCE_DIR) + "/tests/accounting/models/" + file, "cpu", 0, 0, 2.0);
    ASSERT_EQ(models.size(), 1u);
    EXPECT_EQ(models[0].accounts.params, published);
  }
  // The pieces, written out. Qwen2.5-72B: 80 x (q 8192^2 + k, v 1024 x 8192 + o 8192^2 + biases
  // 8192 + 2 x 1024 + SwiGLU 3 x 8192 x 29568 + 2 RMSNorms) + final norm + 2 x 152064 x 8192.
  const int64_t qwen_layer = 2 * kD8192 * kD8192 + 2 * int64_t{1024} * kD8192 + 10240 + 3 * kD8192 * 29568 + 2 * kD8192;
  EXPECT_EQ(80 * qwen_layer + kD8192 + 2 * int64_t{152064} * kD8192, 72706203648);
  // GPT-NeoX-20B: 44 x (4 x 6144^2 + 4 x 6144 attention biases + 2 x 6144 x 24576 + 24576 + 6144
  // MLP biases + 2 LayerNorms of 2 x 6144) + final LayerNorm + 2 x 50432 x 6144.
  const int64_t neox_layer = 4 * kD6144 * kD6144 + 4 * kD6144 + 2 * kD6144 * 24576 + 24576 + kD6144 + 4 * kD6144;
  EXPECT_EQ(44 * neox_layer + 2 * kD6144 + 2 * int64_t{50432} * kD6144, 20554567680);
  // OLMo 2 13B: 40 x (4 x 5120^2 + q and k norms of 5120 + 3 x 5120 x 13824 + 2 RMSNorms) + final
  // norm + 2 x 100352 x 5120.
  const int64_t olmo_layer = 4 * kD5120 * kD5120 + 2 * kD5120 + 3 * kD5120 * 13824 + 2 * kD5120;
  EXPECT_EQ(40 * olmo_layer + kD5120 + 2 * int64_t{100352} * kD5120, 13716198400);
}

// Hugging Face config.json files (tests/accounting/hf/, the published files' values), one per
// model_type bench reads, counted as `bench calc FOLDER` counts them, against the parameter
// counts of the published checkpoints.
TEST(ConfigAccounts, HuggingFaceConfigsCountExactly) {
  const std::pair<const char*, int64_t> exact[] = {
      {"Llama-3.1-8B", 8030261248},            // 32 x 218,112,000 + 2 x 128,256 x 4,096 + 4,096
      {"Mistral-7B-v0.1", 7241732096},         // 32 x 218,112,000 + 2 x 32,000 x 4,096 + 4,096
      {"Qwen2.5-0.5B", 494032768},             // 24 x 14,912,384 (q, k, v biases) + 151,936 x 896 tied + 896
      {"gemma-2-2b", 2614341888},              // 26 x 77,865,984 (four norms) + 256,000 x 2,304 tied + 2,304
      {"OLMo-2-1124-7B", 7298617344},          // 32 x 202,391,552 (q, k norms of 4,096) + 2 x 100,352 x 4,096 + 4,096
      {"Phi-3-mini-4k-instruct", 3821079552},  // 32 x 113,252,352 + 2 x 32,064 x 3,072 + 3,072
      {"pythia-160m", 162322944},              // 12 x 7,087,872 (biases, two LayerNorms) + 2 x 50,304 x 768 + 1,536
      {"falcon-7b", 6921720704},               // 32 x 207,070,080 (MQA, one LayerNorm) + 65,024 x 4,544 tied + 9,088
      {"gpt2", 124439808},                     // 12 x 7,087,872 + 50,257 x 768 tied + 1,024 x 768 (wpe) + 1,536
      {"gemma-2b", 2506172416},                // 18 x 110,104,576 (MQA, head_dim 256) + 256,000 x 2,048 tied + 2,048
      {"OLMo-1B-hf", 1176764416},              // 16 x 67,108,864 (no norm parameters) + 50,304 x 2,048 tied
  };
  for (const auto& [model, published] : exact) {
    SCOPED_TRACE(model);
    const auto models =
        config_accounts(std::string(BENCH_SOURCE_DIR) + "/tests/accounting/hf/" + model, "cpu", 0, 0, 2.0);
    ASSERT_EQ(models.size(), 1u);
    EXPECT_EQ(models[0].accounts.params, published);
  }
  // The per-layer figures above, written out.
  EXPECT_EQ(2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 4096 * 14336 + 2 * 4096, 218112000);
  EXPECT_EQ(2 * 896 * 896 + 2 * 128 * 896 + 1152 + 3 * 896 * 4864 + 2 * 896, 14912384);
  EXPECT_EQ(2 * 2048 * 2304 + 2 * 1024 * 2304 + 3 * 2304 * 9216 + 4 * 2304, 77865984);
  EXPECT_EQ(4 * 4096 * 4096 + 2 * 4096 + 3 * 4096 * 11008 + 2 * 4096, 202391552);
  EXPECT_EQ(4 * 3072 * 3072 + 3 * 3072 * 8192 + 2 * 3072, 113252352);
  EXPECT_EQ(4 * 768 * 768 + 4 * 768 + 2 * 768 * 3072 + 3072 + 768 + 4 * 768, 7087872);
  EXPECT_EQ(73 * 64 * 4544 + 4544 * 4544 + 2 * 4544 * 18176 + 2 * 4544, 207070080);
  EXPECT_EQ(12 * 7087872 + 50257 * 768 + 1024 * 768 + 1536, 124439808);
  EXPECT_EQ(2 * 2048 * 2048 + 2 * 256 * 2048 + 3 * 2048 * 16384 + 2 * 2048, 110104576);
  EXPECT_EQ(18 * int64_t{110104576} + 256000 * 2048 + 2048, 2506172416);
  EXPECT_EQ(4 * 2048 * 2048 + 3 * 2048 * 8192, 67108864);
  EXPECT_EQ(16 * int64_t{67108864} + 50304 * 2048, 1176764416);
}

// A model of any size is counted, since nothing is allocated: Llama 3.1 405B at batch 64 and
// context 8192 (its attention probabilities alone exceed a process's address space), written
// as a file with only a model (no runner section).
TEST(ConfigAccounts, AModelOfAnySizeFromAFileWithOnlyAModel) {
  const auto models =
      config_accounts(std::string(BENCH_SOURCE_DIR) + "/tests/accounting/models/llama3_1_405b.toml", "cpu", 0, 0, 2.0);
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].batch_size, 64);
  EXPECT_EQ(models[0].seq_len, 8192);
  // 126 x (q, o 16384^2 + k, v 1024 x 16384 + SwiGLU 3 x 16384 x 53248 + 2 RMSNorms) + final norm
  // + 2 x 128256 x 16384 (untied): Hugging Face's count for meta-llama/Llama-3.1-405B.
  constexpr int64_t kD = 16384;
  const int64_t layer = 2 * kD * kD + 2 * int64_t{1024} * kD + 3 * kD * 53248 + 2 * kD;
  EXPECT_EQ(126 * layer + kD + 2 * int64_t{128256} * kD, 405853388800);
  EXPECT_EQ(models[0].accounts.params, 405853388800);
}

TEST(ConfigAccounts, ErrorsPointAtTheFile) {
  const std::string path = test::write_temp("bad_calc.toml", "name = \"x\"\n[model]\nd_model = \"wide\"\n");
  try {
    config_accounts(path, "cpu", 0, 0, 2.0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    // A file with only a model is counted; its mistake is at its key.
    EXPECT_NE(std::string(e.what()).find("bad_calc.toml:3:1: 'd_model' of [model] must be an integer"),
              std::string::npos)
        << e.what();
  }
}

TEST(DtypeBytes, Names) {
  EXPECT_EQ(dtype_bytes("bf16"), 2.0);
  EXPECT_EQ(dtype_bytes("fp32"), 4.0);
  EXPECT_EQ(dtype_bytes("fp8"), 1.0);
  EXPECT_FALSE(dtype_bytes("int3").has_value());
}

}  // namespace
}  // namespace accounting_test
}  // namespace bench::accounting
