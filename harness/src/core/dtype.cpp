#include "bench/dtype.h"

namespace bench {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kInt32:
      return "int32";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kInt32})
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

}  // namespace bench
