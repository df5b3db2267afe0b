// RMSNorm (Zhang & Sennrich 2019): y = x / sqrt(mean(x^2) + eps) * weight (+ bias).
#include "norms.h"

namespace bench::norms {

class RmsNorm final : public AffineNorm {
 public:
  explicit RmsNorm(const Params& p) : AffineNorm(p, /*center=*/false) {}
};

ComponentInfo rmsnorm_info() {
  return make_info<RmsNorm>(Slot::kNorm, "rmsnorm",
                            "RMSNorm: divide by the root mean square (no mean subtraction), then gain",
                            affine_norm_params(1e-6, false));
}

}  // namespace bench::norms
