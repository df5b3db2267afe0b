// defines: bench::ZLossRow, zloss_demo, QkRow, qk_norm_demo, SoftcapRow, softcap_demo — the
// lecture's three numeric stability demos (seeds/004), computed with the project's own kernels
#pragma once

#include <cstdint>
#include <vector>

namespace bench {

/// Cross-entropy of logits shifted by c, in float32 and with bf16 logits (float accumulation).
struct ZLossRow {
  double shift = 0;     ///< c added to every logit
  double ce_fp32 = 0;   ///< mean cross-entropy, float32 logits
  double ce_bf16 = 0;   ///< mean cross-entropy, the shifted logits stored in bf16
  double ce_exact = 0;  ///< float64 reference (independent of c)
  double z_mean = 0;    ///< mean log Z = logsumexp of the float32 logits
  double z_loss = 0;    ///< 1e-4 * mean(log Z^2)
};
/// 64 rows x 1000 logits ~ N(0, 2^2) and uniform targets (seed 0), shifted by c in
/// {0, 10, 100, 1000, 10000}: softmax ignores c, bf16 storage (spacing 4 near 1000, 64 near
/// 10000) does not.
std::vector<ZLossRow> zloss_demo();

/// Attention statistics as q and k are scaled by s, with and without a parameter-free QK-norm.
struct QkRow {
  double scale = 0;
  double entropy = 0, max_weight = 0;                  ///< plain: mean entropy (nats), mean max weight
  double entropy_qk_norm = 0, max_weight_qk_norm = 0;  ///< q, k RMS-normalized (eps 1e-6) first
};
/// 64 positions, d_head 64, q and k ~ N(0, 1) (seed 0), non-causal softmax(q k^T / sqrt(d)) by
/// the attention kernel, s in {1, 2, 4, 8}; uniform attention has entropy ln 64 = 4.16.
std::vector<QkRow> qk_norm_demo();

/// Input and output of the soft-cap kernel at cap 30 (Gemma 2's output-logit cap).
struct SoftcapRow {
  double x = 0, y = 0;
};
std::vector<SoftcapRow> softcap_demo();

}  // namespace bench
