// defines: bench::kernels::cuda::measure_gemm_ceiling (declared in kernels/device_runtime.h) — the
// one GEMM ceiling of a device, for the run's device record and for cuda_check alike.
#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../device_runtime.h"
#include "../tile/defs.h"
#include "gemm.cuh"

namespace bench::kernels::cuda {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("gemm ceiling: ") + what + ": " + cudaGetErrorString(err));
}

/// Device memory for the product, freed on every path.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

template <class T>
double ceiling() {
  constexpr int64_t n = kGemmCeilingN;
  constexpr int kBackToBack = 10, kBatches = 5;
  const size_t count = static_cast<size_t>(n * n);
  std::vector<T> host(count);
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  for (auto& x : host) {
    if constexpr (std::is_same_v<T, tile::bf16>) {
      x = tile::float_to_bf16(uniform(gen));
    } else {
      x = uniform(gen);
    }
  }
  const DeviceBuffer a(count * sizeof(T)), b(count * sizeof(T)), c(count * sizeof(T));
  check(cudaMemcpy(a.p, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(b.p, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  auto* stream = static_cast<cudaStream_t>(thread_stream());
  Gemm gemm;
  const auto once = [&] {
    gemm.run<T>(false, false, n, n, n, 1.f, static_cast<const T*>(a.p), n, static_cast<const T*>(b.p), n, 0.f,
                static_cast<T*>(c.p), n, stream);
  };
  once();  // plans the shape and warms up
  synchronize(stream);
  EventTimer timer(stream);
  std::vector<double> ms;
  for (int r = 0; r < kBatches; ++r) {
    timer.start();
    for (int i = 0; i < kBackToBack; ++i) once();
    ms.push_back(timer.stop_ms() / kBackToBack);
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / (ms[ms.size() / 2] * 1e-3) *
         1e-9;
}

}  // namespace

double measure_gemm_ceiling(bool bf16) { return bf16 ? ceiling<tile::bf16>() : ceiling<float>(); }

}  // namespace bench::kernels::cuda
