// The norms plugin: norm types and norm positions.
#include "norms.h"

BENCH_PLUGIN("norms", "1.0", "norm types (LayerNorm, RMSNorm, none) and norm positions (pre, post, double, output)") {
  using namespace bench::norms;
  registrar.add(layernorm_info());
  registrar.add(rmsnorm_info());
  registrar.add(identity_info());
  registrar.add(pre_info());
  registrar.add(post_info());
  registrar.add(double_info());
  registrar.add(output_info());
  registrar.set_default(bench::Slot::kNorm, "rmsnorm");
  registrar.set_default(bench::Slot::kNormPosition, "pre");
}
