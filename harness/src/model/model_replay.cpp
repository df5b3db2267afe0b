// A captured step's side of the model (model/model.h): the device probes gathered into one block
// at the end of a captured forward, the batch staged before a replay, and the block read after it
// (bench/device_probes.h; docs/kernels.md, "CUDA graphs").
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/memory.h"
#include "kernels/probes.h"
#include "model/model.h"

namespace bench {

void Model::gather_probes(std::vector<DeviceProbe> probes) {
  replay_ = Replay{};
  if (probes.empty()) return;
  if (!probe_block_.defined())
    throw Error("a captured step's probes stay in device memory: this model is in host memory");
  auto* block = static_cast<double*>(probe_block_.raw());
  int64_t used = kProbeSlotsFixed;
  for (DeviceProbe& p : probes) {
    const bool loss = p.kind == DeviceProbe::Kind::kLoss;
    const int64_t at = loss ? kProbeLoss : used;
    const int64_t n = loss ? kernels::kLossSlots : 1;
    if (at + n > probe_block_.numel())
      throw Error("a captured step leaves more than " + std::to_string(probe_block_.numel() - kProbeSlotsFixed) +
                  " probes in device memory");
    kernels::copy_bytes(block + at, p.at, static_cast<size_t>(n) * sizeof(double));  // within the device: enqueued
    if (loss) {
      replay_.has_loss = true;
    } else {
      p.at = block + at;  // where the host finds it after the replay
      ++used;
    }
    if (!loss) replay_.probes.push_back(std::move(p));
  }
  replay_.slots = used;
}

void Model::stage_batch(const int32_t* inputs, const int32_t* targets) {
  if (inputs_.defined()) {
    kernels::copy_bytes(inputs_.raw(), inputs, inputs_.bytes());
    kernels::copy_bytes(targets_.raw(), targets, targets_.bytes());
  }
  for (const BatchStaging& f : staging_) f(inputs, targets);
}

ReplayReadout Model::read_replay(RunContext& ctx) const {
  ReplayReadout out;
  if (!probe_block_.defined()) return out;
  std::vector<double> host(static_cast<size_t>(replay_.slots));
  kernels::copy_bytes(host.data(), probe_block_.raw(), host.size() * sizeof(double));  // waits for the replay
  out.grad_norm = std::sqrt(host[kProbeGradSquares]);
  if (replay_.has_loss) {
    out.info.loss = host[kProbeLoss + kernels::kLossMean];
    out.info.z_mean = host[kProbeLoss + kernels::kZMean];
    out.info.z_loss = host[kProbeLoss + kernels::kZLoss];
  }
  const auto* block = static_cast<const double*>(probe_block_.raw());
  for (const DeviceProbe& p : replay_.probes) {
    const double v = host[static_cast<size_t>(p.at - block)] / p.divisor;
    if (p.kind == DeviceProbe::Kind::kMax)
      ctx.probe_max(p.name, v);
    else
      ctx.probe_mean(p.name, v, p.weight);
  }
  return out;
}

}  // namespace bench
