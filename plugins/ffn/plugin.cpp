// The ffn plugin: the plain MLP with a choice of activation and the gated units.
#include "ffn.h"

BENCH_PLUGIN("ffn", "1.0",
             "feed-forward networks: plain MLP (relu, gelu, gelu_tanh, silu, relu2), SwiGLU, GeGLU, ReGLU") {
  using namespace bench::ffn;
  registrar.add(mlp_info());
  registrar.add(swiglu_info());
  registrar.add(geglu_info());
  registrar.add(reglu_info());
  registrar.set_default(bench::Slot::kFfn, "swiglu");
}
