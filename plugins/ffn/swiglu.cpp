// SwiGLU (Shazeer 2020; PaLM, Llama, Gemma): y = (silu(x Wg^T) * (x Wu^T)) Wd^T. d_ff defaults
// to 8/3 d_model rounded up to `multiple_of`, which keeps the parameter count of a 4x plain MLP
// (Llama 2 7B: 4096 -> 11008 with multiple_of = 256).
#include "ffn.h"

namespace bench::ffn {

class SwiGlu final : public GatedFfn {
 public:
  explicit SwiGlu(const Params& p) : GatedFfn(p, kernels::Activation::kSilu) {}
};

ComponentInfo swiglu_info() {
  return make_info<SwiGlu>(Slot::kFfn, "swiglu",
                           "SwiGLU FFN: (silu(x Wg) * x Wu) Wd with gate and up fused in one GEMM (PaLM, Llama)",
                           size_params(8.0 / 3.0));
}

}  // namespace bench::ffn
