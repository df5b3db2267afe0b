#include "position.h"

BENCH_PLUGIN("position", "1.0", "position encodings: RoPE, none") {
  registrar.add(bench::position::rope_info());
  registrar.add(bench::position::nope_info());
}
