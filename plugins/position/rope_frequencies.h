// defines: RopeScaling, RopeScalingConfig, RopeFrequencies, rope_frequencies, rope_scaling_names,
//          parse_rope_scaling — the angular frequencies of RoPE and of its long-context scalings
//
// Self-contained (standard library only), so each scheme's table can be checked on its own.
// Pair i of a head of d features turns by t * inv_freq[i] at position t; unscaled RoPE has
// inv_freq[i] = base^(-2i/d). The scalings change inv_freq (and two of them the attention
// logits' scale) from the length the model was trained at, L_orig, and the current one, L:
//
//   linear       inv_freq / factor                          position interpolation (Chen et al. 2023)
//   ntk          base' = base factor^(d/(d-2))              NTK-aware (bloc97, 2023)
//   dynamic_ntk  base' = base (factor L/L_orig - (factor-1))^(d/(d-2)) when L > L_orig
//   yarn         per pair, a ramp between interpolation (inv_freq / factor) and extrapolation
//                (inv_freq) over the pairs that turn between beta_slow and beta_fast times in
//                L_orig; logits times (0.1 ln(factor) + 1)^2 (Peng et al. 2023)
//   llama3       wavelength 2 pi / inv_freq > L_orig / low_freq_factor: / factor; below
//                L_orig / high_freq_factor: kept; smooth interpolation between (Llama 3.1)
//   longrope     inv_freq / ext[i], ext = long_factors when L > L_orig, else short_factors;
//                logits times 1 + ln(factor) / ln(L_orig) when factor > 1, beyond L_orig or, with
//                `always` (transformers, Phi-3), at every length (Ding et al. 2024)
//
// These follow the published definitions (as in Hugging Face transformers' modeling_rope_utils):
// YaRN's correction range is floored/ceiled as in the paper's code; YaRN's and LongRoPE's
// attention factors multiply both cos and sin there, hence the square on the logits here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bench::position {

/// A RoPE frequency scheme.
enum class RopeScaling : uint8_t { kNone, kLinear, kNtk, kDynamicNtk, kYarn, kLlama3, kLongRope };

/// Registered names, in enum order: "none", "linear", "ntk", "dynamic_ntk", "yarn", "llama3", "longrope".
const std::vector<std::string>& rope_scaling_names();
/// The scheme named `name`, or nothing.
std::optional<RopeScaling> parse_rope_scaling(std::string_view name);

/// Everything the frequencies depend on besides the head width and the current length.
struct RopeScalingConfig {
  RopeScaling scaling = RopeScaling::kNone;
  double base = 10000.0;
  double factor = 1.0;                ///< context extension factor (>= 1)
  int64_t original_max_position = 0;  ///< L_orig, the length the frequencies were trained at (> 0)
  /// false: at L <= L_orig the scheme is off (plain frequencies, logit scale 1; LongRoPE keeps
  /// its short factors), i.e. a model trained with plain RoPE and extended without fine-tuning.
  /// true: the scheme applies at every length (Hugging Face's static rope_scaling).
  bool always = false;
  double beta_fast = 32.0;            ///< YaRN: pairs turning more often than this in L_orig are kept
  double beta_slow = 1.0;             ///< YaRN: pairs turning less often than this are interpolated
  double low_freq_factor = 1.0;       ///< Llama 3: wavelengths above L_orig / this are divided by factor
  double high_freq_factor = 4.0;      ///< Llama 3: wavelengths below L_orig / this are kept
  std::vector<double> long_factors;   ///< LongRoPE: d/2 divisors of inv_freq at L > L_orig
  std::vector<double> short_factors;  ///< LongRoPE: d/2 divisors at L <= L_orig (empty = ones)
};

/// The frequency table of one head width at one length.
struct RopeFrequencies {
  std::vector<double> inv_freq;  ///< d/2 angles per position step, pair i
  double logit_scale = 1.0;      ///< multiplier of the attention logits (YaRN, LongRoPE)
};

/// Frequencies of `c` for heads of d_head (even, >= 2; >= 4 for ntk and dynamic_ntk) features
/// at sequence length seq_len. The caller has validated the configuration.
RopeFrequencies rope_frequencies(const RopeScalingConfig& c, int64_t d_head, int64_t seq_len);

}  // namespace bench::position
