// LayerNorm (Ba et al. 2016): y = (x - mean) / sqrt(var + eps) * weight + bias.
#include "norms.h"

namespace bench::norms {

class LayerNorm final : public AffineNorm {
 public:
  explicit LayerNorm(const Params& p) : AffineNorm(p, /*center=*/true) {}
};

ComponentInfo layernorm_info() {
  return make_info<LayerNorm>(Slot::kNorm, "layernorm",
                              "LayerNorm: subtract the mean, divide by the standard deviation, then gain and bias",
                              affine_norm_params(1e-5, true));
}

}  // namespace bench::norms
