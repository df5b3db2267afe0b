// GeGLU (Shazeer 2020; T5 v1.1, Gemma): y = (gelu(x Wg^T) * (x Wu^T)) Wd^T with the exact (erf)
// GeLU, or its tanh approximation with activation = "gelu_tanh" (Gemma's gelu_pytorch_tanh).
// Sized like SwiGLU: d_ff = 8/3 d_model rounded up to `multiple_of`.
#include "ffn.h"

namespace bench::ffn {

class GeGlu final : public GatedFfn {
 public:
  explicit GeGlu(const Params& p) : GatedFfn(p, activation_named(p.string("activation"))) {}
};

ComponentInfo geglu_info() {
  std::vector<ParamSpec> params{ParamSpec::choice(
      "activation", "gelu", {"gelu", "gelu_tanh"},
      "the GeLU of the gate: gelu (exact, erf; T5 v1.1) or gelu_tanh (the tanh approximation; Gemma, Gemma 2)")};
  for (ParamSpec& s : size_params(8.0 / 3.0)) params.push_back(std::move(s));
  return make_info<GeGlu>(Slot::kFfn, "geglu",
                          "GeGLU FFN: (gelu(x Wg) * x Wu) Wd, exact erf or tanh GeLU, gate and up in one GEMM (T5 "
                          "v1.1, Gemma)",
                          std::move(params));
}

}  // namespace bench::ffn
