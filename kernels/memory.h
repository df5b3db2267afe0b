// defines: bench::kernels::Memory, memory_name, memory_for, exec_for, device_allocate,
//          device_free, memory_of, copy_bytes, copy_2d, zero_bytes, synchronize, cuda_built,
//          cuda_device_count, CaptureScope
//
// Where a model's tensors live, and the few operations the host may do on them. Host code never
// dereferences device memory: it copies (copy_bytes) or launches a kernel. Three memories:
//   host     - the CPU's heap; the CPU executors
//   cuda     - cudaMalloc'd memory of the current device; the CUDA launchers (CUDA builds only)
//   guarded  - CPU memory that is inaccessible (PROT_NONE) except while a kernel runs or a copy
//              is made: the CPU executor on it behaves like a GPU to the host code around it, so
//              a direct access that would crash on a GPU faults in a test without one
// Allocations are registered, so memory_of finds the memory of any pointer into them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tile/exec.h"

namespace bench::kernels {

enum class Memory : uint8_t { kHost, kCuda, kGuarded };

/// "host", "cuda", "guarded".
std::string_view memory_name(Memory m);
/// The memory that kernels of `backend` read and write.
Memory memory_for(tile::Backend backend);
/// An Exec whose kernels run on `m` (kCpu for host memory; for kCuda, on this thread's stream,
/// cuda::thread_stream()).
tile::Exec exec_for(Memory m);

/// `bytes` (at least one byte's worth) of zeroed memory in `m`, 256-byte aligned. Throws
/// std::runtime_error when it is not there (out of memory, or kCuda in a build without CUDA).
void* device_allocate(Memory m, size_t bytes);
/// Free what device_allocate returned (nullptr: nothing).
void device_free(void* p);
/// The memory of `p`: the memory of the allocation it points into, kHost for any other address.
Memory memory_of(const void* p);

/// Copy `bytes` from src to dst, each in whatever memory it is, after the work queued before it
/// on the device. A copy to or from the host returns when it is done; a copy within a device's
/// memory is only enqueued (on this thread's stream: later kernels there see it).
void copy_bytes(void* dst, const void* src, size_t bytes);
/// Copy `rows` runs of `width` bytes, `src_pitch` bytes apart in src to `dst_pitch` bytes apart
/// in dst (cudaMemcpy2DAsync on a device; ordered and waited for as copy_bytes).
void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows);
/// Set `bytes` at p to zero.
void zero_bytes(void* p, size_t bytes);
/// Wait until the work queued on exec's device (its stream) is done; a no-op on the CPU.
void synchronize(const tile::Exec& exec);

/// While one exists on this thread, what CUDA stream capture forbids throws std::logic_error
/// naming it: copy_bytes and copy_2d between the host and a device (they wait for the copy),
/// synchronize, and device_allocate.
/// Held around a CUDA-graph capture (the throughput runner's cuda_graph), so that a component
/// that reads back gets a clear message, and in tests on every backend, so that the
/// capture-safety of a step is checked without a GPU.
class CaptureScope {
 public:
  CaptureScope();
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
  /// Whether this thread is inside a CaptureScope.
  static bool active();
};

/// Whether this build has the CUDA launchers (kernels/cuda) linked in.
bool cuda_built();
/// CUDA devices this process sees: 0 without CUDA in the build, without a driver or a device.
int cuda_device_count();
/// Free memory of the current CUDA device in bytes (cudaMemGetInfo); 0 without CUDA.
size_t cuda_memory_available();

}  // namespace bench::kernels
