#include "runners/stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace bench {

namespace {
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = median_of(v);
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(ss / static_cast<double>(v.size() - 1)) : 0;
  std::vector<double> dev;
  for (double x : v) dev.push_back(std::abs(x - s.median));
  s.mad = median_of(dev);
  return s;
}

double relative_noise(const std::vector<double>& v) {
  if (v.size() < 2) return NAN;
  const Summary s = summarize(v);
  if (!(s.median > 0)) return NAN;
  return 1.4826 * s.mad / s.median;
}

NoiseStep noise_step(const std::vector<double>& samples, double target, double elapsed_s, double next_round_s,
                     double max_time_s) {
  if (relative_noise(samples) <= target) return NoiseStep::kStop;  // false for NaN: not known to be quiet
  return elapsed_s + next_round_s <= max_time_s ? NoiseStep::kContinue : NoiseStep::kNoisy;
}

bool machine_busy(double other_busy, double steal, double max_busy) {
  return other_busy > max_busy || steal > max_busy;  // false for NaN
}

std::vector<int64_t> find_spikes(const std::vector<double>& v, int64_t window, double sigma) {
  constexpr int64_t kMinHistory = 10;
  std::vector<int64_t> out;
  const auto n = static_cast<int64_t>(v.size());
  for (int64_t t = kMinHistory; t < n; ++t) {
    if (!std::isfinite(v[static_cast<size_t>(t)])) continue;
    const int64_t b = std::max<int64_t>(0, t - window);
    double sum = 0, cnt = 0;
    for (int64_t i = b; i < t; ++i)
      if (std::isfinite(v[static_cast<size_t>(i)])) {
        sum += v[static_cast<size_t>(i)];
        cnt += 1;
      }
    if (cnt < kMinHistory) continue;
    const double mean = sum / cnt;
    double ss = 0;
    for (int64_t i = b; i < t; ++i)
      if (std::isfinite(v[static_cast<size_t>(i)]))
        ss += (v[static_cast<size_t>(i)] - mean) * (v[static_cast<size_t>(i)] - mean);
    const double sd = std::sqrt(ss / (cnt - 1));
    if (v[static_cast<size_t>(t)] > mean + sigma * sd && sd > 0) out.push_back(t);
  }
  return out;
}

double lr_at(int64_t step, int64_t total, double peak, int64_t warmup, const std::string& schedule, double min_ratio) {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (schedule == "constant") return peak;
  const double lo = peak * min_ratio;
  const int64_t span = std::max<int64_t>(1, total - 1 - warmup);
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(span));
  if (schedule == "linear") return peak - (peak - lo) * progress;
  return lo + (peak - lo) * 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
}

double lr_sensitivity(const std::vector<double>& final_losses, double initial_loss) {
  if (final_losses.empty()) return NAN;
  double sum = 0, best = INFINITY;
  for (double f : final_losses) {
    const double v = std::isfinite(f) ? f : initial_loss;
    sum += std::min(v, initial_loss);
    best = std::min(best, v);
  }
  return sum / static_cast<double>(final_losses.size()) - best;
}

std::vector<std::pair<size_t, std::vector<Metric>>> lr_grid_metrics(const std::vector<GridCase>& cases) {
  std::map<std::string, std::vector<const GridCase*>> groups;
  for (const GridCase& c : cases) groups[c.key].push_back(&c);
  std::vector<std::pair<size_t, std::vector<Metric>>> out;
  for (const auto& [key, members] : groups) {
    std::set<double> lrs;
    std::vector<double> finals;
    double l0 = 0;
    for (const GridCase* c : members) {
      lrs.insert(c->lr);
      finals.push_back(c->final_val_loss);
      l0 += c->initial_loss / static_cast<double>(members.size());
    }
    if (lrs.size() < 2) continue;
    const double sensitivity = lr_sensitivity(finals, l0);
    for (const GridCase* c : members)
      out.push_back(
          {c->index, {{"lr_sensitivity", sensitivity, "nats"}, {"lr_grid_size", static_cast<double>(lrs.size()), ""}}});
  }
  return out;
}

}  // namespace bench
