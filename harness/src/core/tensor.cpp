#include "bench/tensor.h"

#include <cstring>

#include "kernels/memory.h"

namespace bench {

Shape::Shape(std::initializer_list<int64_t> dims) {
  if (dims.size() > kMaxRank) throw Error("tensor rank above " + std::to_string(kMaxRank));
  for (int64_t d : dims) dims_[static_cast<size_t>(rank_++)] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[static_cast<size_t>(i)]);
  }
  return s + "]";
}

Shape Shape::with_leading(int64_t n) const {
  if (rank_ == 0) throw Error("a scalar shape has no leading dimension");
  Shape s = *this;
  s.dims_[0] = n;
  return s;
}

Tensor Tensor::view(Shape shape) const {
  if (shape.numel() != numel()) throw Error("cannot view a tensor of shape " + shape_.str() + " as " + shape.str());
  return Tensor(data_, dtype_, shape);
}

void Tensor::zero() const {
  if (data_ != nullptr) kernels::zero_bytes(data_, bytes());
}

void Tensor::type_mismatch(DType asked) const {
  throw Error("tensor of dtype " + std::string(dtype_name(dtype_)) + " accessed as " + std::string(dtype_name(asked)));
}

}  // namespace bench
