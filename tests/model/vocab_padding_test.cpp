// The padded vocabulary (ModelDims::padded_vocab): a model whose vocabulary is not a multiple of
// 64 against the same model computed unpadded (vocab_multiple = 1, the same seed: the padding
// draws no random numbers, so the real weights are the same). Loss, logits, the gradient of every
// real parameter and the parameter counts agree; the padding rows' gradient is exactly 0 and their
// values stay exactly 0 through AdamW steps with weight decay (float64, float32 and bf16 with its
// master copy), untied and tied; a checkpoint holds the real shapes, byte for byte the unpadded
// model's file, and loads back.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bench/interfaces.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "support/toml_case.h"

namespace bench {
namespace vocab_padding_test {
namespace {

constexpr int64_t kVocab = 100;  // padded to 128

std::string experiment(const std::string& dtype, bool tied) {
  return "[model]\nvocab_size = 100\nd_model = 16\nn_layers = 2\nn_heads = 2\nseq_len = 8\nbatch_size = 2\n"
         "dtype = \"" +
         dtype + "\"\ninit_std = 0.3\ntie_embeddings = " + (tied ? "true" : "false") +
         "\nhead = { type = \"lm_head\", z_loss = 0.01 }\n"
         "[data]\ntype = \"synthetic\"\nvocab_size = 100\nreference_tokens = 2048\n[stability]\n";
}

/// The case's spec, padded (the default) or not (vocab_multiple = 1).
ModelSpec spec_of(const std::string& dtype, bool tied, bool padded) {
  ModelSpec s = test::resolve_first(experiment(dtype, tied)).model;
  if (!padded) s.dims.vocab_multiple = 1;
  return s;
}

/// Every element of a tensor (host memory) as double.
std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  dispatch_float(t.dtype(), [&]<class T>() {
    for (size_t i = 0; i < out.size(); ++i) out[i] = scalar_value(t.data<T>()[i]);
  });
  return out;
}

/// The padding rows of p's value (or gradient) as doubles: all must be 0.
std::vector<double> padding_of(const Tensor& padded, const Param& p) {
  const std::vector<double> all = values_of(padded);
  return {all.begin() + p.value.numel(), all.end()};
}

/// The parameter that holds the vocabulary rows the head multiplies by.
const Param& vocab_param(const Model& m) {
  const Param* p = m.find_param(m.spec().dims.tie_embeddings ? "embed.weight" : "head.weight");
  if (p == nullptr) throw Error("no vocabulary parameter");
  return *p;
}

struct Batch {
  std::vector<int32_t> in, tg;
};
Batch batch(const Model& m, int step) {
  Batch b;
  const auto n = static_cast<size_t>(m.spec().dims.tokens());
  for (size_t i = 0; i < n; ++i) {
    b.in.push_back(static_cast<int32_t>((i * 37 + static_cast<size_t>(step) * 11) % kVocab));
    // The last real token is a target (its gradient column is the one next to the padding).
    b.tg.push_back(i == 3 ? -1 : static_cast<int32_t>(i == 5 ? kVocab - 1 : (i * 13 + 7) % kVocab));
  }
  return b;
}

class VocabPadding : public ::testing::TestWithParam<bool> {};  // tied?

TEST_P(VocabPadding, MatchesTheUnpaddedModelFloat64) {
  const bool tied = GetParam();
  Model padded(spec_of("float64", tied, true), test::builtin_registry(), 3);
  Model plain(spec_of("float64", tied, false), test::builtin_registry(), 3);
  const Param& w = vocab_param(padded);
  EXPECT_EQ(w.pad_rows, 28);
  EXPECT_EQ(vocab_param(plain).pad_rows, 0);
  EXPECT_EQ(w.shape, (Shape{kVocab, 16}));
  // Parameter counts: the real vocabulary's.
  EXPECT_EQ(padded.n_params(), plain.n_params());
  EXPECT_EQ(padded.n_params_embedding(), plain.n_params_embedding());
  EXPECT_EQ(padded.n_params_embedding(), kVocab * 16);
  ASSERT_EQ(padded.params().size(), plain.params().size());
  EXPECT_EQ(padded.cost().flops_forward, plain.cost().flops_forward);  // model FLOPs: the real vocabulary
  EXPECT_GT(padded.cost().bytes_forward, plain.cost().bytes_forward);  // bytes: what is moved

  RunContext ctx;
  ctx.probes = true;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const Batch b = batch(padded, step);
    padded.zero_grad();
    plain.zero_grad();
    ctx.clear_probes();
    const LossInfo lp = padded.forward(b.in.data(), b.tg.data(), ctx);
    const auto probes_padded = ctx.probe_values();
    ctx.clear_probes();
    const LossInfo lu = plain.forward(b.in.data(), b.tg.data(), ctx);
    const auto probes_plain = ctx.probe_values();
    EXPECT_NEAR(lp.loss, lu.loss, 1e-13 * std::abs(lu.loss));
    EXPECT_NEAR(lp.z_mean, lu.z_mean, 1e-13 * std::abs(lu.z_mean) + 1e-15);
    EXPECT_NEAR(lp.z_loss, lu.z_loss, 1e-13 * std::abs(lu.z_loss) + 1e-15);
    EXPECT_NEAR(probes_padded.at("logit_mean"), probes_plain.at("logit_mean"), 1e-14);
    padded.backward(ctx);
    plain.backward(ctx);
    for (size_t i = 0; i < padded.params().size(); ++i) {
      const Param& a = *padded.params()[i];
      const Param& u = *plain.params()[i];
      ASSERT_EQ(a.name, u.name);
      ASSERT_EQ(a.shape, u.shape);
      const std::vector<double> ga = values_of(a.grad), gu = values_of(u.grad);
      for (size_t j = 0; j < ga.size(); ++j)
        ASSERT_NEAR(ga[j], gu[j], 1e-12 * (1 + std::abs(gu[j]))) << a.name << "[" << j << "]";
      if (a.pad_rows > 0) {
        EXPECT_EQ(padding_of(a.padded_grad(), a), std::vector<double>(static_cast<size_t>(a.pad_rows * 16), 0.0));
      }
    }
    EXPECT_NEAR(padded.grad_norm(ctx), plain.grad_norm(ctx), 1e-13 * plain.grad_norm(ctx));
    OptimizerStep opt;
    opt.lr = 1e-2;
    opt.weight_decay = 0.1;
    opt.decay_lr = opt.lr;
    (void)padded.optimizer_step(opt, ctx);
    (void)plain.optimizer_step(opt, ctx);
    EXPECT_EQ(padding_of(w.padded_value(), w), std::vector<double>(static_cast<size_t>(w.pad_rows * 16), 0.0));
  }
  // The logits of a forward without training: the real columns the unpadded model's, the
  // padding columns 0 (h times zero rows), to be left out by their readers.
  ctx.training = false;
  const Batch b = batch(padded, 9);
  (void)padded.forward(b.in.data(), b.tg.data(), ctx);
  (void)plain.forward(b.in.data(), b.tg.data(), ctx);
  ASSERT_NE(padded.logits(), nullptr);
  ASSERT_EQ(padded.logits()->shape(), (Shape{16, 128}));
  ASSERT_EQ(plain.logits()->shape(), (Shape{16, kVocab}));
  const std::vector<double> la = values_of(*padded.logits()), lu = values_of(*plain.logits());
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t v = 0; v < 128; ++v) {
      const double got = la[static_cast<size_t>(r * 128 + v)];
      if (v < kVocab) {
        ASSERT_NEAR(got, lu[static_cast<size_t>(r * kVocab + v)], 1e-12) << r << ", " << v;
      } else {
        ASSERT_EQ(got, 0.0) << r << ", " << v;
      }
    }
}

TEST_P(VocabPadding, PaddingStaysZeroInFloat32AndBf16) {
  const bool tied = GetParam();
  for (const char* dtype : {"float32", "bfloat16"}) {
    SCOPED_TRACE(dtype);
    Model padded(spec_of(dtype, tied, true), test::builtin_registry(), 3);
    Model plain(spec_of(dtype, tied, false), test::builtin_registry(), 3);
    const Param& w = vocab_param(padded);
    RunContext ctx;
    OptimizerStep opt;
    opt.lr = 1e-2;
    opt.weight_decay = 0.1;
    opt.decay_lr = opt.lr;
    opt.grad_clip = 0.5;
    for (int step = 0; step < 4; ++step) {
      const Batch b = batch(padded, step);
      padded.zero_grad();
      plain.zero_grad();
      const double lp = padded.forward(b.in.data(), b.tg.data(), ctx).loss;
      const double lu = plain.forward(b.in.data(), b.tg.data(), ctx).loss;
      EXPECT_NEAR(lp, lu, 1e-5 * std::abs(lu)) << "step " << step;
      padded.backward(ctx);
      plain.backward(ctx);
      EXPECT_EQ(padding_of(w.padded_grad(), w), std::vector<double>(static_cast<size_t>(w.pad_rows * 16), 0.0));
      (void)padded.optimizer_step(opt, ctx);
      (void)plain.optimizer_step(opt, ctx);
      EXPECT_EQ(padding_of(w.padded_value(), w), std::vector<double>(static_cast<size_t>(w.pad_rows * 16), 0.0));
      const Tensor master = padded.master_of(w);
      if (master.defined()) {  // bf16: the float master copy's padding too
        const Tensor all(master.raw(), DType::kFloat32, w.padded_shape());
        EXPECT_EQ(padding_of(all, w), std::vector<double>(static_cast<size_t>(w.pad_rows * 16), 0.0));
      }
    }
  }
}

TEST_P(VocabPadding, CheckpointHoldsTheRealShapeAndLoadsBack) {
  const bool tied = GetParam();
  Model padded(spec_of("float32", tied, true), test::builtin_registry(), 3);
  Model plain(spec_of("float32", tied, false), test::builtin_registry(), 3);
  for (const CheckpointTensor& t : checkpoint_layout(padded)) {
    if (t.param == vocab_param(padded).name) {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{kVocab, 16})) << t.name;
    }
  }
  const auto dir = std::filesystem::temp_directory_path() / ("bench_vocab_padding_" + std::to_string(tied));
  std::filesystem::create_directories(dir);
  const std::string a = (dir / "padded.safetensors").string(), u = (dir / "plain.safetensors").string();
  save_weights(padded, a);
  save_weights(plain, u);
  const auto bytes = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(bytes(a), bytes(u));  // the same file as the unpadded model's
  Model loaded(spec_of("float32", tied, true), test::builtin_registry(), 99);
  load_weights(loaded, a);
  for (size_t i = 0; i < loaded.params().size(); ++i)
    EXPECT_EQ(values_of(loaded.params()[i]->value), values_of(padded.params()[i]->value)) << loaded.params()[i]->name;
  const Param& w = vocab_param(loaded);
  EXPECT_EQ(padding_of(w.padded_value(), w), std::vector<double>(static_cast<size_t>(w.pad_rows * 16), 0.0));
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Heads, VocabPadding, ::testing::Bool(),
                         [](const auto& tp) { return tp.param ? "tied" : "untied"; });

TEST(VocabPaddingDims, RoundsUpToSixtyFour) {
  ModelDims d;
  for (const auto& [v, p] : std::vector<std::pair<int64_t, int64_t>>{
           {50257, 50304}, {256, 256}, {1, 64}, {64, 64}, {65, 128}, {32000, 32000}, {128256, 128256}}) {
    d.vocab_size = v;
    EXPECT_EQ(d.padded_vocab(), p) << v;
  }
  d.vocab_multiple = 1;
  d.vocab_size = 50257;
  EXPECT_EQ(d.padded_vocab(), 50257);
}

TEST(VocabPaddingDims, DescribeNamesThePadding) {
  const Model m(spec_of("float32", false, true), test::builtin_registry(), 3, true);
  EXPECT_NE(m.describe().find("head.weight [100, 16] (stored with 28 zero padding rows)"), std::string::npos)
      << m.describe();
}

}  // namespace
}  // namespace vocab_padding_test
}  // namespace bench
