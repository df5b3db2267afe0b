// defines: fast_exp, fast_tanh, FastExp, FastTanh — exp and tanh that the CPU compiler vectorizes
//
// glibc's expf is a scalar call that GCC does not vectorize without -ffast-math; one call per
// element made the CPU softmax of attention several times slower than the GEMMs around it.
// This is the Cephes expf polynomial (relative error measured below 1e-7 over its range) as plain
// arithmetic and bit operations, so a tile loop over it compiles to SIMD code. On a CUDA device
// it is the library expf; in double it is ::exp (double is the gradient-check precision).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "tile/defs.h"

namespace bench::kernels {

/// e^x in float. Results below the smallest normal float (x < -87.34) are 0; x > 88.72 gives
/// +inf; NaN stays NaN.
BENCH_HD BENCH_FORCEINLINE float fast_exp(float x) {
#if defined(__CUDA_ARCH__)
  return ::expf(x);
#else
  constexpr float kLo = -87.3365447f, kHi = 88.7228394f;
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer kept in the low bits
  float c = x < kLo ? kLo : x;           // comparisons leave NaN unchanged
  c = c > kHi ? kHi : c;
  // x = n ln2 + r, n = round(x / ln2), |r| <= ln2 / 2; ln2 in two parts makes n * ln2 exact.
  const float u = c * 1.44269504088896341f + kShift;
  const float n = u - kShift;
  const float r = c - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n from the integer in u's low bits, in two normal factors (n reaches -126 and 128).
  // Unsigned bit arithmetic: a NaN's bits are arbitrary, and must not overflow a signed int.
  uint32_t ui;
  std::memcpy(&ui, &u, sizeof ui);
  const auto ni = static_cast<int32_t>(ui - 0x4B400000u);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const uint32_t b1 = static_cast<uint32_t>(n1 + 127) << 23, b2 = static_cast<uint32_t>(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  float y = p * s1 * s2;
  y = x < kLo ? 0.0f : y;
  y = x > kHi ? std::numeric_limits<float>::infinity() : y;
  return y;
#endif
}

/// e^x in double (accuracy first).
BENCH_HD BENCH_FORCEINLINE double fast_exp(double x) { return ::exp(x); }

/// tanh(x) in float, Cephes tanhf: an odd polynomial below |x| = 0.625, 1 - 2 / (e^2|x| + 1)
/// above (both computed, one selected, so the loop has no branch). NaN stays NaN.
BENCH_HD BENCH_FORCEINLINE float fast_tanh(float x) {
#if defined(__CUDA_ARCH__)
  return ::tanhf(x);
#else
  const float a = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  float large = 1.0f - 2.0f / (fast_exp(2.0f * a) + 1.0f);
  large = x < 0.0f ? -large : large;
  return a >= 0.625f ? large : small;
#endif
}

/// tanh(x) in double (accuracy first).
BENCH_HD BENCH_FORCEINLINE double fast_tanh(double x) { return ::tanh(x); }

/// fast_exp as a functor for tl::map.
struct FastExp {
  template <class A>
  BENCH_HD BENCH_FORCEINLINE A operator()(A x) const {
    return fast_exp(x);
  }
};

/// fast_tanh as a functor for tl::map.
struct FastTanh {
  template <class A>
  BENCH_HD BENCH_FORCEINLINE A operator()(A x) const {
    return fast_tanh(x);
  }
};

}  // namespace bench::kernels
