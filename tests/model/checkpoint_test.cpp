// Checkpoints: Hugging Face names per variant, bit-exact save/load/eval round trips, and the
// mismatch report of a file that does not fit the model.
#include "model/checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/interfaces.h"
#include "model/safetensors.h"
#include "runners/evaluate.h"
#include "support/errors.h"
#include "support/toml_case.h"

namespace bench {
namespace checkpoint_test {
namespace {

// Llama: pre-RMSNorm, SwiGLU, RoPE (rotate-half), GQA, untied head.
const char* kLlama =
    "[model]\nvocab_size = 64\nd_model = 32\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nseq_len = 16\n"
    "batch_size = 2\nnorm_position = \"pre\"\nnorm = \"rmsnorm\"\nposition = \"rope\"\n"
    "ffn = {type = \"swiglu\", d_ff = 64}\n[data]\ntype = \"synthetic\"\nvocab_size = 64\n[stability]\n";

// Post-norm LayerNorm, GeLU MLP, learned positions, tied head.
const char* kPostNorm =
    "[model]\nvocab_size = 64\nd_model = 32\nn_layers = 2\nn_heads = 4\nseq_len = 16\nbatch_size = 2\n"
    "tie_embeddings = true\nnorm_position = \"post\"\nnorm = \"layernorm\"\nposition = \"learned\"\n"
    "ffn = {type = \"mlp\", activation = \"gelu\", d_ff = 64}\n[data]\ntype = \"synthetic\"\nvocab_size = 64\n"
    "[stability]\n";

std::vector<std::string> names_of(const Model& m) {
  std::vector<std::string> out;
  for (const CheckpointTensor& t : checkpoint_layout(m)) out.push_back(t.name);
  return out;
}

/// A few AdamW steps so that every parameter (gains and biases too) moves off its init.
void train(Model& m, int steps) {
  RunContext ctx;
  OptimizerStep opt;
  opt.lr = 1e-2;
  std::vector<int32_t> in(static_cast<size_t>(m.spec().dims.tokens())), tg(in.size());
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = static_cast<int32_t>((i * 7 + static_cast<size_t>(s)) % 64);
      tg[i] = static_cast<int32_t>((i * 5 + 3) % 64);
    }
    m.zero_grad();
    (void)m.forward(in.data(), tg.data(), ctx);
    m.backward(ctx);
    (void)m.optimizer_step(opt, ctx);
  }
}

std::vector<int32_t> some_tokens(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37 + 11) % 64);
  return t;
}

using test::error_of;

TEST(Checkpoint, LlamaUsesHuggingFaceNames) {
  Model m(test::resolve_first(kLlama).model, test::builtin_registry(), 1);
  std::vector<std::string> want = {"model.embed_tokens.weight"};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                          "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                          "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"})
      want.push_back(p + n);
  }
  want.emplace_back("model.norm.weight");
  want.emplace_back("lm_head.weight");
  std::vector<std::string> got = names_of(m);
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const CheckpointTensor& t : checkpoint_layout(m)) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes["model.layers.1.self_attn.q_proj.weight"], (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(shapes["model.layers.1.self_attn.k_proj.weight"], (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(shapes["model.layers.0.mlp.gate_proj.weight"], (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(shapes["model.layers.0.mlp.down_proj.weight"], (std::vector<int64_t>{32, 64}));
}

TEST(Checkpoint, SplitsFusedMatricesByRows) {
  // q_proj, k_proj, v_proj are the row blocks of wqkv; gate_proj, up_proj those of w_in.
  Model m(test::resolve_first(kLlama).model, test::builtin_registry(), 3);
  const std::string path = test::write_temp("split.safetensors", "");
  save_weights(m, path);
  const safetensors::File f = safetensors::read(path);
  const Param* wqkv = m.find_param("blocks.1.attn.wqkv");
  const Param* w_in = m.find_param("blocks.0.ffn.w_in");
  const std::vector<double> k = f.values(*f.find("model.layers.1.self_attn.k_proj.weight"));
  const std::vector<double> up = f.values(*f.find("model.layers.0.mlp.up_proj.weight"));
  for (size_t i = 0; i < k.size(); ++i) ASSERT_EQ(k[i], wqkv->value.data<float>()[32 * 32 + i]);
  for (size_t i = 0; i < up.size(); ++i) ASSERT_EQ(up[i], w_in->value.data<float>()[64 * 32 + i]);
}

TEST(Checkpoint, OtherVariantsHaveDocumentedNames) {
  Model post(test::resolve_first(kPostNorm).model, test::builtin_registry(), 1);
  const std::vector<std::string> names = names_of(post);
  for (const char* n : {"model.embed_positions.weight", "model.layers.0.mlp.up_proj.weight",
                        "model.layers.1.input_layernorm.bias", "model.layers.1.post_attention_layernorm.weight"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(std::find(names.begin(), names.end(), "lm_head.weight"), names.end());  // tied
  EXPECT_EQ(std::find(names.begin(), names.end(), "model.norm.weight"), names.end());
  EXPECT_EQ(checkpoint_name("blocks.3.attn_norm.in.weight"), "model.layers.3.input_layernorm.weight");
  EXPECT_EQ(checkpoint_name("blocks.3.attn_norm.out.weight"), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(checkpoint_name("blocks.3.ffn_norm.in.weight"), "model.layers.3.pre_feedforward_layernorm.weight");
  EXPECT_EQ(checkpoint_name("blocks.3.ffn_norm.out.bias"), "model.layers.3.post_feedforward_layernorm.bias");
  EXPECT_EQ(checkpoint_name("blocks.0.norm.weight"), "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(checkpoint_name("blocks.0.attn.q_norm.weight"), "model.layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(checkpoint_name("blocks.0.ffn.w1"), "model.layers.0.mlp.w1");
  EXPECT_EQ(checkpoint_name("final_norm.bias"), "model.norm.bias");
}

// The names of the other architectures (weight_names), as their Hugging Face checkpoints spell them.
TEST(Checkpoint, OtherArchitecturesNames) {
  EXPECT_EQ(checkpoint_name("blocks.2.attn_norm.weight", "olmo2"), "model.layers.2.post_attention_layernorm.weight");
  EXPECT_EQ(checkpoint_name("blocks.2.ffn_norm.weight", "olmo2"), "model.layers.2.post_feedforward_layernorm.weight");
  EXPECT_EQ(checkpoint_name("blocks.2.attn.k_norm.weight", "olmo2"), "model.layers.2.self_attn.k_norm.weight");
  EXPECT_EQ(checkpoint_name("embed.weight", "gpt_neox"), "gpt_neox.embed_in.weight");
  EXPECT_EQ(checkpoint_name("head.weight", "gpt_neox"), "embed_out.weight");
  EXPECT_EQ(checkpoint_name("final_norm.bias", "gpt_neox"), "gpt_neox.final_layer_norm.bias");
  EXPECT_EQ(checkpoint_name("blocks.1.attn.wqkv", "gpt_neox"), "gpt_neox.layers.1.attention.query_key_value.weight");
  EXPECT_EQ(checkpoint_name("blocks.1.attn.bo", "gpt_neox"), "gpt_neox.layers.1.attention.dense.bias");
  EXPECT_EQ(checkpoint_name("blocks.1.ffn.w_in", "gpt_neox"), "gpt_neox.layers.1.mlp.dense_h_to_4h.weight");
  EXPECT_EQ(checkpoint_name("blocks.1.ffn.b_out", "gpt_neox"), "gpt_neox.layers.1.mlp.dense_4h_to_h.bias");
  EXPECT_EQ(checkpoint_name("blocks.1.ffn_norm.weight", "gpt_neox"),
            "gpt_neox.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(checkpoint_name("embed.weight", "falcon"), "transformer.word_embeddings.weight");
  EXPECT_EQ(checkpoint_name("final_norm.weight", "falcon"), "transformer.ln_f.weight");
  EXPECT_EQ(checkpoint_name("blocks.0.norm.bias", "falcon"), "transformer.h.0.input_layernorm.bias");
  EXPECT_EQ(checkpoint_name("blocks.0.attn.wqkv", "falcon"), "transformer.h.0.self_attention.query_key_value.weight");
  EXPECT_EQ(checkpoint_name("blocks.0.attn.wo", "falcon"), "transformer.h.0.self_attention.dense.weight");
}

// GPT-NeoX's query_key_value: [q_h; k_h; v_h] per head, from our [all q; all k; all v].
TEST(Checkpoint, NeoxQueryKeyValueIsInterleavedPerHead) {
  Model m(test::resolve_first("[model]\nvocab_size = 64\nd_model = 32\nn_layers = 1\nn_heads = 4\nseq_len = 8\n"
                              "weight_names = \"gpt_neox\"\nattention = {type = \"causal\", bias = \"all\"}\n"
                              "[data]\nvocab_size = 64\n[throughput]\n")
              .model,
          test::builtin_registry(), 1);
  const std::vector<CheckpointTensor> layout = checkpoint_layout(m);
  const auto qkv = std::find_if(layout.begin(), layout.end(), [](const CheckpointTensor& t) {
    return t.name == "gpt_neox.layers.0.attention.query_key_value.weight";
  });
  ASSERT_NE(qkv, layout.end());
  EXPECT_EQ(qkv->shape, (std::vector<int64_t>{96, 32}));
  ASSERT_EQ(qkv->blocks.size(), 12u);
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t part = 0; part < 3; ++part) {  // q, k, v of head h
      const CheckpointTensor::RowBlock& b = qkv->blocks[static_cast<size_t>(3 * h + part)];
      EXPECT_EQ(b.file_row, (3 * h + part) * 8);
      EXPECT_EQ(b.param_row, part * 32 + h * 8);
      EXPECT_EQ(b.rows, 8);
    }
}

// Qwen2: the Llama layout with biases on q, k and v. GPT-NeoX: biases on every linear layer, a
// parallel block with a LayerNorm per branch, a plain GeLU MLP. OLMo 2: output-side norms and a
// QK-norm over the whole q and k.
const char* kQwen2 =
    "[model]\nvocab_size = 64\nd_model = 32\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nseq_len = 16\n"
    "batch_size = 2\nnorm = \"rmsnorm\"\nposition = \"rope\"\nattention = {type = \"causal\", bias = \"qkv\"}\n"
    "ffn = {type = \"swiglu\", d_ff = 64}\n[data]\ntype = \"synthetic\"\nvocab_size = 64\n[stability]\n";
const char* kNeoX =
    "[model]\nvocab_size = 64\nd_model = 32\nn_layers = 2\nn_heads = 4\nseq_len = 16\nbatch_size = 2\n"
    "norm = \"layernorm\"\nblock = {type = \"parallel\", norms = \"per_branch\"}\n"
    "attention = {type = \"causal\", bias = \"all\"}\n"
    "ffn = {type = \"mlp\", activation = \"gelu\", d_ff = 64, bias = true}\n[data]\ntype = \"synthetic\"\n"
    "vocab_size = 64\n[stability]\n";
const char* kOlmo2 =
    "[model]\nvocab_size = 64\nd_model = 32\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nseq_len = 16\n"
    "batch_size = 2\nnorm_position = \"output\"\nnorm = \"rmsnorm\"\n"
    "attention = {type = \"causal\", qk_norm = \"rmsnorm\", qk_norm_scope = \"full\"}\n"
    "ffn = {type = \"swiglu\", d_ff = 64, bias = true}\n[data]\ntype = \"synthetic\"\nvocab_size = 64\n[stability]\n";

std::map<std::string, std::vector<int64_t>> shapes_of(const Model& m) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const CheckpointTensor& t : checkpoint_layout(m)) shapes[t.name] = t.shape;
  return shapes;
}

TEST(Checkpoint, BiasesAndFullWidthQkNormUseHuggingFaceNames) {
  using V = std::vector<int64_t>;
  const Model qwen(test::resolve_first(kQwen2).model, test::builtin_registry(), 1);
  auto s = shapes_of(qwen);
  EXPECT_EQ(s.size(), 1 + 2 * 12 + 2u);  // embedding, 9 matrices and norms + 3 biases a layer, final norm, head
  EXPECT_EQ(s["model.layers.1.self_attn.q_proj.bias"], (V{32}));
  EXPECT_EQ(s["model.layers.1.self_attn.k_proj.bias"], (V{16}));
  EXPECT_EQ(s["model.layers.1.self_attn.v_proj.bias"], (V{16}));
  EXPECT_EQ(s.count("model.layers.1.self_attn.o_proj.bias"), 0u) << "qkv: no output bias";

  const Model neox(test::resolve_first(kNeoX).model, test::builtin_registry(), 1);
  s = shapes_of(neox);
  // Embedding; a layer's 6 matrices, 6 biases and 2 LayerNorms of 2; the final LayerNorm; the head.
  EXPECT_EQ(s.size(), 1 + 2 * 16 + 2 + 1u);
  for (const char* n : {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                        "self_attn.o_proj.bias", "mlp.down_proj.bias", "input_layernorm.weight", "input_layernorm.bias",
                        "post_attention_layernorm.weight", "post_attention_layernorm.bias"})
    EXPECT_EQ(s[std::string("model.layers.0.") + n], (V{32})) << n;
  EXPECT_EQ(s["model.layers.0.mlp.up_proj.bias"], (V{64}));

  const Model olmo(test::resolve_first(kOlmo2).model, test::builtin_registry(), 1);
  s = shapes_of(olmo);
  EXPECT_EQ(s["model.layers.0.self_attn.q_norm.weight"], (V{32}));  // n_heads d_head
  EXPECT_EQ(s["model.layers.0.self_attn.k_norm.weight"], (V{16}));  // n_kv_heads d_head
  EXPECT_EQ(s["model.layers.0.mlp.gate_proj.bias"], (V{64}));
  EXPECT_EQ(s["model.layers.0.mlp.up_proj.bias"], (V{64}));
  EXPECT_EQ(s["model.layers.0.mlp.down_proj.bias"], (V{32}));
}

TEST(Checkpoint, SplitsFusedBiasesLikeTheirMatrices) {
  // Trained, so that the biases are no longer zero: k_proj.bias and up_proj.bias are element
  // blocks of bqkv and b_in, as k_proj.weight and up_proj.weight are row blocks.
  Model m(test::resolve_first(kOlmo2).model, test::builtin_registry(), 3);
  std::string qwen = kQwen2;
  qwen.replace(qwen.find("bias = \"qkv\""), 12, "bias = \"all\"");
  Model q(test::resolve_first(qwen).model, test::builtin_registry(), 3);
  train(m, 2);
  train(q, 2);
  const std::string pm = test::write_temp("split_bias_m.safetensors", ""),
                    pq = test::write_temp("split_bias_q.safetensors", "");
  save_weights(m, pm);
  save_weights(q, pq);
  const safetensors::File fm = safetensors::read(pm), fq = safetensors::read(pq);
  const float* b_in = m.find_param("blocks.1.ffn.b_in")->value.data<float>();
  const float* bqkv = q.find_param("blocks.1.attn.bqkv")->value.data<float>();
  const std::vector<double> gate = fm.values(*fm.find("model.layers.1.mlp.gate_proj.bias"));
  const std::vector<double> up = fm.values(*fm.find("model.layers.1.mlp.up_proj.bias"));
  const std::vector<double> qb = fq.values(*fq.find("model.layers.1.self_attn.q_proj.bias"));
  const std::vector<double> kb = fq.values(*fq.find("model.layers.1.self_attn.k_proj.bias"));
  const std::vector<double> vb = fq.values(*fq.find("model.layers.1.self_attn.v_proj.bias"));
  ASSERT_EQ(up.size(), 64u);
  ASSERT_EQ(kb.size(), 16u);
  double moved = 0;
  for (size_t i = 0; i < 64; ++i) {
    ASSERT_EQ(gate[i], b_in[i]);
    ASSERT_EQ(up[i], b_in[64 + i]);
    moved += std::fabs(up[i]);
  }
  for (size_t i = 0; i < 32; ++i) ASSERT_EQ(qb[i], bqkv[i]);
  for (size_t i = 0; i < 16; ++i) {
    ASSERT_EQ(kb[i], bqkv[32 + i]);
    ASSERT_EQ(vb[i], bqkv[48 + i]);
    moved += std::fabs(vb[i]);
  }
  EXPECT_GT(moved, 0) << "training moved the biases";
  const std::vector<double> ob = fq.values(*fq.find("model.layers.0.self_attn.o_proj.bias"));
  const float* bo = q.find_param("blocks.0.attn.bo")->value.data<float>();
  for (size_t i = 0; i < 32; ++i) ASSERT_EQ(ob[i], bo[i]);
}

/// Save `a`, load into a model of another seed, and check parameters and evaluation bit for bit.
void expect_round_trip(const std::string& toml, const std::string& dtype_key) {
  const ModelSpec spec = test::resolve_first(toml).model;
  Model a(spec, test::builtin_registry(), 1), b(spec, test::builtin_registry(), 2);
  train(a, 3);
  const std::string path = test::write_temp("round_trip_" + dtype_key + ".safetensors", "");
  save_weights(a, path, dtype_key);
  load_weights(b, path);
  for (const Param* p : a.params()) {
    const Param* q = b.find_param(p->name);
    ASSERT_NE(q, nullptr);
    ASSERT_EQ(std::memcmp(p->value.raw(), q->value.raw(), p->value.bytes()), 0) << p->name;
    const Tensor ma = a.master_of(*p), mb = b.master_of(*q);  // a bf16 model's float copies
    ASSERT_EQ(ma.defined(), mb.defined());
    if (ma.defined()) {
      ASSERT_EQ(std::memcmp(ma.raw(), mb.raw(), ma.bytes()), 0) << p->name;
    }
  }
  RunContext ctx;
  const std::vector<int32_t> tokens = some_tokens(45);
  const EvalResult ra = evaluate_tokens(a, tokens, true, true, ctx);
  const EvalResult rb = evaluate_tokens(b, tokens, true, true, ctx);
  EXPECT_EQ(ra.loss, rb.loss);
  EXPECT_EQ(ra.logits, rb.logits);
  EXPECT_EQ(ra.hidden, rb.hidden);
  EXPECT_EQ(ra.positions, 44);
  EXPECT_EQ(ra.windows, 3);
  // Saving the loaded model gives the same bytes.
  const std::string again = test::write_temp("round_trip_again.safetensors", "");
  save_weights(b, again, dtype_key);
  std::ifstream fa(path, std::ios::binary), fb(again, std::ios::binary);
  const std::string ba((std::istreambuf_iterator<char>(fa)), {}), bb((std::istreambuf_iterator<char>(fb)), {});
  EXPECT_EQ(ba, bb);
}

TEST(Checkpoint, RoundTripIsBitExact) {
  expect_round_trip(kLlama, "F32");
  expect_round_trip(kPostNorm, "F32");
  std::string f64 = kLlama;
  f64.insert(f64.find("[data]"), "dtype = \"float64\"\n");
  expect_round_trip(f64, "F64");
  // A bf16 model saves its float master weights: F32 keeps them, and the bf16 values follow.
  std::string bf16 = kLlama;
  bf16.insert(bf16.find("[data]"), "dtype = \"bfloat16\"\n");
  expect_round_trip(bf16, "F32");
  // Linear biases (split and whole), per-branch norms, full-width QK-norm.
  for (const char* toml : {kQwen2, kNeoX, kOlmo2}) expect_round_trip(toml, "F32");
}

TEST(Checkpoint, Bfloat16AndHalfRoundToNearest) {
  const ModelSpec spec = test::resolve_first(kLlama).model;
  Model a(spec, test::builtin_registry(), 1), b(spec, test::builtin_registry(), 2);
  for (const char* dtype : {"BF16", "F16"}) {
    const std::string path = test::write_temp(std::string("rounded_") + dtype + ".safetensors", "");
    save_weights(a, path, dtype);
    load_weights(b, path);
    const Param* p = a.find_param("blocks.0.attn.wqkv");
    const float* want = p->value.data<float>();
    const float* got = b.find_param("blocks.0.attn.wqkv")->value.data<float>();
    for (int64_t i = 0; i < p->value.numel(); ++i) {
      // Nearest representable: half a unit in the last place, 2^-8 relative for bf16 (8 significant
      // bits) and 2^-11 for f16 (11); the slack covers f16 subnormals.
      const double tol = std::string(dtype) == "BF16" ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
      ASSERT_LE(std::fabs(got[i] - want[i]), tol * std::fabs(want[i]) + 1e-7) << i;
    }
  }
}

TEST(Checkpoint, MismatchesAreReportedByName) {
  Model llama(test::resolve_first(kLlama).model, test::builtin_registry(), 1);
  const std::string path = test::write_temp("llama.safetensors", "");
  save_weights(llama, path);
  // Another model: MHA instead of GQA, and post-norm instead of pre-norm (no final norm).
  std::string other = kLlama;
  other.replace(other.find("n_kv_heads = 2"), 14, "n_kv_heads = 4");
  Model mha(test::resolve_first(other).model, test::builtin_registry(), 1);
  const std::vector<float> before(mha.params()[0]->value.data<float>(),
                                  mha.params()[0]->value.data<float>() + mha.params()[0]->value.numel());
  const std::string e = error_of([&] { load_weights(mha, path); });
  EXPECT_NE(e.find("4 mismatches"), std::string::npos) << e;
  EXPECT_NE(e.find("model.layers.0.self_attn.k_proj.weight: shape [16, 32] in the file, the model needs [32, 32]"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("model.layers.1.self_attn.v_proj.weight: shape [16, 32]"), std::string::npos) << e;
  EXPECT_EQ(std::vector<float>(mha.params()[0]->value.data<float>(),
                               mha.params()[0]->value.data<float>() + mha.params()[0]->value.numel()),
            before);  // unchanged

  std::string post = kLlama;
  post.replace(post.find("\"pre\""), 5, "\"post\"");
  Model pm(test::resolve_first(post).model, test::builtin_registry(), 1);
  const std::string e2 = error_of([&] { load_weights(pm, path); });
  EXPECT_NE(e2.find("model.norm.weight: not a tensor of this model"), std::string::npos) << e2;

  // A missing tensor, an integer tensor, and an extra one.
  safetensors::File f = safetensors::read(path);
  std::vector<safetensors::OutTensor> out;
  for (const safetensors::TensorInfo& t : f.tensors) {
    if (t.name == "model.norm.weight") continue;
    const std::vector<double> v = f.values(t);
    out.push_back({t.name, "F32", t.shape, safetensors::encode(v.data(), t.numel(), "F32")});
  }
  out.push_back({"extra.weight", "F32", {1}, safetensors::encode(std::vector<double>{1.0}.data(), 1, "F32")});
  const std::string broken = test::write_temp("broken.safetensors", "");
  safetensors::write(broken, out, {});
  const std::string e3 = error_of([&] { load_weights(llama, broken); });
  EXPECT_NE(e3.find("model.norm.weight: missing (the model needs [32])"), std::string::npos) << e3;
  EXPECT_NE(e3.find("extra.weight: not a tensor of this model"), std::string::npos) << e3;

  // An I32 tensor where a float is needed (written by hand: the writer only writes floats).
  std::string header = R"({"model.norm.weight":{"dtype":"I32","shape":[32],"data_offsets":[0,128]}})";
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += header + std::string(128, '\0');
  const std::string ints = test::write_temp("ints.safetensors", bytes);
  const std::string e4 = error_of([&] { load_weights(llama, ints); });
  EXPECT_NE(e4.find("model.norm.weight: dtype I32, the model needs a float type"), std::string::npos) << e4;
}

TEST(Checkpoint, ShardedCheckpointsLoadThroughTheirIndex) {
  const ModelSpec spec = test::resolve_first(kLlama).model;
  Model a(spec, test::builtin_registry(), 1), b(spec, test::builtin_registry(), 2);
  train(a, 2);
  const std::filesystem::path dir = std::filesystem::path(test::write_temp("shard.keep", "")).parent_path() / "shards";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  save_weights(a, (dir / "full.tmp").string());
  const safetensors::File full = safetensors::read((dir / "full.tmp").string());
  std::filesystem::remove(dir / "full.tmp");
  // Hugging Face's layout: layer 0 and the embedding in the first shard, the rest in the second.
  const std::string names[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
  std::vector<safetensors::OutTensor> shard[2];
  nlohmann::json map = nlohmann::json::object();
  for (const safetensors::TensorInfo& t : full.tensors) {
    const int k = t.name.starts_with("model.layers.0.") || t.name == "model.embed_tokens.weight" ? 0 : 1;
    const std::vector<double> v = full.values(t);
    shard[k].push_back({t.name, "F32", t.shape, safetensors::encode(v.data(), t.numel(), "F32")});
    map[t.name] = names[k];
  }
  for (int k = 0; k < 2; ++k) safetensors::write((dir / names[k]).string(), shard[k], {{"format", "pt"}});
  const auto write_index = [&](const nlohmann::json& m) {
    std::ofstream((dir / "model.safetensors.index.json").string())
        << nlohmann::json{{"metadata", {}}, {"weight_map", m}};
  };
  write_index(map);
  load_weights(b, (dir / "model.safetensors.index.json").string());
  for (const Param* p : a.params())
    ASSERT_EQ(std::memcmp(p->value.raw(), b.find_param(p->name)->value.raw(), p->value.bytes()), 0) << p->name;
  Model c(spec, test::builtin_registry(), 3);
  load_weights(c, dir.string());  // the directory: its index
  for (const Param* p : a.params())
    ASSERT_EQ(std::memcmp(p->value.raw(), c.find_param(p->name)->value.raw(), p->value.bytes()), 0) << p->name;
  // An index that disagrees with its shards.
  map["model.norm.weight"] = names[0];
  write_index(map);
  const std::string e = error_of([&] { load_weights(c, dir.string()); });
  EXPECT_NE(e.find("model.norm.weight: in shard model-00002-of-00002.safetensors but the index puts it in "
                   "model-00001-of-00002.safetensors"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("model.norm.weight: missing"), std::string::npos) << e;  // reported once
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  EXPECT_NE(error_of([&] { load_weights(c, dir.string()); }).find("a directory without model.safetensors"),
            std::string::npos);
}

TEST(Checkpoint, TiedHeadAcceptsAnEqualLmHead) {
  const ModelSpec spec = test::resolve_first(kPostNorm).model;
  Model a(spec, test::builtin_registry(), 1), b(spec, test::builtin_registry(), 2);
  const std::string path = test::write_temp("tied.safetensors", "");
  save_weights(a, path);
  safetensors::File f = safetensors::read(path);
  std::vector<safetensors::OutTensor> out;
  for (const safetensors::TensorInfo& t : f.tensors) {
    const std::vector<double> v = f.values(t);
    std::vector<char> data = safetensors::encode(v.data(), t.numel(), "F32");
    if (t.name == "model.embed_tokens.weight") out.push_back({"lm_head.weight", "F32", t.shape, data});
    out.push_back({t.name, "F32", t.shape, std::move(data)});
  }
  const std::string with_head = test::write_temp("tied_with_head.safetensors", "");
  safetensors::write(with_head, out, {});
  EXPECT_EQ(error_of([&] { load_weights(b, with_head); }), "");
  for (safetensors::OutTensor& t : out)
    if (t.name == "lm_head.weight") t.data[0] ^= 1;  // now it differs from the embedding
  safetensors::write(with_head, out, {});
  EXPECT_NE(error_of([&] { load_weights(b, with_head); }).find("lm_head.weight: the model ties its head"),
            std::string::npos);
}

}  // namespace
}  // namespace checkpoint_test
}  // namespace bench
