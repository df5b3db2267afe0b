// defines: bench::Arena — owns every buffer of a model and counts its bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/tensor.h"
#include "kernels/memory.h"

namespace bench {

/// Zero-initialized, 64-byte aligned allocations that live as long as the arena, in host memory
/// or in a device's (kernels/memory.h). Everything a model needs is allocated while it is built,
/// so the total is also the step's peak, and a step allocates nothing.
class Arena {
 public:
  /// With `plan_only`, allocations only count their bytes: the tensors have no storage
  /// (Tensor::defined() is false) and nothing is reserved, not even address space, so a model of
  /// any size can be set up just to learn how many bytes it needs (SetupContext::planning()).
  explicit Arena(bool plan_only = false, kernels::Memory memory = kernels::Memory::kHost)
      : plan_only_(plan_only), memory_(memory) {}
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  Tensor allocate(Shape shape, DType dtype);
  /// Bytes allocated so far.
  size_t bytes() const { return bytes_; }
  /// Where the allocations are (kernels/memory.h): host memory unless the model runs elsewhere.
  kernels::Memory memory() const { return memory_; }
  /// Whether allocations only count (the constructor's `plan_only`).
  bool plan_only() const { return plan_only_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  bool plan_only_;
  kernels::Memory memory_;
  std::vector<void*> device_;  // from kernels::device_allocate
  std::vector<std::unique_ptr<void, Free>> blocks_;
  size_t bytes_ = 0;
};

}  // namespace bench
