// The CUDA runtime pieces of kernels/device_runtime.h: device facts with a measured copy
// bandwidth, the cudaMalloc backend of the caching allocator, event timing, L2 flushing.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "../cuda_launchers.h"
#include "../device_runtime.h"
#include "cublaslt_api.cuh"

namespace bench::kernels::cuda {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

class CudaMallocBackend final : public AllocatorBackend {
 public:
  explicit CudaMallocBackend(int index) : index_(index) {}
  void* allocate(size_t bytes) override {
    check(cudaSetDevice(index_), "cudaSetDevice");
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error so later calls are not blamed for it
      return nullptr;
    }
    check(err, "cudaMalloc");
    return p;
  }
  void release(void* p, size_t /*bytes*/) override {
    cudaSetDevice(index_);
    cudaFree(p);  // in a destructor path: an error here has nowhere better to go
  }
  std::string name() const override { return "cuda:" + std::to_string(index_); }

 private:
  int index_;
};

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

DeviceFacts describe_device(int index) {
  DeviceFacts f;
  f.index = index;
  check(cudaSetDevice(index), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  f.name = prop.name;
  f.sm_count = prop.multiProcessorCount;
  f.cc_major = prop.major;
  f.cc_minor = prop.minor;
  f.memory_bytes = prop.totalGlobalMem;
  f.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  check(cudaDriverGetVersion(&f.driver_version), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&f.runtime_version), "cudaRuntimeGetVersion");
  if (const cublaslt::Api& lt = cublaslt::api(); lt.error.empty()) f.cublaslt_version = lt.get_version();
  if (void* cudnn = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL)) {
    using GetVersion = size_t (*)();
    if (auto* get = reinterpret_cast<GetVersion>(dlsym(cudnn, "cudnnGetVersion"))) f.cudnn_version = get();
    dlclose(cudnn);
  }

  // Copy bandwidth on non-zero data: 256 MiB device to device.
  const size_t bytes = size_t{256} << 20;
  void* src = nullptr;
  void* dst = nullptr;
  check(cudaMalloc(&src, bytes), "cudaMalloc");
  check(cudaMalloc(&dst, bytes), "cudaMalloc");
  check(cudaMemset(src, 0x5a, bytes), "cudaMemset");
  EventTimer timer;
  std::vector<double> ms;
  for (int rep = 0; rep < 11; ++rep) {
    timer.start();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr), "cudaMemcpyAsync");
    const double t = timer.stop_ms();
    if (rep > 0) ms.push_back(t);  // the first is the warm-up
  }
  cudaFree(src);
  cudaFree(dst);
  std::sort(ms.begin(), ms.end());
  f.copy_gbps = 2.0 * static_cast<double>(bytes) / (ms[ms.size() / 2] * 1e-3) * 1e-9;
  return f;
}

std::unique_ptr<AllocatorBackend> make_cuda_backend(int index) { return std::make_unique<CudaMallocBackend>(index); }

void check_status(Status s, const char* what) {
  if (s != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(static_cast<cudaError_t>(s)));
}

size_t memory_available() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

int current_device() {
  int d = 0;
  check(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

void* thread_stream() {
  // One stream per device for this thread; destroyed with the thread (errors ignored: at process
  // exit the driver may already be gone).
  struct Streams {
    std::vector<cudaStream_t> by_device;
    ~Streams() {
      for (cudaStream_t s : by_device)
        if (s != nullptr) cudaStreamDestroy(s);
    }
  };
  thread_local Streams streams;
  const int d = current_device();
  if (static_cast<size_t>(d) >= streams.by_device.size()) streams.by_device.resize(static_cast<size_t>(d) + 1, nullptr);
  cudaStream_t& s = streams.by_device[static_cast<size_t>(d)];
  if (s == nullptr) check(cudaStreamCreateWithFlags(&s, cudaStreamDefault), "cudaStreamCreateWithFlags");
  return s;
}

void copy(void* dst, const void* src, size_t bytes, bool wait) {
  auto* s = static_cast<cudaStream_t>(thread_stream());
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync");
  if (wait) check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows, bool wait) {
  auto* s = static_cast<cudaStream_t>(thread_stream());
  check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDefault, s), "cudaMemcpy2DAsync");
  if (wait) check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void zero(void* p, size_t bytes, void* stream) {
  if (stream == nullptr) stream = thread_stream();
  check(cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
}

void synchronize(void* stream) {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  check(cudaGetLastError(), "a kernel");
}

std::string sticky_error() {
  if (cudaDeviceSynchronize() == cudaSuccess) return "";
  (void)cudaGetLastError();
  const cudaError_t again = cudaDeviceSynchronize();
  return again == cudaSuccess ? "" : cudaGetErrorString(again);
}

EventMarks::~EventMarks() {
  for (void* e : events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

size_t EventMarks::record(void* stream) {
  if (used_ == events_.size()) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    events_.push_back(e);
  }
  check(cudaEventRecord(static_cast<cudaEvent_t>(events_[used_]), static_cast<cudaStream_t>(stream)),
        "cudaEventRecord");
  return used_++;
}

double EventMarks::elapsed_ms(size_t i, size_t j) const {
  if (i >= used_ || j >= used_) throw std::out_of_range("EventMarks: no event recorded at that index");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(events_[i]), static_cast<cudaEvent_t>(events_[j])),
        "cudaEventElapsedTime");
  return static_cast<double>(ms);
}

EventTimer::EventTimer(void* stream) : stream_(stream) {
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  start_ = a;
  stop_ = b;
}

EventTimer::~EventTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(start_));
  cudaEventDestroy(static_cast<cudaEvent_t>(stop_));
}

void EventTimer::start() {
  check(cudaEventRecord(static_cast<cudaEvent_t>(start_), static_cast<cudaStream_t>(stream_)), "cudaEventRecord");
}

double EventTimer::stop_ms() {
  check(cudaEventRecord(static_cast<cudaEvent_t>(stop_), static_cast<cudaStream_t>(stream_)), "cudaEventRecord");
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(stop_)), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start_), static_cast<cudaEvent_t>(stop_)),
        "cudaEventElapsedTime");
  return ms;
}

L2Flusher::L2Flusher(int index) {
  int l2 = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, index), "cudaDeviceGetAttribute");
  bytes_ = 2 * static_cast<size_t>(std::max(l2, 1 << 20));
  check(cudaMalloc(&buffer_, bytes_), "cudaMalloc");  // once, before any timed loop
}

L2Flusher::~L2Flusher() { cudaFree(buffer_); }

void L2Flusher::flush(void* stream) {
  value_ = (value_ + 1) & 0xff;  // a different value each time, so no write can be elided
  check(cudaMemsetAsync(buffer_, value_, bytes_, static_cast<cudaStream_t>(stream)), "cudaMemsetAsync");
}

StepGraph::~StepGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
}

void StepGraph::capture(void (*enqueue)(void*), void* ctx) {
  auto* s = static_cast<cudaStream_t>(stream_);
  if (exec_ != nullptr || graph_ != nullptr) throw std::logic_error("StepGraph::capture: already captured");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  check(cudaGetLastError(), "a kernel before the capture");
  // Thread-local mode: other threads' unsafe calls (cudaMalloc of a sibling --jobs case) do not
  // break this capture; this thread's own unsafe calls do.
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  std::string failed;
  try {
    enqueue(ctx);
  } catch (const std::exception& e) {
    failed = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);  // always: leaves the stream usable
  cudaGetLastError();
  if (failed.empty() && end != cudaSuccess) failed = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(end);
  if (!failed.empty()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw std::runtime_error("the step could not be captured into a CUDA graph: " + failed);
  }
  graph_ = graph;
  check(cudaGraphGetNodes(graph, nullptr, &nodes_), "cudaGraphGetNodes");
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  exec_ = exec;
  check(cudaGraphUpload(exec, s), "cudaGraphUpload");
}

void StepGraph::launch() {
  if (exec_ == nullptr) throw std::logic_error("StepGraph::launch: nothing captured");
  check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream_)), "cudaGraphLaunch");
}

}  // namespace bench::kernels::cuda
