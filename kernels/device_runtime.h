// defines: bench::kernels::cuda::DeviceFacts, device_count, measure_gemm_ceiling, describe_device, make_cuda_backend,
// current_device, thread_stream, copy, zero, synchronize, EventTimer, L2Flusher, StepGraph — the CUDA
// runtime pieces the harness measures with.
//
// Streams: every kernel, copy and memset of the model runs on thread_stream(), one created stream
// per host thread and device (never the legacy default stream), so that a train step can be
// captured into a CUDA graph (StepGraph) and threads do not serialize on one queue.
// Declared without CUDA headers (CONTRIBUTING.md); defined in kernels/cuda/runtime.cu, so only a CUDA build links them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "caching_allocator.h"

namespace bench::kernels::cuda {

/// What a run stores about a GPU: identity, size, versions, and a measured ceiling.
struct DeviceFacts {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t memory_bytes = 0;
  size_t l2_bytes = 0;
  int driver_version = 0;       ///< cudaDriverGetVersion, e.g. 12080
  int runtime_version = 0;      ///< cudaRuntimeGetVersion
  size_t cublaslt_version = 0;  ///< cublasLtGetVersion, e.g. 130001
  /// cudnnGetVersion of the libcudnn.so.9 the loader finds (dlopen: bench does not link cuDNN,
  /// so a machine without it still runs), e.g. 91300; 0 when there is none.
  size_t cudnn_version = 0;
  double copy_gbps = 0;  ///< measured device-to-device copy, bytes read + written per second / 1e9
};

/// CUDA devices visible to this process (CUDA_VISIBLE_DEVICES applies); 0 without a driver.
int device_count();

/// The side of the square product of measure_gemm_ceiling.
inline constexpr int64_t kGemmCeilingN = 4096;

/// The GEMM ceiling of the current device, measured one way everywhere: the run's device record
/// (the MFU's denominator, harness/src/runners/device.cpp) and cuda_check's "ceiling/gemm" rows
/// call this. A kGemmCeilingN^3 row-major product C = A B on random values in [-0.5, 0.5) (never
/// zeros) in device memory through cuBLASLt (float: CUBLAS_COMPUTE_32F, no TF32; bf16: float
/// accumulation), on thread_stream(): one untimed product, then 5 batches of 10 products back to
/// back, each batch between two CUDA events (no host synchronization inside); the median batch.
/// Returns GFLOP/s (2 n^3 per product). Throws std::runtime_error on a CUDA or cuBLASLt error.
double measure_gemm_ceiling(bool bf16);

/// Facts of device `index`, with its copy bandwidth measured (256 MiB cudaMemcpyAsync, median of
/// 10 after a warm-up, timed with events). Throws std::runtime_error on a CUDA error.
DeviceFacts describe_device(int index);

/// cudaMalloc / cudaFree on device `index` (nullptr from allocate on cudaErrorMemoryAllocation).
std::unique_ptr<AllocatorBackend> make_cuda_backend(int index);

/// cudaGetDevice.
int current_device();
/// Free bytes of the current device (cudaMemGetInfo).
size_t memory_available();
/// This host thread's stream on the current device (a cudaStream_t): created at the first call,
/// blocking (ordered with the legacy default stream, so stray default-stream work is not raced),
/// kept until the thread ends. The Exec of device memory (kernels::exec_for) carries it.
void* thread_stream();
/// cudaMemcpyAsync (cudaMemcpyDefault: any direction) on thread_stream(), after the work queued
/// there; with `wait`, then waits for it. Throws std::runtime_error on a CUDA error, as do the
/// three below.
void copy(void* dst, const void* src, size_t bytes, bool wait);
/// cudaMemcpy2DAsync (cudaMemcpyDefault) on thread_stream(); with `wait`, then waits for it.
void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows, bool wait);
/// cudaMemsetAsync to zero on `stream` (a cudaStream_t; nullptr: thread_stream()). Does not wait:
/// the work queued after it on the same stream sees zeros.
void zero(void* p, size_t bytes, void* stream);
/// cudaStreamSynchronize, then the stream's sticky error if any.
void synchronize(void* stream);
/// "" while the current device is usable; else the message of the sticky error that poisons its
/// context (an illegal address, a launch failure). Waits for the whole device; clears an error
/// that is not sticky. For test drivers that must stop at the test that broke the device.
std::string sticky_error();

/// Times work on a stream with CUDA events: start(), enqueue, stop_ms() synchronizes on the stop
/// event and returns the elapsed device time.
class EventTimer {
 public:
  explicit EventTimer(void* stream = nullptr);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  double stop_ms();

 private:
  void* stream_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

/// Events recorded one after another on streams and read after the work completed: the
/// per-launch times of the profile (harness/src/runners/profile.h). Events are created as needed
/// and kept for reuse after clear().
class EventMarks {
 public:
  EventMarks() = default;
  ~EventMarks();
  EventMarks(const EventMarks&) = delete;
  EventMarks& operator=(const EventMarks&) = delete;
  /// Records the next event on `stream` (a cudaStream_t); returns its index.
  size_t record(void* stream);
  /// Milliseconds of device time between events i and j; both must have completed.
  double elapsed_ms(size_t i, size_t j) const;
  /// Forgets the recorded events (they are reused by the next record()).
  void clear() { used_ = 0; }

 private:
  std::vector<void*> events_;
  size_t used_ = 0;
};

/// Evicts the L2 cache between timed repetitions, so that each repetition reads its inputs from
/// memory as a real step would: writes a buffer twice the L2 size (allocated once, when made).
class L2Flusher {
 public:
  explicit L2Flusher(int index);
  ~L2Flusher();
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;
  void flush(void* stream = nullptr);
  size_t bytes() const { return bytes_; }

 private:
  void* buffer_ = nullptr;
  size_t bytes_ = 0;
  int value_ = 0;
};

/// A CUDA graph of the work one callable enqueues on a stream: capture() records it (stream
/// capture in thread-local mode: the callable must not synchronize, copy to or from pageable
/// host memory, or allocate from the driver), launch() replays it on the same stream. Replays
/// use the same addresses and kernel arguments as the capture: whatever must change between
/// replays has to be read by the kernels from device memory.
class StepGraph {
 public:
  explicit StepGraph(void* stream) : stream_(stream) {}
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  /// Capture what `enqueue(ctx)` puts on the stream and instantiate it. On failure the capture is
  /// ended and discarded, the stream is usable again, and std::runtime_error says what failed
  /// (the CUDA error of the first call that broke the capture, or the exception of `enqueue`).
  void capture(void (*enqueue)(void*), void* ctx);
  template <class F>
  void capture(F& f) {
    capture([](void* p) { (*static_cast<F*>(p))(); }, &f);
  }
  /// Enqueue one replay (does not wait).
  void launch();
  /// Kernel and memset/memcpy nodes of the captured graph.
  size_t nodes() const { return nodes_; }

 private:
  void* stream_;
  void* graph_ = nullptr;
  void* exec_ = nullptr;
  size_t nodes_ = 0;
};

}  // namespace bench::kernels::cuda
