// A captured step's side of the model (model/model.h): the device probes gathered into one block
// at the end of a captured forward, the layer probes and series sums a captured logging step
// leaves there too, the batch staged before a replay, and the block read after it
// (bench/device_probes.h; docs/gpu-path.md, "CUDA graphs").
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "bench/ops.h"
#include "kernels/memory.h"
#include "kernels/probes.h"
#include "model/model.h"

namespace bench {

int64_t Model::probe_slot() {
  replay_.slots = std::max(replay_.slots, kProbeSlotsFixed);  // after the fixed ones, as gather_probes starts
  if (replay_.slots >= probe_block_.numel())
    throw Error("a captured step leaves more than " + std::to_string(probe_block_.numel() - kProbeSlotsFixed) +
                " values in device memory");
  return replay_.slots++;
}

void Model::gather_probes(std::vector<DeviceProbe> probes) {
  replay_ = ReplayLayout{};
  replay_.slots = kProbeSlotsFixed;
  if (probes.empty()) return;
  if (!probe_block_.defined())
    throw Error("a captured step's probes stay in device memory: this model is in host memory");
  auto* block = static_cast<double*>(probe_block_.raw());
  for (DeviceProbe& p : probes) {
    const bool loss = p.kind == DeviceProbe::Kind::kLoss;
    const int64_t at = loss ? kProbeLoss : probe_slot();
    const int64_t n = loss ? kernels::kLossSlots : 1;
    kernels::copy_bytes(block + at, p.at, static_cast<size_t>(n) * sizeof(double));  // within the device: enqueued
    if (loss) {
      replay_.has_loss = true;
    } else {
      p.at = block + at;  // where the host finds it after the replay
      replay_.probes.push_back(std::move(p));
    }
  }
}

void Model::residual_rms_probes(RunContext& ctx) {
  const auto count = [](const Tensor& t) { return static_cast<double>(t.numel()); };
  const auto name = [](size_t i) { return i == 0 ? std::string("embed_rms") : "block_rms/" + std::to_string(i - 1); };
  if (!ctx.capturing) {
    for (size_t i = 0; i < acts_.size(); ++i)
      ctx.probe_mean(name(i), std::sqrt(ops::sum_squares(ctx, acts_[i]) / count(acts_[i])));
    return;
  }
  // ops::sum_squares' bits (kernels::sum_of_at), a sum per probe after the shared partials; the
  // forward's gather copies them into the probe block.
  auto* partial = static_cast<double*>(probe_work_.raw());
  double* sums = partial + probe_work_.numel() - static_cast<int64_t>(acts_.size());
  for (size_t i = 0; i < acts_.size(); ++i) {
    dispatch_float(acts_[i].dtype(), [&]<class T>() {
      kernels::sum_of_at<T>(ctx.exec, kernels::SumOf::kSquares, acts_[i].data<T>(), acts_[i].numel(), partial,
                            sums + i);
    });
    probe_rms_at(ctx, name(i), sums + i, count(acts_[i]));
  }
}

void Model::squares_by_layer_into(LayerQuantity what, RunContext& ctx) {
  if (!ctx.capturing || !probe_block_.defined())
    throw Error("squares_by_layer_into: only while a step of a model in device memory is captured");
  bind(ctx);
  const Tensor& source = what == LayerQuantity::kGradient ? grads_ : master_.defined() ? master_ : values_;
  const bool update = what == LayerQuantity::kUpdate;
  if (update && !snapshot_valid_)
    throw Error("squares_by_layer_into(kUpdate) needs a snapshot_parameters() since the last one");
  const size_t esize = dtype_size(spec_.dtype);
  auto* partial = static_cast<double*>(probe_work_.raw());
  auto* block = static_cast<double*>(probe_block_.raw());
  dispatch_float(source.dtype(), [&]<class T>() {
    T* diff = update ? snapshot_.data<T>() : nullptr;
    if (update) {  // as squares_by_layer: snapshot = snapshot - value, in place
      kernels::axpy<T>(ctx.exec, -1, source.data<T>(), diff, source.numel());
      snapshot_valid_ = false;
    }
    const T* base = update ? diff : source.data<T>();
    for (const auto& p : params_) {
      const int layer = layer_of(p->name);
      if (layer < 0 || layer >= spec_.dims.n_layers) continue;
      const int64_t offset = (static_cast<const char*>(p->value.raw()) - static_cast<const char*>(values_.raw())) /
                             static_cast<int64_t>(esize);
      const int64_t at = probe_slot();
      kernels::sum_of_at<T>(ctx.exec, kernels::SumOf::kSquares, base + offset, p->value.numel(), partial, block + at);
      replay_.layer_terms.push_back({what, layer, p->value.numel(), at});
    }
  });
}

void Model::parameter_norm_into(RunContext& ctx) {
  if (!ctx.capturing || !probe_block_.defined())
    throw Error("parameter_norm_into: only while a step of a model in device memory is captured");
  bind(ctx);
  auto* partial = static_cast<double*>(probe_work_.raw());
  const int64_t at = probe_slot();
  dispatch_float(values_.dtype(), [&]<class T>() {
    kernels::sum_of_at<T>(ctx.exec, kernels::SumOf::kSquares, values_.data<T>(), values_.numel(), partial,
                          static_cast<double*>(probe_block_.raw()) + at);
  });
  replay_.param_norm_at = at;
}

void Model::stage_step(int64_t step) {
  if (step_slot_.defined()) kernels::copy_bytes(step_slot_.raw(), &step, sizeof step);
}

void Model::stage_batch(const int32_t* inputs, const int32_t* targets) {
  if (inputs_.defined()) {
    kernels::copy_bytes(inputs_.raw(), inputs, inputs_.bytes());
    kernels::copy_bytes(targets_.raw(), targets, targets_.bytes());
  }
  for (const BatchStaging& f : staging_) f(inputs, targets);
}

ReplayReadout Model::read_replay(RunContext& ctx, const ReplayLayout& layout) const {
  ReplayReadout out;
  if (!probe_block_.defined()) return out;
  std::vector<double> host(static_cast<size_t>(std::max<int64_t>(layout.slots, kProbeSlotsFixed)));
  kernels::copy_bytes(host.data(), probe_block_.raw(), host.size() * sizeof(double));  // waits for the replay
  out.grad_norm = std::sqrt(host[kProbeGradSquares]);
  if (layout.has_loss) {
    out.info.loss = host[kProbeLoss + kernels::kLossMean];
    out.info.z_mean = host[kProbeLoss + kernels::kZMean];
    out.info.z_loss = host[kProbeLoss + kernels::kZLoss];
  }
  const auto* block = static_cast<const double*>(probe_block_.raw());
  for (const DeviceProbe& p : layout.probes) {
    const double v = host[static_cast<size_t>(p.at - block)] / p.divisor;
    if (p.kind == DeviceProbe::Kind::kMax)
      ctx.probe_max(p.name, v);
    else
      ctx.probe_mean(p.name, p.kind == DeviceProbe::Kind::kRms ? std::sqrt(v) : v, p.weight);
  }
  // The layer series' sums, added per block in parameter order as squares_by_layer adds them.
  if (!layout.layer_terms.empty() || layout.param_norm_at >= 0) {
    out.has_sums = true;
    const auto layers = static_cast<size_t>(spec_.dims.n_layers);
    out.sums.gradient.resize(layers);
    out.sums.update.resize(layers);
    for (const ReplayLayout::LayerTerm& t : layout.layer_terms) {
      LayerSquares& s =
          (t.what == LayerQuantity::kGradient ? out.sums.gradient : out.sums.update).at(static_cast<size_t>(t.layer));
      s.sum_squares += host[static_cast<size_t>(t.at)];
      s.count += t.count;
    }
    if (layout.param_norm_at >= 0) out.sums.param_norm = std::sqrt(host[static_cast<size_t>(layout.param_norm_at)]);
  }
  return out;
}

}  // namespace bench
