#include "cuda_backend.h"

#include <atomic>
#include <stdexcept>
#include <string>

namespace bench::kernels {

namespace {
std::atomic<const CudaBackend*> g_cuda{nullptr};
}  // namespace

void install_cuda_backend(const CudaBackend* backend) { g_cuda.store(backend); }

const CudaBackend* cuda_backend() { return g_cuda.load(); }

const CudaBackend& require_cuda_backend(const char* what) {
  const CudaBackend* b = g_cuda.load();
  if (b == nullptr)
    throw std::runtime_error(
        std::string(what) +
        ": this process has no CUDA backend (a build without CUDA: configure with nvcc on the PATH)");
  return *b;
}

}  // namespace bench::kernels
