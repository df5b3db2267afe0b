// defines: norm_forward_reference, norm_backward_reference: the float64 references of
//          kernels/norm.h's norm_forward and norm_backward (its formulas), written without the
//          tile programs, which every target's results are checked against.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace bench::kernels {

/// float64 reference of norm_forward on double inputs (weight and bias may be empty); with
/// `unit_offset` the gain is 1 + w.
inline void norm_forward_reference(bool center, const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, std::vector<double>& y, int64_t rows, int64_t cols,
                                   double eps, bool unit_offset = false) {
  y.assign(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * cols];
    double mu = 0;
    if (center) {
      for (int64_t c = 0; c < cols; ++c) mu += xr[c];
      mu /= static_cast<double>(cols);
    }
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += (xr[c] - mu) * (xr[c] - mu);
    const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) {
      double v = (xr[c] - mu) * rstd;
      if (!w.empty()) v *= unit_offset ? 1.0 + w[c] : w[c];
      if (!b.empty()) v += b[c];
      y[r * cols + c] = v;
    }
  }
}

/// float64 reference of norm_backward on double inputs, written from the formulas above and
/// independent of the tile programs (w may be empty; with `unit_offset` the gain is 1 + w): dx
/// written; with w, dw[c] += sum dy xhat and db[c] += sum dy.
inline void norm_backward_reference(bool center, const std::vector<double>& x, const std::vector<double>& w,
                                    const std::vector<double>& dy, std::vector<double>& dx, std::vector<double>& dw,
                                    std::vector<double>& db, int64_t rows, int64_t cols, double eps,
                                    bool unit_offset = false) {
  dx.assign(x.size(), 0.0);
  const double n = static_cast<double>(cols);
  std::vector<double> xhat(static_cast<size_t>(cols)), g(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * cols];
    const double* dyr = &dy[r * cols];
    double mu = 0;
    if (center) {
      for (int64_t c = 0; c < cols; ++c) mu += xr[c];
      mu /= n;
    }
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += (xr[c] - mu) * (xr[c] - mu);
    const double rstd = 1.0 / std::sqrt(ss / n + eps);
    double mean_g = 0, mean_gx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      xhat[c] = (xr[c] - mu) * rstd;
      g[c] = w.empty() ? dyr[c] : dyr[c] * (unit_offset ? 1.0 + w[c] : w[c]);
      mean_g += g[c] / n;
      mean_gx += g[c] * xhat[c] / n;
    }
    for (int64_t c = 0; c < cols; ++c) {
      dx[r * cols + c] = rstd * (g[c] - (center ? mean_g : 0.0) - xhat[c] * mean_gx);
      if (!w.empty()) {
        dw[c] += dyr[c] * xhat[c];
        db[c] += dyr[c];
      }
    }
  }
}

}  // namespace bench::kernels
