// defines: bench::Arena — owns every buffer of a model and counts its bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/tensor.h"

namespace bench {

/// Zero-initialized, 64-byte aligned allocations that live as long as the arena. Everything a
/// model needs is allocated while it is built, so the total is also the step's peak.
class Arena {
 public:
  /// With `plan_only`, allocations reserve address space without committing memory (mmap with
  /// MAP_NORESERVE): a model can then be set up just to learn how many bytes it needs.
  explicit Arena(bool plan_only = false) : plan_only_(plan_only) {}
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  Tensor allocate(Shape shape, DType dtype);
  /// Bytes allocated so far.
  size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  bool plan_only_;
  std::vector<std::unique_ptr<void, Free>> blocks_;
  std::vector<std::pair<void*, size_t>> mapped_;
  size_t bytes_ = 0;
};

}  // namespace bench
