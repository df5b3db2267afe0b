// defines: BENCH_HD, BENCH_UNROLL, bench::tile::bf16, acc_t, to_acc/from_acc, tile math (exp, log, tanh, ...)
//
// The scalar vocabulary shared by every tile program and every executor. Compiles as plain C++
// (no CUDA headers) and under nvcc, where the same functions become __host__ __device__.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// BENCH_UNROLL: `#pragma unroll` in device code; nothing in host code (GCC, and nvcc's host
// pass under -Wall, would warn of an unknown pragma).
#if defined(__CUDA_ARCH__)
#define BENCH_UNROLL _Pragma("unroll")
#else
#define BENCH_UNROLL
#endif
#if defined(__CUDACC__)
#define BENCH_HD __host__ __device__
#define BENCH_FORCEINLINE __forceinline__
#define BENCH_IVDEP
#else
#define BENCH_HD
#define BENCH_FORCEINLINE inline __attribute__((always_inline))
// Tile loops never alias their destination with a source: let GCC vectorize without checks.
#define BENCH_IVDEP _Pragma("GCC ivdep")
#endif

namespace bench::tile {

/// bfloat16 storage type: the upper 16 bits of an IEEE float. Arithmetic always happens in
/// float after a load (`to_acc`); stores round to nearest even (`from_acc`).
///
/// It converts from nothing implicitly or by cast: `bf16{bits}` takes raw bits, and every value
/// conversion goes through float_to_bf16 / from_acc (bench::scalar_as on the host). Without the
/// deleted constructor, C++20's parenthesized aggregate initialization would make
/// `static_cast<bf16>(0.5)` or `T(1)` compile to the raw bits 0 and 1.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  BENCH_HD constexpr explicit bf16(uint16_t raw) : bits(raw) {}
  template <class U>
  bf16(U) = delete;
};

BENCH_HD BENCH_FORCEINLINE float bf16_to_float(bf16 x) {
  uint32_t u = static_cast<uint32_t>(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

BENCH_HD BENCH_FORCEINLINE bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  bf16 r;
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    r.bits = static_cast<uint16_t>((u >> 16) | 0x40u);  // keep NaN a NaN after truncation
    return r;
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  r.bits = static_cast<uint16_t>(u >> 16);
  return r;
}

/// Accumulation (compute) type of a storage type: float for float and bf16, double for double.
template <class T>
struct Acc {
  using type = float;
};
template <>
struct Acc<double> {
  using type = double;
};
template <class T>
using acc_t = typename Acc<T>::type;

BENCH_HD BENCH_FORCEINLINE float to_acc(float x) { return x; }
BENCH_HD BENCH_FORCEINLINE double to_acc(double x) { return x; }
BENCH_HD BENCH_FORCEINLINE float to_acc(bf16 x) { return bf16_to_float(x); }
BENCH_HD BENCH_FORCEINLINE int to_acc(int x) { return x; }

template <class T>
BENCH_HD BENCH_FORCEINLINE T from_acc(acc_t<T> x) {
  return static_cast<T>(x);
}
template <>
BENCH_HD BENCH_FORCEINLINE bf16 from_acc<bf16>(float x) {
  return float_to_bf16(x);
}

/// Scalar math used inside tile programs, one overload per compute type, so that float code
/// never silently widens to double.
namespace math {
BENCH_HD BENCH_FORCEINLINE float exp(float x) { return ::expf(x); }
BENCH_HD BENCH_FORCEINLINE double exp(double x) { return ::exp(x); }
BENCH_HD BENCH_FORCEINLINE float log(float x) { return ::logf(x); }
BENCH_HD BENCH_FORCEINLINE double log(double x) { return ::log(x); }
BENCH_HD BENCH_FORCEINLINE float sqrt(float x) { return ::sqrtf(x); }
BENCH_HD BENCH_FORCEINLINE double sqrt(double x) { return ::sqrt(x); }
BENCH_HD BENCH_FORCEINLINE float rsqrt(float x) { return 1.0f / ::sqrtf(x); }
BENCH_HD BENCH_FORCEINLINE double rsqrt(double x) { return 1.0 / ::sqrt(x); }
BENCH_HD BENCH_FORCEINLINE float tanh(float x) { return ::tanhf(x); }
BENCH_HD BENCH_FORCEINLINE double tanh(double x) { return ::tanh(x); }
BENCH_HD BENCH_FORCEINLINE float erf(float x) { return ::erff(x); }
BENCH_HD BENCH_FORCEINLINE double erf(double x) { return ::erf(x); }
BENCH_HD BENCH_FORCEINLINE float abs(float x) { return ::fabsf(x); }
BENCH_HD BENCH_FORCEINLINE double abs(double x) { return ::fabs(x); }
template <class T>
BENCH_HD BENCH_FORCEINLINE T max(T a, T b) {
  return a > b ? a : b;
}
template <class T>
BENCH_HD BENCH_FORCEINLINE T min(T a, T b) {
  return a < b ? a : b;
}
/// Largest finite value, used as the identity of a max-reduction (-inf would turn an all-masked
/// row's `x - max` into NaN).
template <class T>
BENCH_HD constexpr T lowest();
template <>
BENCH_HD constexpr float lowest<float>() {
  return -3.402823466e+38f;
}
template <>
BENCH_HD constexpr double lowest<double>() {
  return -1.7976931348623157e+308;
}
BENCH_HD BENCH_FORCEINLINE float sigmoid(float x) { return 1.0f / (1.0f + ::expf(-x)); }
BENCH_HD BENCH_FORCEINLINE double sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }
}  // namespace math

/// A 3-D launch grid of programs, as in Triton's `grid`.
struct Grid {
  int64_t x = 1;
  int64_t y = 1;
  int64_t z = 1;
  int64_t size() const { return x * y * z; }
};

/// A program's coordinates in its grid, from its linear index (x fastest). The host executors'
/// contexts derive from it; the CUDA executor reads blockIdx instead.
class GridPosition {
 public:
  GridPosition(const Grid& grid, int64_t linear) : grid_(grid) {
    pid_[0] = linear % grid.x;
    pid_[1] = (linear / grid.x) % grid.y;
    pid_[2] = linear / (grid.x * grid.y);
  }
  int64_t program_id(int axis) const { return pid_[axis]; }
  int64_t num_programs(int axis) const { return axis == 0 ? grid_.x : (axis == 1 ? grid_.y : grid_.z); }

 private:
  Grid grid_;
  int64_t pid_[3];
};

}  // namespace bench::tile
