// defines: bench::DType, dtype_size, dtype_name, parse_dtype, dispatch_float
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/tile/defs.h"

namespace bench {

/// Element type of a tensor.
enum class DType : uint8_t { kFloat32, kFloat64, kBFloat16, kInt32 };

/// Bytes per element.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
      return 4;
  }
  return 0;
}

/// "float32", "float64", "bfloat16", "int32".
std::string_view dtype_name(DType t);
/// Inverse of dtype_name; nullopt for an unknown name.
std::optional<DType> parse_dtype(std::string_view name);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<tile::bf16>() {
  return DType::kBFloat16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kInt32;
}

/// Call `f.template operator()<T>()` with T = float or double for the model's compute dtype.
/// Components are written once as templates over T and dispatched with this.
template <class F>
decltype(auto) dispatch_float(DType t, F&& f) {
  if (t == DType::kFloat64) return f.template operator()<double>();
  return f.template operator()<float>();
}

}  // namespace bench
