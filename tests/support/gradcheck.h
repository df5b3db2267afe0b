// Test support: the float64 whole-model gradient check, for any model configuration.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "bench/interfaces.h"
#include "bench/random.h"
#include "model/model.h"
#include "support/toml_case.h"

namespace bench::test {

/// A tiny float64 experiment around extra [model] lines (d_model 8, 2 layers, seq 6, batch 2,
/// vocabulary 16, SwiGLU d_ff 12 unless the lines set them).
inline std::string tiny_float64_experiment(const std::string& model_lines) {
  auto has = [&](const char* k) { return model_lines.find(k) != std::string::npos; };
  std::string s = "[model]\nn_layers = 2\nseq_len = 6\nbatch_size = 2\ndtype = \"float64\"\ninit_std = 0.3\n";
  if (!has("d_model")) s += "d_model = 8\n";
  if (!has("n_heads")) s += "n_heads = 2\n";
  if (!has("ffn")) s += "ffn = { type = \"swiglu\", d_ff = 12 }\n";
  return s + model_lines + "\n[data]\ntype = \"synthetic\"\nvocab_size = 16\nreference_tokens = 2048\n[stability]\n";
}

/// Build the model, run forward and backward once in float64, and check every parameter's
/// gradient (a sample of entries of each tensor) against central finite differences of the
/// objective. With `training_mode` the perturbed objectives run in training mode at the same
/// step and seed, so that dropout masks are the same. With `jitter`, every parameter initialized
/// to ones or zeros (gains, biases) first moves by N(0, 0.3^2), so that the gradients are checked
/// away from the identity and from zero biases. Returns the number of entries checked; the
/// largest |gradient - difference| is recorded as the test's property "max_abs_error".
inline int expect_gradients_match(const std::string& model_lines, bool training_mode = false, bool jitter = false,
                                  tile::Backend backend = tile::Backend::kCpu) {
  ResolvedCase rc = resolve_first(tiny_float64_experiment(model_lines));
  rc.model.backend = backend;  // set up for where it runs (the emulated device composes as a device)
  Model model(rc.model, builtin_registry(), 7);
  if (jitter) {
    Rng rng(13);
    for (Param* p : model.params()) {
      if (p->init.kind != Init::Kind::kOnes && p->init.kind != Init::Kind::kZeros) continue;
      double* v = p->value.data<double>();
      for (int64_t i = 0; i < p->value.numel(); ++i) v[i] += 0.3 * rng.normal();
    }
  }
  const ModelDims& d = rc.model.dims;
  std::unique_ptr<Component> ds = builtin_registry().create(*rc.data.info, rc.data.params);
  std::vector<int32_t> in(static_cast<size_t>(d.tokens())), tg(in.size());
  dynamic_cast<Dataset*>(ds.get())->batch(Split::kTrain, 3, d.batch_size, d.seq_len, in.data(), tg.data());

  RunContext ctx;
  ctx.exec.backend = backend;
  ctx.probes = false;
  ctx.seed = 5;
  ctx.step = 3;
  ctx.training = true;
  model.zero_grad();
  const double base = model.forward(in.data(), tg.data(), ctx).objective();
  EXPECT_TRUE(std::isfinite(base));
  model.backward(ctx);

  ctx.training = training_mode;
  auto objective = [&] { return model.forward(in.data(), tg.data(), ctx).objective(); };
  const double h = 1e-5;
  int checked = 0;
  double max_err = 0;
  for (Param* p : model.params()) {
    double* v = p->value.data<double>();
    const double* g = p->grad.data<double>();
    const int64_t n = p->value.numel();
    for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 5)) {
      const double keep = v[i];
      v[i] = keep + h;
      const double lp = objective();
      v[i] = keep - h;
      const double lm = objective();
      v[i] = keep;
      const double fd = (lp - lm) / (2 * h);
      max_err = std::max(max_err, std::abs(g[i] - fd));
      EXPECT_NEAR(g[i], fd, 1e-7 + 1e-5 * std::abs(fd)) << p->name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
  ::testing::Test::RecordProperty("max_abs_error", ::testing::PrintToString(max_err));
  return checked;
}

}  // namespace bench::test
