#include "rope_frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace bench::position {

namespace {

std::vector<double> plain(double base, int64_t d) {
  std::vector<double> f(static_cast<size_t>(d / 2));
  for (size_t i = 0; i < f.size(); ++i) f[i] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
  return f;
}

// NTK-aware: stretch the base so that the lowest frequency is interpolated by `alpha` while the
// highest stays put: base' = base alpha^(d/(d-2)).
double ntk_base(double base, double alpha, int64_t d) {
  const double dd = static_cast<double>(d);
  return base * std::pow(alpha, dd / (dd - 2.0));
}

// The (fractional) pair index whose wavelength fits `rotations` times into `length`:
// length / (2 pi base^(2i/d)) = rotations, solved for i.
double yarn_pair(double rotations, int64_t d, double base, double length) {
  return static_cast<double>(d) * std::log(length / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

RopeFrequencies yarn(const RopeScalingConfig& c, int64_t d) {
  RopeFrequencies out{plain(c.base, d), 1.0};
  const auto len = static_cast<double>(c.original_max_position);
  const double low = std::max(std::floor(yarn_pair(c.beta_fast, d, c.base, len)), 0.0);
  double high = std::min(std::ceil(yarn_pair(c.beta_slow, d, c.base, len)), static_cast<double>(d - 1));
  if (high == low) high += 0.001;  // a one-pair ramp: a step
  for (size_t i = 0; i < out.inv_freq.size(); ++i) {
    // ramp 0: the pair turns often within L_orig and keeps its frequency (extrapolation);
    // ramp 1: it turns less than beta_slow times and is interpolated like PI.
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double f = out.inv_freq[i];
    out.inv_freq[i] = f / c.factor * ramp + f * (1.0 - ramp);
  }
  const double mscale = c.factor <= 1.0 ? 1.0 : 0.1 * std::log(c.factor) + 1.0;
  out.logit_scale = mscale * mscale;
  return out;
}

RopeFrequencies llama3(const RopeScalingConfig& c, int64_t d) {
  RopeFrequencies out{plain(c.base, d), 1.0};
  const auto len = static_cast<double>(c.original_max_position);
  const double low_freq_wavelength = len / c.low_freq_factor;    // longer: interpolated
  const double high_freq_wavelength = len / c.high_freq_factor;  // shorter: kept
  for (double& f : out.inv_freq) {
    const double wavelength = 2.0 * std::numbers::pi / f;
    if (wavelength < high_freq_wavelength) continue;
    if (wavelength > low_freq_wavelength) {
      f /= c.factor;
      continue;
    }
    const double smooth = (len / wavelength - c.low_freq_factor) / (c.high_freq_factor - c.low_freq_factor);
    f = (1.0 - smooth) * f / c.factor + smooth * f;
  }
  return out;
}

RopeFrequencies longrope(const RopeScalingConfig& c, int64_t d, bool beyond) {
  RopeFrequencies out{plain(c.base, d), 1.0};
  const std::vector<double>& ext = beyond ? c.long_factors : c.short_factors;
  if (!ext.empty())
    for (size_t i = 0; i < out.inv_freq.size(); ++i) out.inv_freq[i] /= ext[i];
  if (c.factor > 1.0 && (beyond || c.always))
    out.logit_scale = 1.0 + std::log(c.factor) / std::log(static_cast<double>(c.original_max_position));
  return out;
}

}  // namespace

const std::vector<std::string>& rope_scaling_names() {
  static const std::vector<std::string> names = {"none", "linear", "ntk", "dynamic_ntk", "yarn", "llama3", "longrope"};
  return names;
}

std::optional<RopeScaling> parse_rope_scaling(std::string_view name) {
  const auto& names = rope_scaling_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<RopeScaling>(i);
  return std::nullopt;
}

RopeFrequencies rope_frequencies(const RopeScalingConfig& c, int64_t d_head, int64_t seq_len) {
  const bool beyond = seq_len > c.original_max_position;
  if (c.scaling == RopeScaling::kLongRope) return longrope(c, d_head, beyond);
  if (c.scaling == RopeScaling::kNone || (!c.always && !beyond)) return {plain(c.base, d_head), 1.0};
  switch (c.scaling) {
    case RopeScaling::kLinear: {
      RopeFrequencies out{plain(c.base, d_head), 1.0};
      for (double& f : out.inv_freq) f /= c.factor;
      return out;
    }
    case RopeScaling::kNtk:
      return {plain(ntk_base(c.base, c.factor, d_head), d_head), 1.0};
    case RopeScaling::kDynamicNtk: {
      // Hugging Face's dynamic NTK: the length never counts as shorter than L_orig, so the base
      // is unchanged up to L_orig and grows with L beyond it.
      const double ratio = static_cast<double>(std::max(seq_len, c.original_max_position)) /
                           static_cast<double>(c.original_max_position);
      return {plain(ntk_base(c.base, c.factor * ratio - (c.factor - 1.0), d_head), d_head), 1.0};
    }
    case RopeScaling::kYarn:
      return yarn(c, d_head);
    case RopeScaling::kLlama3:
      return llama3(c, d_head);
    default:
      return {plain(c.base, d_head), 1.0};
  }
}

}  // namespace bench::position
