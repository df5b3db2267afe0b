// `bench eval` end to end: checkpoints written in the Hugging Face layout by a NumPy-only script
// (tests/cli/hf_reference.py) evaluate to the logits the script computes in float64, and a
// checkpoint saved by bench evaluates bit for bit as the model that saved it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/interfaces.h"
#include "bench/sha256.h"
#include "model/checkpoint.h"
#include "runners/evaluate.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace eval_test {
namespace {

const std::string kBench = test::bench_program();
// Debian's python3 with python3-numpy (scripts/setup.sh), not whatever python3 is first on PATH.
const std::string kPython = "/usr/bin/python3";
const std::string kScript = std::string(BENCH_SOURCE_DIR) + "/tests/cli/hf_reference.py";

using test::Output;

/// Runs `cmd` with its stderr merged into what it printed (test::shell keeps them apart).
Output shell(const std::string& cmd) { return test::shell("{ " + cmd + " 2>&1; }"); }

struct Npy {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<double> data;
  std::vector<float> f32;  ///< the raw values of a "<f4" file
};

/// A NumPy .npy file (format 1.0, C order, <f4 or <f8), read independently of bench's writer.
Npy read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8)) << path;
  uint16_t len = 0;
  std::memcpy(&len, bytes.data() + 8, 2);
  EXPECT_EQ((10 + len) % 16, 0) << "header not aligned";
  const std::string header = bytes.substr(10, len);
  Npy r;
  const size_t d = header.find("'descr': '") + 10;
  r.descr = header.substr(d, header.find('\'', d) - d);
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos);
  const size_t s = header.find('(') + 1;
  const std::string dims = header.substr(s, header.find(')') - s);
  for (size_t i = 0; i < dims.size();) {
    const size_t c = dims.find(',', i);
    const std::string part = dims.substr(i, c == std::string::npos ? std::string::npos : c - i);
    if (part.find_first_not_of(' ') != std::string::npos) r.shape.push_back(std::stoll(part));
    if (c == std::string::npos) break;
    i = c + 1;
  }
  const char* p = bytes.data() + 10 + len;
  const size_t es = r.descr == "<f8" ? 8 : 4;
  const size_t n = (bytes.size() - 10 - len) / es;
  for (size_t i = 0; i < n; ++i) {
    if (es == 8) {
      double v;
      std::memcpy(&v, p + i * 8, 8);
      r.data.push_back(v);
    } else {
      float v;
      std::memcpy(&v, p + i * 4, 4);
      r.f32.push_back(v);
      r.data.push_back(v);
    }
  }
  return r;
}

/// The path of the test's directory `name` (fresh_dir's).
std::string dir_path(const std::string& name) {
  return std::filesystem::path(test::write_temp(name + ".keep", "")).parent_path() / name;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = dir_path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The TOML twins of hf_reference.py's configurations.
const char* kLlamaToml = R"(name = "hf_llama"
[model]
vocab_size = 64
d_model = 32
n_layers = 2
n_heads = 4
n_kv_heads = 2
d_head = 8
seq_len = 16
norm_position = "pre"
norm = {type = "rmsnorm", eps = 1e-5}
position = {type = "rope", base = 10000.0, layout = "half"}
attention = "causal"
ffn = {type = "swiglu", d_ff = 64}
[data]
vocab_size = 64
)";

const char* kPostNormToml = R"(name = "hf_postnorm"
[model]
vocab_size = 64
d_model = 32
n_layers = 2
n_heads = 4
seq_len = 16
tie_embeddings = true
norm_position = "post"
norm = {type = "layernorm", eps = 1e-5, bias = true}
position = "learned"
attention = "causal"
ffn = {type = "mlp", activation = "gelu", d_ff = 64}
[data]
vocab_size = 64
)";

/// The float64 reference's loss, as the script wrote it to DIR/loss.txt.
double reference_loss(const std::string& dir) {
  std::ifstream loss_file(dir + "/loss.txt");
  double ref_loss = 0;
  loss_file >> ref_loss;
  return ref_loss;
}

/// How far float32 `ours` lies from the float64 `ref` (of one size): the worst error in units of
/// 1e-4 + 1e-4 |ref|, the largest |ours - ref| and the largest |ref|.
struct Agreement {
  double worst = 0, max_abs = 0, scale = 0;
};

/// ours within 1e-4 + 1e-4 |ref| of a reference that is not degenerate (some |ref| > 0.5), as
/// failures that name `what`; returns the figures.
Agreement expect_agrees(const Npy& ours, const Npy& ref, const std::string& what) {
  Agreement a;
  for (size_t i = 0; i < ref.data.size(); ++i) {
    const double err = std::fabs(ours.data[i] - ref.data[i]);
    a.worst = std::max(a.worst, err / (1e-4 + 1e-4 * std::fabs(ref.data[i])));
    a.max_abs = std::max(a.max_abs, err);
    a.scale = std::max(a.scale, std::fabs(ref.data[i]));
  }
  EXPECT_LE(a.worst, 1.0) << what << ": float32 vs float64 beyond 1e-4 + 1e-4 |ref|";
  EXPECT_GT(a.scale, 0.5) << "a degenerate reference";
  return a;
}

/// Run the reference script and `bench eval` on its checkpoint; compare loss, logits and each
/// block's output with the float64 reference.
void check_against_numpy(const std::string& config, const std::string& toml, const std::string& token_format,
                         const std::string& dtype = "F32", int vocab = 64) {
  const std::string dir = fresh_dir("hf_" + config + "_" + dtype + "_" + std::to_string(vocab));
  const Output py =
      shell(kPython + " " + kScript + " " + config + " " + dir + " " + dtype + " " + std::to_string(vocab));
  ASSERT_EQ(py.code, 0) << "the reference needs Debian's python3-numpy (scripts/setup.sh): " << py.out;
  const std::string cfg = dir + "/model.toml";
  std::ofstream(cfg) << toml;
  const Output ev = shell(kBench + " eval --config " + cfg + " --weights " + dir + "/weights.safetensors --tokens " +
                          dir + "/tokens.bin --token-format " + token_format + " --dump-logits " + dir +
                          "/ours_logits.npy --dump-hidden " + dir + "/ours_hidden.npy --format json");
  ASSERT_EQ(ev.code, 0) << ev.out;
  const nlohmann::json j = nlohmann::json::parse(ev.out);
  EXPECT_NEAR(j["loss"].get<double>(), reference_loss(dir), 1e-5);
  EXPECT_EQ(j["positions"].get<int64_t>(), 37);
  EXPECT_EQ(j["windows"].get<int64_t>(), 3);
  for (const char* what : {"logits", "hidden"}) {
    const Npy ref = read_npy(dir + "/" + what + ".npy");
    const Npy ours = read_npy(dir + "/ours_" + what + ".npy");
    EXPECT_EQ(ref.descr, "<f8");
    EXPECT_EQ(ours.descr, "<f4");
    ASSERT_EQ(ours.shape, ref.shape) << what;
    ASSERT_EQ(ours.data.size(), ref.data.size());
    expect_agrees(ours, ref, config + " " + what);
  }
}

TEST(EvalHuggingFace, LlamaMatchesNumPy) { check_against_numpy("llama", kLlamaToml, "uint16"); }

TEST(EvalHuggingFace, LlamaBfloat16CheckpointMatchesNumPy) {
  check_against_numpy("llama", kLlamaToml, "uint16", "BF16");
}

TEST(EvalHuggingFace, PostNormLayerNormGeluLearnedMatchesNumPy) {
  check_against_numpy("postnorm", kPostNormToml, "auto");  // llm.c header: detected by its magic
}

/// A TOML twin with another vocabulary (model and data).
std::string with_vocab(const char* toml, int vocab) {
  std::string s = toml;
  for (size_t at = s.find("vocab_size = 64"); at != std::string::npos; at = s.find("vocab_size = 64", at))
    s.replace(at, 15, "vocab_size = " + std::to_string(vocab));
  return s;
}

// A vocabulary that is not a multiple of 64 (padded to 128 inside bench): the loss and the dumped
// logits ([positions, 100]) are the real vocabulary's, untied and tied.
TEST(EvalHuggingFace, PaddedVocabularyLlamaMatchesNumPy) {
  check_against_numpy("llama", with_vocab(kLlamaToml, 100), "uint16", "F32", 100);
}

TEST(EvalHuggingFace, PaddedVocabularyTiedPostNormMatchesNumPy) {
  check_against_numpy("postnorm", with_vocab(kPostNormToml, 100), "auto", "F32", 100);
}

TEST(Eval, SavedWeightsEvaluateBitForBit) {
  const std::string dir = fresh_dir("eval_round_trip");
  const std::string cfg = dir + "/model.toml";
  std::ofstream(cfg) << kLlamaToml;
  // The model the CLI builds: the file's first case with batch_size 1 (bench eval's default).
  std::string toml = std::string(kLlamaToml) + "[stability]\n";
  toml.insert(toml.find("[data]"), "batch_size = 1\n");
  Model m(test::resolve_first(toml).model, test::builtin_registry(), 7);
  save_weights(m, dir + "/w.safetensors");
  std::vector<int32_t> tokens(50);
  std::vector<uint32_t> raw(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) raw[i] = static_cast<uint32_t>(tokens[i] = (i * 13 + 5) % 64);
  std::ofstream(dir + "/t.u32", std::ios::binary)
      .write(reinterpret_cast<const char*>(raw.data()), static_cast<std::streamsize>(raw.size() * 4));
  RunContext ctx;
  const EvalResult want = evaluate_tokens(m, tokens, true, false, ctx);
  const Output ev = shell(kBench + " eval --config " + cfg + " --weights " + dir + "/w.safetensors --tokens " + dir +
                          "/t.u32 --token-format uint32 --dump-logits " + dir + "/l.npy --format json");
  ASSERT_EQ(ev.code, 0) << ev.out;
  EXPECT_EQ(nlohmann::json::parse(ev.out)["loss"].get<double>(), want.loss);
  const Npy got = read_npy(dir + "/l.npy");
  EXPECT_EQ(got.shape, (std::vector<int64_t>{49, 64}));
  ASSERT_EQ(got.f32.size(), want.logits.size());
  for (size_t i = 0; i < want.logits.size(); ++i) ASSERT_EQ(got.f32[i], static_cast<float>(want.logits[i])) << i;
}

TEST(Eval, StabilityKeepsFinalWeightsThatEvalReadsBack) {
  const std::string dir = fresh_dir("eval_save_weights");
  const std::string exp = dir + "/keep.toml";
  std::ofstream(exp) << kLlamaToml << "[stability]\nsteps = 3\neval_batches = 1\nsave_weights = true\n";
  const std::string db = dir + "/r.db";
  const Output run = shell(kBench + " -q --db " + db + " run " + exp);
  ASSERT_EQ(run.code, 0) << run.out;
  const Output q = shell(kBench + " --db " + db +
                         " query \"SELECT path || ' ' || bytes || ' ' || sha256 FROM artifacts JOIN cases ON "
                         "cases.id = case_id WHERE kind = 'weights'\" --format csv");
  ASSERT_EQ(q.code, 0) << q.out;
  EXPECT_NE(q.out.find("weights/run-1/case-0.safetensors "), std::string::npos) << q.out;
  const std::string weights = dir + "/weights/run-1/case-0.safetensors";
  ASSERT_TRUE(std::filesystem::exists(weights));
  EXPECT_NE(q.out.find(" " + std::to_string(std::filesystem::file_size(weights)) + " "), std::string::npos) << q.out;
  std::ifstream wf(weights, std::ios::binary);
  const std::string wbytes((std::istreambuf_iterator<char>(wf)), {});
  EXPECT_NE(q.out.find(" " + sha256_hex(wbytes)), std::string::npos) << q.out;
  // The kept weights are the trained ones: they differ from the seed's initialization.
  std::vector<uint16_t> toks(40);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint16_t>((i * 7) % 64);
  std::ofstream(dir + "/t.u16", std::ios::binary)
      .write(reinterpret_cast<const char*>(toks.data()), static_cast<std::streamsize>(toks.size() * 2));
  const std::string common = kBench + " eval --config " + exp + " --tokens " + dir + "/t.u16 --token-format uint16";
  const Output trained = shell(common + " --weights " + weights + " --format json");
  const Output init = shell(common + " --format json");
  ASSERT_EQ(trained.code, 0) << trained.out;
  ASSERT_EQ(init.code, 0) << init.out;
  EXPECT_NE(nlohmann::json::parse(trained.out)["loss"].get<double>(),
            nlohmann::json::parse(init.out)["loss"].get<double>());
}

TEST(Eval, ReportsMismatchedWeightsAndReadsText) {
  const std::string dir = fresh_dir("eval_errors");
  const Output py = shell(kPython + " " + kScript + " llama " + dir);
  ASSERT_EQ(py.code, 0) << py.out;
  std::ofstream(dir + "/post.toml") << kPostNormToml;
  const Output bad = shell(kBench + " eval --config " + dir + "/post.toml --weights " + dir +
                           "/weights.safetensors --tokens " + dir + "/tokens.bin --token-format uint16");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("model.embed_positions.weight: missing (the model needs [16, 32])"), std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find("model.layers.0.mlp.gate_proj.weight: not a tensor of this model"), std::string::npos);
  // Text as bytes, with the model's own initialization.
  std::ofstream(dir + "/byte.toml") << "[model]\nvocab_size = 256\nd_model = 32\nn_layers = 1\nseq_len = 8\n";
  std::ofstream(dir + "/hello.txt") << "hello, world: text as bytes";
  const Output text = shell(kBench + " eval --config " + dir + "/byte.toml --tokens " + dir + "/hello.txt");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("over 26 positions in 4 windows of 8"), std::string::npos) << text.out;
}

// Hugging Face model folders (config.json and the architecture's own tensor names and layouts),
// written by tests/cli/hf_models_reference.py with the float64 logits of the published
// architecture: `bench eval --config FOLDER --weights FOLDER` matches them within
// 1e-4 + 1e-4 |ref| in float32, for each model_type.
void check_hf_folder(const std::string& model_type, const std::string& eval_args = "") {
  const std::string dir = fresh_dir("hf_folder_" + model_type);
  const std::string script = std::string(BENCH_SOURCE_DIR) + "/tests/cli/hf_models_reference.py";
  const Output py = shell(kPython + " " + script + " " + model_type + " " + dir);
  ASSERT_EQ(py.code, 0) << "the reference needs Debian's python3-numpy (scripts/setup.sh): " << py.out;
  const Output ev =
      shell(kBench + " eval --config " + dir + " --weights " + dir + " --tokens " + dir +
            "/tokens.bin --token-format uint16 --dump-logits " + dir + "/ours.npy --format json " + eval_args);
  ASSERT_EQ(ev.code, 0) << ev.out;
  const nlohmann::json j = nlohmann::json::parse(ev.out);
  EXPECT_NEAR(j["loss"].get<double>(), reference_loss(dir), 1e-5);
  EXPECT_EQ(j["positions"].get<int64_t>(), 37);
  const Npy ref = read_npy(dir + "/logits.npy");
  const Npy ours = read_npy(dir + "/ours.npy");
  ASSERT_EQ(ours.shape, ref.shape);
  EXPECT_EQ(ours.shape, (std::vector<int64_t>{37, 320}));
  ASSERT_EQ(ours.data.size(), ref.data.size());
  const Agreement a = expect_agrees(ours, ref, model_type);
  std::printf("[ %s ] logits: max |ours - ref| = %.3g, max error / (1e-4 + 1e-4 |ref|) = %.3g, max |ref| = %.3g\n",
              model_type.c_str(), a.max_abs, a.worst, a.scale);
}

TEST(EvalHuggingFaceFolder, Llama) { check_hf_folder("llama"); }
TEST(EvalHuggingFaceFolder, MistralSlidingWindow) { check_hf_folder("mistral"); }
TEST(EvalHuggingFaceFolder, Qwen2Biases) { check_hf_folder("qwen2"); }
TEST(EvalHuggingFaceFolder, Gemma2) { check_hf_folder("gemma2"); }
TEST(EvalHuggingFaceFolder, Olmo2) { check_hf_folder("olmo2"); }
TEST(EvalHuggingFaceFolder, Phi3FusedTensors) { check_hf_folder("phi3"); }
TEST(EvalHuggingFaceFolder, GptNeoxInterleavedShardedCheckpoint) { check_hf_folder("gpt_neox"); }
TEST(EvalHuggingFaceFolder, FalconMultiQuery) { check_hf_folder("falcon"); }
TEST(EvalHuggingFaceFolder, FalconMultiHeadInterleavedWithBiases) { check_hf_folder("falcon_mha"); }
TEST(EvalHuggingFaceFolder, LlamaWithLlama3RopeScaling) { check_hf_folder("llama_llama3"); }
TEST(EvalHuggingFaceFolder, Phi3WithLongRope) { check_hf_folder("phi3_longrope"); }
// Windows of 8 within L_orig = 8: the short factors, and the attention factor sqrt(1 + ln 2 / ln 8)
// as transformers applies it at every length.
TEST(EvalHuggingFaceFolder, Phi3WithLongRopeWithinTheOriginalLength) {
  check_hf_folder("phi3_longrope_short", "--seq-len 8");
}
// null where real checkpoints have it: Mistral 7B v0.3's "sliding_window": null is no window,
// "head_dim": null is hidden_size / heads; Gemma 2's null soft-caps are none.
TEST(EvalHuggingFaceFolder, MistralNullWindowAndHeadDim) { check_hf_folder("mistral_null"); }
TEST(EvalHuggingFaceFolder, Gemma2NullSoftCaps) { check_hf_folder("gemma2_null"); }
TEST(EvalHuggingFaceFolder, Gpt2Conv1DLearnedPositionsTied) { check_hf_folder("gpt2"); }
TEST(EvalHuggingFaceFolder, Gpt2UnderTheHubsNamesWithoutPrefix) { check_hf_folder("gpt2_hub"); }
TEST(EvalHuggingFaceFolder, Gemma1) { check_hf_folder("gemma"); }
TEST(EvalHuggingFaceFolder, Olmo1NonParametricLayerNorm) { check_hf_folder("olmo"); }
// OLMo 1.7's clip_qkv: q, k and v clamped after their projections (and biases), before RoPE.
TEST(EvalHuggingFaceFolder, Olmo1ClipQkv) {
  check_hf_folder("olmo_clip");
  std::ifstream f(dir_path("hf_folder_olmo_clip") + "/clipped.txt");
  double clipped = -1;
  f >> clipped;
  EXPECT_GT(clipped, 0.1) << "too few values clamped for the test to show the clip";
  EXPECT_LT(clipped, 0.9);
}

// `bench calc` takes a Hugging Face folder, and an experiment's [model] takes one with `from`, its
// keys over the configuration's: "Qwen2.5-0.5B with post-norm and 4 layers" is one short file.
TEST(CalcHuggingFace, FolderAndModelFrom) {
  const std::string qwen = std::string(BENCH_SOURCE_DIR) + "/tests/accounting/hf/Qwen2.5-0.5B";
  const Output folder = shell(kBench + " calc " + qwen + " --format json");
  ASSERT_EQ(folder.code, 0) << folder.out;
  EXPECT_EQ(nlohmann::json::parse(folder.out).at(0)["params"].get<int64_t>(), 494032768);
  const Output file = shell(kBench + " calc " + qwen + "/config.json --format json");
  ASSERT_EQ(file.code, 0) << file.out;
  EXPECT_EQ(nlohmann::json::parse(file.out).at(0)["params"].get<int64_t>(), 494032768);
  const std::string dir = fresh_dir("calc_from");
  std::ofstream(dir + "/post.toml") << "name = \"qwen-post\"\n[model]\nfrom = \"" << qwen
                                    << "\"\nnorm_position = \"post\"\nn_layers = 4\n";
  const Output post = shell(kBench + " calc " + dir + "/post.toml --format json");
  ASSERT_EQ(post.code, 0) << post.out;
  // 4 layers of 14,912,384 and the tied embedding; post-norm has no final norm.
  EXPECT_EQ(nlohmann::json::parse(post.out).at(0)["params"].get<int64_t>(), 4 * 14912384 + 151936 * 896);
  std::filesystem::create_directories(dir + "/bad");
  std::ofstream(dir + "/bad/config.json") << "{\n  \"model_type\": \"qwen2\",\n  \"hidden_size\": 64,\n"
                                          << "  \"use_mrope\": true,\n  \"lora_rank\": 8\n}\n";
  const Output bad = shell(kBench + " calc " + dir + "/bad");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find(dir + "/bad/config.json:4:3: field 'use_mrope' = true is not supported"), std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find("(and 5 more; bench validate lists them)"), std::string::npos) << bad.out;
  const Output listed = shell(kBench + " validate " + dir + "/bad");
  EXPECT_NE(listed.out.find(dir + "/bad/config.json:4:3: field 'use_mrope' = true is not supported"), std::string::npos)
      << listed.out;
  EXPECT_NE(listed.out.find(dir + "/bad/config.json:5:3: field 'lora_rank' (8) of model_type 'qwen2' is not supported"),
            std::string::npos)
      << listed.out;
  EXPECT_NE(listed.out.find(dir + "/bad/config.json (vocab_size): field 'vocab_size' is missing; qwen2 needs it"),
            std::string::npos)
      << listed.out;
}

// A checkpoint saved under GPT-NeoX's names (the per-head interleaved query_key_value), Falcon's,
// Phi-3's and GPT-2's (Conv1D: transposed) reads back bit for bit: the layouts are inverse
// permutations.
TEST(EvalHuggingFaceFolder, SavedUnderEachLayoutReadsBack) {
  for (const char* type : {"gpt_neox", "falcon", "phi3", "olmo2", "gpt2", "gemma", "olmo"}) {
    SCOPED_TRACE(type);
    const std::string dir = fresh_dir(std::string("hf_save_") + type);
    const std::string script = std::string(BENCH_SOURCE_DIR) + "/tests/cli/hf_models_reference.py";
    ASSERT_EQ(shell(kPython + " " + script + " " + type + " " + dir).code, 0);
    const std::string toml = "[model]\nfrom = \"" + dir + "\"\nbatch_size = 1\n[stability]\n";
    Model m(test::resolve_first(toml).model, test::builtin_registry(), 3);
    save_weights(m, dir + "/ours.safetensors");
    Model back(test::resolve_first(toml).model, test::builtin_registry(), 4);
    load_weights(back, dir + "/ours.safetensors");
    for (const Param* p : m.params()) {
      const Param* q = back.find_param(p->name);
      ASSERT_NE(q, nullptr);
      const float* a = p->value.data<float>();
      const float* b = q->value.data<float>();
      for (int64_t i = 0; i < p->value.numel(); ++i) ASSERT_EQ(a[i], b[i]) << p->name << " " << i;
    }
  }
}

}  // namespace
}  // namespace eval_test
}  // namespace bench
