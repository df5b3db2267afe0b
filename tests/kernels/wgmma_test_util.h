// defines: bench::kernels::wgmma_test::Problem, at, put, close — what the wgmma emulator's tests
//          (wgmma_emulation_test.cpp, wgmma_isa_test.cpp) share: a random bf16 A (64 x 16) and
//          B (16 x N) with their float64 product, a bf16 store into a shared-memory image, and
//          the comparison with the float64 product
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tile/defs.h"

namespace bench::kernels::wgmma_test {

/// Index (row, col) of a row-major matrix `width` wide.
inline size_t at(int row, int width, int col) {
  return static_cast<size_t>(row) * static_cast<size_t>(width) + static_cast<size_t>(col);
}

/// A (64 x 16) and B (16 x N) with small random bf16 values, and the float64 product.
struct Problem {
  int n;
  std::vector<uint16_t> a, b;  // row-major: A[m][k], B[k][n]
  std::vector<double> product;
  explicit Problem(int columns, unsigned seed = 7) : n(columns), a(at(64, 16, 0)), b(at(16, columns, 0)) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& x : a) x = tile::float_to_bf16(nd(gen)).bits;
    for (auto& x : b) x = tile::float_to_bf16(nd(gen)).bits;
    product.assign(at(64, n, 0), 0.0);
    for (int m = 0; m < 64; ++m)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < 16; ++k)
          product[at(m, n, j)] += static_cast<double>(value(a[at(m, 16, k)])) * value(b[at(k, n, j)]);
  }
  static float value(uint16_t bits) { return tile::bf16_to_float(tile::bf16{bits}); }
};

/// Stores bf16 `v` at byte `at` of a shared-memory image.
inline void put(uint8_t* shared, uint32_t at, uint16_t v) { std::memcpy(shared + at, &v, sizeof v); }

/// Whether `got` matches the float64 `ref` within float accumulation's error.
inline ::testing::AssertionResult close(const std::vector<double>& ref, const std::vector<double>& got) {
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::abs(got[i] - ref[i]) <= 1e-4 + 1e-5 * std::abs(ref[i])))
      return ::testing::AssertionFailure() << "at " << i << ": " << got[i] << " vs " << ref[i];
  return ::testing::AssertionSuccess();
}

}  // namespace bench::kernels::wgmma_test
