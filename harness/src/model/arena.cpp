#include "model/arena.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace bench {

void Arena::Free::operator()(void* p) const { std::free(p); }

Arena::~Arena() {
  for (void* p : device_) kernels::device_free(p);
}

Tensor Arena::allocate(Shape shape, DType dtype) {
  if (shape.numel() < 0) throw Error("negative tensor size " + shape.str());
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  const size_t rounded = (bytes + 63) / 64 * 64;
  if (plan_only_) {  // counted, not allocated: the plan's tensors have no storage
    bytes_ += rounded;
    return Tensor(nullptr, dtype, shape);
  }
  if (memory_ != kernels::Memory::kHost) {
    void* d = nullptr;
    try {
      d = kernels::device_allocate(memory_, rounded);
    } catch (const std::exception& e) {
      throw Error("allocating " + std::to_string(bytes) + " bytes of " + std::string(kernels::memory_name(memory_)) +
                  " memory for " + shape.str() + ": " + e.what());
    }
    device_.push_back(d);
    bytes_ += rounded;
    return Tensor(d, dtype, shape);
  }
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes for " + shape.str());
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  blocks_.emplace_back(p);
  bytes_ += rounded;
  return Tensor(p, dtype, shape);
}

}  // namespace bench
