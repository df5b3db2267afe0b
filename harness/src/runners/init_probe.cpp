#include "runners/init_probe.h"

#include <cmath>
#include <string>

#include "bench/interfaces.h"
#include "model/model.h"

namespace bench {

InitProbe probe_initialization(const ResolvedCase& rc, RunnerEnv& env, Dataset& dataset, int64_t batches,
                               int64_t seeds) {
  const ModelDims& d = rc.model.dims;
  const auto layers = static_cast<size_t>(d.n_layers);
  InitProbe out;
  out.grad_norm.assign(layers, 0.0);
  out.block_rms.assign(layers, 0.0);
  std::vector<int32_t> inputs(static_cast<size_t>(d.tokens())), targets(inputs.size());
  const double n = static_cast<double>(batches * seeds);
  for (int64_t s = 0; s < seeds; ++s) {
    const auto seed = static_cast<uint64_t>(rc.seed + s);
    Model model(rc.model, env.registry, seed);
    out.n_params = model.n_params();
    out.n_params_embedding = model.n_params_embedding();
    RunContext ctx;
    ctx.seed = seed;
    ctx.training = true;
    ctx.probes = true;
    ctx.layer_probes = true;
    for (int64_t b = 0; b < batches; ++b) {
      env.progress.update(env.prefix + " · init probe seed " + std::to_string(s + 1) + " batch " +
                          std::to_string(b + 1));
      dataset.batch(Split::kTrain, b, d.batch_size, d.seq_len, inputs.data(), targets.data());
      ctx.step = b;
      ctx.clear_probes();
      model.zero_grad();
      out.loss += model.forward(inputs.data(), targets.data(), ctx).loss / n;
      model.backward(ctx);
      const auto grads = model.squares_by_layer(LayerQuantity::kGradient);
      const auto probes = ctx.probe_values();
      for (size_t i = 0; i < layers; ++i) {
        out.grad_norm[i] += std::sqrt(grads[i].sum_squares) / n;
        out.block_rms[i] += probes.at("block_rms/" + std::to_string(i)) / n;
      }
      out.embed_rms += probes.at("embed_rms") / n;
    }
  }
  out.growth_exponent = std::log(out.block_rms.back() / out.embed_rms) / static_cast<double>(layers);
  return out;
}

void record_init_probe(const InitProbe& ip, CaseResult& out) {
  for (size_t i = 0; i < ip.grad_norm.size(); ++i) {
    const auto layer = static_cast<int64_t>(i);
    out.series.push_back({"init_grad_norm", layer, -1, ip.grad_norm[i]});
    out.series.push_back({"init_block_rms", layer, -1, ip.block_rms[i]});
  }
  out.metrics.push_back({"init_growth_exponent", ip.growth_exponent, "1/layer"});
  out.metrics.push_back({"init_embed_rms", ip.embed_rms, ""});
  out.metrics.push_back({"init_grad_norm_first", ip.grad_norm.front(), ""});
  out.metrics.push_back({"init_grad_norm_last", ip.grad_norm.back(), ""});
  out.metrics.push_back({"init_grad_norm_ratio", ip.grad_norm.back() / ip.grad_norm.front(), ""});
  out.metrics.push_back({"init_loss", ip.loss, "nats"});
}

}  // namespace bench
