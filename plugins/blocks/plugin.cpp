// The blocks plugin: serial and parallel transformer blocks.
#include "blocks.h"

BENCH_PLUGIN("blocks", "1.0",
             "transformer blocks: serial, parallel (GPT-J / PaLM shared norm, GPT-NeoX per-branch norms)") {
  using namespace bench::blocks;
  registrar.add(serial_info());
  registrar.add(parallel_info());
  registrar.set_default(bench::Slot::kBlock, "serial");
}
