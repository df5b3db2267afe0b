// defines: the blocks family — how attention and FFN are arranged in one transformer block
#pragma once

#include "bench/bench.h"

namespace bench::blocks {

ComponentInfo serial_info();
ComponentInfo parallel_info();

}  // namespace bench::blocks
