// defines: bench::DeviceProbe, probe_max_at, probe_mean_at, probe_rms_at, loss_at, BatchStaging, before_replay,
//          CaptureRecord, take_capture_record — what a captured step leaves in device memory for
//          the host to read after each replay, and the host work each replay's batch needs first
//
// A step captured into a CUDA graph replays its kernels and runs no host code: a probe cannot
// be read back inside it. While RunContext::capturing is set, a component therefore reduces a
// probe into a double of its own device memory (kernels/probes.h) and records here where it
// is; the model gathers the recorded doubles into one block at the end of the step, and the
// runner reads that block once after each replay (Model::read_replay). Outside a capture the
// components read their values back as before (RunContext::probe_max, probe_mean).
//
// The record is kept beside the RunContext (by its address) rather than in it, so that the
// plugin API's RunContext keeps its layout; the model takes it at the end of each captured step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/component.h"

namespace bench {

/// A value a captured step leaves in device memory.
struct DeviceProbe {
  enum class Kind : uint8_t {
    kMax,   ///< RunContext::probe_max(name, *at / divisor)
    kMean,  ///< RunContext::probe_mean(name, *at / divisor, weight)
    kRms,   ///< RunContext::probe_mean(name, sqrt(*at / divisor), weight): *at a sum of squares
    kLoss,  ///< the head's LossInfo: at[0] loss, at[1] z_mean, at[2] z_loss (kernels::loss_sums)
  };
  Kind kind = Kind::kMax;
  std::string name;
  const double* at = nullptr;  ///< in the model's memory
  double divisor = 1.0;
  double weight = 1.0;
};

/// While ctx.capturing: probe `name` is the maximum, over the step, of *at (a double the step's
/// kernels write in the model's memory).
void probe_max_at(RunContext& ctx, std::string_view name, const double* at);
/// While ctx.capturing: probe `name` averages *at / divisor with weight `weight`.
void probe_mean_at(RunContext& ctx, std::string_view name, const double* at, double divisor = 1.0, double weight = 1.0);
/// While ctx.capturing: probe `name` averages sqrt(*sum_squares / count), an RMS (the model's
/// layer probes: the residual stream's RMS per block).
void probe_rms_at(RunContext& ctx, std::string_view name, const double* sum_squares, double count);
/// While ctx.capturing: the head leaves the step's loss, z_mean and z_loss at at[0..2].
void loss_at(RunContext& ctx, const double* at);

/// Host work a component needs done before each replay, with the replay's batch on the host
/// (inputs and targets, batch x seq each), e.g. the token embedding's buckets: it runs outside
/// the graph, and what it writes to device memory the replay reads.
using BatchStaging = std::function<void(const int32_t* inputs, const int32_t* targets)>;
/// Run `staging` with each replay's batch before the replay (Model::stage_batch). Asked for in
/// every forward, captured or not: the model keeps what its last forward asked for, so that it
/// knows it before a capture's first replay.
void before_replay(RunContext& ctx, BatchStaging staging);

/// What the components recorded for one captured step.
struct CaptureRecord {
  std::vector<DeviceProbe> probes;
  std::vector<BatchStaging> staging;
};
/// What was recorded for ctx since the last take, moved out (ctx then has none).
CaptureRecord take_capture_record(const RunContext& ctx);

}  // namespace bench
