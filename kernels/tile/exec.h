// defines: bench::tile::Backend, Exec, HostAccess, launch, supports, target_name,
//          dispatch_block
//
// Where a tile program runs, chosen at run time from an Exec: the CPU executor, the
// emulated-block executor, the CPU executor on guarded memory, or CUDA. A launcher (grid,
// workspace, dispatch over dtype and block size) is written once and calls tile::launch for each
// program; the same launcher serves every target. For CUDA it finds the program's CUDA build in
// the registry (tile/registry.h), which the CUDA pass of the same source filled: compiled by nvcc
// (__CUDACC__), this header instantiates that build instead (tile/cuda_executor.cuh).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>

#include "cpu_executor.h"
#include "emulated_executor.h"
#include "profile.h"
#include "registry.h"

#if defined(__CUDACC__)
#include "cuda_executor.cuh"  // the CUDA pass: launch() registers and runs each program's kernel
#endif

namespace bench::tile {

/// Which executor runs the tile programs of a launcher.
enum class Backend : uint8_t {
  kCpu,       ///< whole tiles per program, programs spread over OpenMP threads
  kEmulated,  ///< the CUDA executor's lane mapping, emulated on the CPU (tests)
  kCuda,      ///< the programs' CUDA builds on `Exec::stream`; data in device memory
  /// The CPU executor on "guarded device memory" (kernels/memory.h): the model's memory is
  /// readable and writable only while a kernel runs, so host code that touches device memory
  /// directly, which would crash or read garbage on a GPU, faults at once on the CPU (tests).
  kGuarded,
};

/// Execution settings passed to every kernel launcher: the target.
struct Exec {
  Backend backend = Backend::kCpu;
  void* stream = nullptr;  ///< cudaStream_t of Backend::kCuda (nullptr: the default stream)
};

/// Whether a launcher composes its work for `exec` as for a device: one launch after another on
/// one queue, large blocks, results left in the target's memory (CUDA); otherwise independent
/// tasks run in parallel around single-threaded launches, and small results are read on the
/// host (the CPU executor, plain or guarded). The emulated-block executor stands in for CUDA in
/// tests, so it composes as a device too: CI runs the device compositions without a GPU.
inline bool runs_as_device(const Exec& exec) {
  return exec.backend == Backend::kCuda || exec.backend == Backend::kEmulated;
}

/// The widest tile the host executors (CPU, guarded) run: dispatch_block's widest. Wider tiles
/// (dispatch_row's 2048 and 4096) run on devices only, so launch compiles no CPU build of them.
inline constexpr int kHostMaxTile = 1024;

/// "cpu", "emulated", "guarded", or the CUDA device ("cuda:0 (NVIDIA H200)", "cuda" when this
/// process has no CUDA backend): for messages.
std::string target_name(const Exec& exec);

/// While one exists (on any thread), guarded device memory is accessible (kernels/memory.cpp).
/// Every launcher holds one for Backend::kGuarded; a no-op for the other backends.
class HostAccess {
 public:
  explicit HostAccess(const Exec& exec);
  ~HostAccess();
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;

 private:
  bool open_;
};

namespace detail {
/// Runs `program` through its registered CUDA build; throws Unsupported naming the program and
/// the device when there is none, std::runtime_error on a CUDA error. `entry` caches the lookup.
void launch_cuda_program(const Exec& exec, const Grid& grid, const void* program, const char* module, const char* type,
                         std::atomic<CudaProgram*>& entry);
/// Whether a CUDA build of `type` is loaded; `why` (may be null) receives the reason when not.
bool cuda_program_loaded(const char* module, const char* type, std::string* why);
}  // namespace detail

/// Run every program of `grid` on exec's target. A program may declare what one launch moves and
/// computes, for the profile: `Traffic traffic(const Grid& grid) const` (tile/profile.h).
template <class Program>
void launch(const Exec& exec, const Grid& grid, const Program& program) {
#if defined(__CUDACC__)
  // The CUDA pass: this copy of a launcher exists to instantiate the program's CUDA kernel and
  // register it (odr-using the registration); it runs only on CUDA.
  (void)&cuda_registration<Program>;
  if (exec.backend != Backend::kCuda)
    throw std::logic_error("a CUDA pass launcher ran on a host backend: " + program_name(typeid(Program).name()));
  check_launch(launch_cuda(grid, program, static_cast<cudaStream_t>(exec.stream)), typeid(Program).name());
#else
  // The profile's hook (tile/profile.h): the program's declared traffic, when it declares one.
  KernelScope scope(exec, typeid(Program).name());
  if constexpr (requires { program.traffic(grid); }) {
    if (scope.observed()) scope.set_traffic(program.traffic(grid));
  }
  switch (exec.backend) {
    case Backend::kEmulated:
      launch_emulated(grid, program);
      return;
    case Backend::kCuda: {
      static std::atomic<CudaProgram*> entry{nullptr};
      detail::launch_cuda_program(exec, grid, &program, BENCH_KERNEL_MODULE, typeid(Program).name(), entry);
      return;
    }
    case Backend::kGuarded:
    case Backend::kCpu:
      break;
  }
  // A CPU build of a device-only width would be dead code, and the widest of its launcher: left
  // out, kernels/norm.cpp compiles in 10 % less time at -O3 and 14 % less under the sanitizers.
  if constexpr (Program::kBlock > kHostMaxTile) {
    throw std::logic_error("a " + std::to_string(Program::kBlock) + "-wide tile runs on devices only, not on " +
                           target_name(exec) + ": " + program_name(typeid(Program).name()));
  } else if (exec.backend == Backend::kGuarded) {
    const HostAccess access(exec);
    launch_cpu(grid, program);
  } else {
    launch_cpu(grid, program);
  }
#endif
}

/// Whether exec's target can run Program (the query of ggml's backends): the host executors
/// always; CUDA when the program's CUDA build is loaded. `why` (may be null) says why not.
template <class Program>
bool supports(const Exec& exec, std::string* why = nullptr) {
  if (exec.backend != Backend::kCuda) return true;
  return detail::cuda_program_loaded(BENCH_KERNEL_MODULE, typeid(Program).name(), why);
}

/// Call `f.template operator()<B>()` with the smallest tile width B of 32, 64, 128, 256, 512,
/// 768 and 1024 that covers a row of `n` elements; rows wider than 1024 loop over 1024-wide
/// chunks. 768 sizes the tile to the rows of d_model 768 (and 513..767): the CUDA build then
/// runs 192 (float) or 96 (bf16) threads with none idle, where a 1024-wide tile would leave a
/// quarter of its threads without an element. On the CPU a narrower tile only drops padding:
/// masked elements are zeros (sums) or the lowest value (maxima), so results do not change.
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
  } else if (n <= 768) {
    f.template operator()<768>();
  } else {
    f.template operator()<1024>();
  }
}

/// Widest tile of dispatch_row on a device.
inline constexpr int kDeviceRowTile = 4096;

/// dispatch_block for a row program, by target. On the host exactly dispatch_block (tiles up to
/// 1024, so the host's reduction order, and its bits, are those of dispatch_block). As a device
/// (runs_as_device) also 2048 and 4096: a row of up to 4096 elements is one tile, held in
/// registers (16 elements a thread at 4096, 256 threads), so a program issues every load of
/// its row before its first reduction, and reads the row from memory once; a CUDA thread
/// looping over 1024-wide chunks has one 16-byte load in flight at a time (docs/kernels-rows.md,
/// "Row kernels against the roofline").
template <class F>
void dispatch_row(const Exec& exec, int64_t n, F&& f) {
  if (runs_as_device(exec) && n > kHostMaxTile) {
    if (n <= 2048) {
      f.template operator()<2048>();
    } else {
      f.template operator()<kDeviceRowTile>();
    }
    return;
  }
  dispatch_block(n, std::forward<F>(f));
}

}  // namespace bench::tile
