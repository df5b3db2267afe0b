// defines: bench::tile::Backend, Exec, HostAccess, launch, dispatch_block
//
// Host-side selection of the executor that runs a tile program. The CUDA executor is not
// reachable from here (this header compiles without CUDA): CUDA launchers live in
// kernels/cuda/*.cu and instantiate the same programs with launch_cuda; each host launcher of
// kernels/*.cpp hands an Exec with Backend::kCuda to its CUDA launcher before it gets here.
#pragma once

#include <cstdint>

#include "cpu_executor.h"
#include "emulated_executor.h"

namespace bench::tile {

/// Which executor runs the tile programs of a host-side launcher.
enum class Backend : uint8_t {
  kCpu,       ///< whole tiles per program, programs spread over OpenMP threads
  kEmulated,  ///< the CUDA executor's lane mapping, emulated on the CPU (tests)
  kCuda,      ///< the CUDA launchers of kernels/cuda on `Exec::stream`; data in device memory
  /// The CPU executor on "guarded device memory" (kernels/memory.h): the model's memory is
  /// readable and writable only while a kernel runs, so host code that touches device memory
  /// directly, which would crash or read garbage on a GPU, faults at once on the CPU (tests).
  kGuarded,
};

/// Execution settings passed to every kernel launcher.
struct Exec {
  Backend backend = Backend::kCpu;
  void* stream = nullptr;  ///< cudaStream_t of Backend::kCuda (nullptr: the default stream)
};

/// While one exists (on any thread), guarded device memory is accessible (kernels/memory.cpp).
/// Every host launcher holds one for Backend::kGuarded; a no-op for the other backends.
class HostAccess {
 public:
  explicit HostAccess(const Exec& exec);
  ~HostAccess();
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;

 private:
  bool open_;
};

/// Throws std::logic_error: a host launcher was given Backend::kCuda but has no CUDA path.
[[noreturn]] void no_cuda_path();

template <class Program>
void launch(const Exec& exec, const Grid& grid, const Program& program) {
  switch (exec.backend) {
    case Backend::kEmulated:
      launch_emulated(grid, program);
      return;
    case Backend::kCuda:
      no_cuda_path();
    case Backend::kGuarded: {
      const HostAccess access(exec);
      launch_cpu(grid, program);
      return;
    }
    case Backend::kCpu:
      break;
  }
  launch_cpu(grid, program);
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
