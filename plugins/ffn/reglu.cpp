// ReGLU (Shazeer 2020): y = (relu(x Wg^T) * (x Wu^T)) Wd^T. Sized like SwiGLU: d_ff = 8/3 d_model
// rounded up to `multiple_of`.
#include "ffn.h"

namespace bench::ffn {

class ReGlu final : public GatedFfn {
 public:
  explicit ReGlu(const Params& p) : GatedFfn(p, kernels::Activation::kRelu) {}
};

ComponentInfo reglu_info() {
  return make_info<ReGlu>(Slot::kFfn, "reglu", "ReGLU FFN: (relu(x Wg) * x Wu) Wd, gate and up in one GEMM",
                          size_params(8.0 / 3.0));
}

}  // namespace bench::ffn
