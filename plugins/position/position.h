// defines: the position family's component infos
#pragma once

#include "bench/bench.h"

namespace bench::position {

ComponentInfo rope_info();
ComponentInfo nope_info();
ComponentInfo sinusoidal_info();
ComponentInfo learned_info();

}  // namespace bench::position
