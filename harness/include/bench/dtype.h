// defines: bench::DType, dtype_size, dtype_name, parse_dtype, dispatch_float, scalar_as, scalar_value
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
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

/// Call `f.template operator()<T>()` with T = float, double or tile::bf16 for the model's
/// compute dtype. Components are written once as templates over T and dispatched with this; for
/// bf16, T is the storage type and tile::acc_t<T> (float) the type arithmetic happens in.
///
/// In a plugin's CUDA pass (BENCH_CUDA_PASS: nvcc compiles the plugin again, only to instantiate
/// and register the CUDA builds of its tile programs) float64 is left out: CUDA runs float and
/// bf16.
template <class F>
decltype(auto) dispatch_float(DType t, F&& f) {
#if defined(BENCH_CUDA_PASS)
  if (t == DType::kFloat64) throw std::logic_error("float64 has no CUDA path");
#else
  if (t == DType::kFloat64) return f.template operator()<double>();
#endif
  if (t == DType::kBFloat16) return f.template operator()<tile::bf16>();
  return f.template operator()<float>();
}

/// `v` as a T (bf16: rounded to nearest even); how host code makes a storage value.
template <class T>
T scalar_as(double v) {
  return tile::from_acc<T>(static_cast<tile::acc_t<T>>(v));
}

/// A storage value as double (exact for float, double and bf16).
template <class T>
double scalar_value(T v) {
  return static_cast<double>(tile::to_acc(v));
}

}  // namespace bench
