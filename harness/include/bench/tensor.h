// defines: bench::Shape, bench::Tensor (a non-owning, typed view of contiguous memory)
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "bench/dtype.h"
#include "bench/error.h"

namespace bench {

/// Up to four dimensions, row-major.
class Shape {
 public:
  static constexpr int kMaxRank = 4;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  /// "[2, 3, 4]".
  std::string str() const;
  /// This shape with its first dimension set to n (rank >= 1).
  Shape with_leading(int64_t n) const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

/// A view of contiguous memory with a dtype and a shape. Memory is owned elsewhere (the model's
/// arena); copying a Tensor copies the view.
class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, DType dtype, Shape shape) : data_(data), dtype_(dtype), shape_(shape) {}

  /// Typed pointer; throws bench::Error when T does not match the dtype.
  template <class T>
  T* data() const {
    if (dtype_of<T>() != dtype_) type_mismatch(dtype_of<T>());
    return static_cast<T*>(data_);
  }
  void* raw() const { return data_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  int64_t size(int dim) const { return shape_[dim]; }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return data_ != nullptr; }
  /// Same memory, another shape with the same number of elements.
  Tensor view(Shape shape) const;
  /// Set every element to zero.
  void zero() const;

 private:
  [[noreturn]] void type_mismatch(DType asked) const;
  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  Shape shape_;
};

}  // namespace bench
