// Declares a default component it does not register.
#include "bench/bench.h"

BENCH_PLUGIN("default_unknown", "0.1", "test plugin: the default of a component it lacks") {
  registrar.set_default(bench::Slot::kFfn, "ghost");
}
