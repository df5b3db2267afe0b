// GeGLU (Shazeer 2020; T5 v1.1, Gemma): y = (gelu(x Wg^T) * (x Wu^T)) Wd^T with the exact (erf)
// GeLU. Sized like SwiGLU: d_ff = 8/3 d_model rounded up to `multiple_of`.
#include "ffn.h"

namespace bench::ffn {

class GeGlu final : public GatedFfn {
 public:
  explicit GeGlu(const Params& p) : GatedFfn(p, kernels::Activation::kGelu) {}
};

ComponentInfo geglu_info() {
  return make_info<GeGlu>(Slot::kFfn, "geglu",
                          "GeGLU FFN: (gelu(x Wg) * x Wu) Wd, exact erf GeLU, gate and up in one GEMM (T5 v1.1)",
                          size_params(8.0 / 3.0));
}

}  // namespace bench::ffn
