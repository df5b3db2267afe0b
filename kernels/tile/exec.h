// defines: bench::tile::Backend, Exec, launch, dispatch_block
//
// Host-side selection of the executor that runs a tile program. The CUDA executor is not
// reachable from here (this header compiles without CUDA): CUDA launchers live in
// kernels/cuda/*.cu and instantiate the same programs with launch_cuda.
#pragma once

#include <cstdint>

#include "cpu_executor.h"
#include "emulated_executor.h"

namespace bench::tile {

/// Which executor runs the tile programs of a host-side launcher.
enum class Backend : uint8_t {
  kCpu,       ///< whole tiles per program, programs spread over OpenMP threads
  kEmulated,  ///< the CUDA executor's lane mapping, emulated on the CPU (tests)
};

/// Execution settings passed to every kernel launcher.
struct Exec {
  Backend backend = Backend::kCpu;
};

template <class Program>
void launch(const Exec& exec, const Grid& grid, const Program& program) {
  if (exec.backend == Backend::kEmulated) {
    launch_emulated(grid, program);
  } else {
    launch_cpu(grid, program);
  }
}

/// Call `f.template operator()<B>()` with the smallest power-of-two tile width B in [32, 1024]
/// that covers a row of `n` elements; rows wider than 1024 loop over 1024-wide chunks.
template <class F>
void dispatch_block(int64_t n, F&& f) {
  if (n <= 32) {
    f.template operator()<32>();
  } else if (n <= 64) {
    f.template operator()<64>();
  } else if (n <= 128) {
    f.template operator()<128>();
  } else if (n <= 256) {
    f.template operator()<256>();
  } else if (n <= 512) {
    f.template operator()<512>();
  } else {
    f.template operator()<1024>();
  }
}

}  // namespace bench::tile
