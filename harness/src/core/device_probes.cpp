// What a captured step leaves in device memory (bench/device_probes.h).
#include "bench/device_probes.h"

#include <map>
#include <mutex>
#include <utility>

namespace bench {

namespace {

/// The records, by context. A context's record lives from its first entry to the model's take at
/// the end of the captured step; the model also takes (and drops) a stale one when a capture
/// begins, so an address reused by a new context starts empty.
struct Records {
  std::mutex mutex;
  std::map<const RunContext*, CaptureRecord> by_ctx;
};
Records& records() {
  static Records r;
  return r;
}

void add(const RunContext& ctx, DeviceProbe p) {
  Records& r = records();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.by_ctx[&ctx].probes.push_back(std::move(p));
}

}  // namespace

void probe_max_at(RunContext& ctx, std::string_view name, const double* at) {
  add(ctx, DeviceProbe{DeviceProbe::Kind::kMax, std::string(name), at, 1.0, 1.0});
}

void probe_mean_at(RunContext& ctx, std::string_view name, const double* at, double divisor, double weight) {
  add(ctx, DeviceProbe{DeviceProbe::Kind::kMean, std::string(name), at, divisor, weight});
}

void probe_rms_at(RunContext& ctx, std::string_view name, const double* sum_squares, double count) {
  add(ctx, DeviceProbe{DeviceProbe::Kind::kRms, std::string(name), sum_squares, count, 1.0});
}

void loss_at(RunContext& ctx, const double* at) { add(ctx, DeviceProbe{DeviceProbe::Kind::kLoss, "", at, 1.0, 1.0}); }

void before_replay(RunContext& ctx, BatchStaging staging) {
  Records& r = records();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.by_ctx[&ctx].staging.push_back(std::move(staging));
}

CaptureRecord take_capture_record(const RunContext& ctx) {
  Records& r = records();
  const std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_ctx.find(&ctx);
  if (it == r.by_ctx.end()) return {};
  CaptureRecord out = std::move(it->second);
  r.by_ctx.erase(it);
  return out;
}

}  // namespace bench
