#include "position.h"

BENCH_PLUGIN("position", "1.0", "position encodings: RoPE (with long-context scalings), sinusoidal, learned, none") {
  registrar.add(bench::position::rope_info());
  registrar.add(bench::position::nope_info());
  registrar.add(bench::position::sinusoidal_info());
  registrar.add(bench::position::learned_info());
  registrar.set_default(bench::Slot::kPosition, "rope");
}
