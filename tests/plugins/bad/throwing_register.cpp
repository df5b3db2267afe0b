// Its registration body throws: the exception must not cross the plugin boundary.
#include <stdexcept>

#include "bench/bench.h"

BENCH_PLUGIN("throwing_register", "0.1", "test plugin: registration throws") {
  (void)registrar;
  throw std::runtime_error("cannot register today");
}
