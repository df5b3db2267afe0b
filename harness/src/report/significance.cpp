// The statistics of `bench compare`: an exact Mann-Whitney test on the repetitions and the matching
// distribution-free interval for the shift, so that the test and the interval agree by construction.
#include "report/significance.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace bench::report {

namespace {

/// Largest n * m for the exact null distribution (a table of n*m+1 counts per (i, j) cell).
constexpr int64_t kExactLimit = 2500;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// U of a against b: pairs (a_i, b_j) with a_i > b_j, ties counting one half.
double u_statistic(const std::vector<double>& a, const std::vector<double>& b) {
  double u = 0;
  for (double x : a)
    for (double y : b) u += x > y ? 1.0 : (x == y ? 0.5 : 0.0);
  return u;
}

/// cdf[u] = P(U <= u) under the null for sizes n and m without ties, by the recurrence
/// f(n, m, u) = f(n-1, m, u-m) + f(n, m-1, u) on counts, normalised at the end.
std::vector<double> u_cdf(int64_t n, int64_t m) {
  const int64_t max_u = n * m;
  // f[j][u] for the current i; counts grow like binomial(n+m, n), fine in double for our sizes.
  std::vector<std::vector<double>> f(static_cast<size_t>(m + 1), std::vector<double>(static_cast<size_t>(max_u + 1)));
  for (int64_t j = 0; j <= m; ++j) f[static_cast<size_t>(j)][0] = 1;  // i = 0: U = 0
  for (int64_t i = 1; i <= n; ++i) {
    std::vector<std::vector<double>> g(static_cast<size_t>(m + 1), std::vector<double>(static_cast<size_t>(max_u + 1)));
    g[0][0] = 1;  // j = 0: U = 0
    for (int64_t j = 1; j <= m; ++j)
      for (int64_t u = 0; u <= i * j; ++u) {
        // The largest of the i + j values is an a (adds j to U) or a b (adds nothing).
        double c = u >= j ? f[static_cast<size_t>(j)][static_cast<size_t>(u - j)] : 0.0;
        c += g[static_cast<size_t>(j - 1)][static_cast<size_t>(u)];
        g[static_cast<size_t>(j)][static_cast<size_t>(u)] = c;
      }
    f = std::move(g);
  }
  std::vector<double> cdf(static_cast<size_t>(max_u + 1));
  const auto& counts = f[static_cast<size_t>(m)];
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  double run = 0;
  for (int64_t u = 0; u <= max_u; ++u) {
    run += counts[static_cast<size_t>(u)];
    cdf[static_cast<size_t>(u)] = run / total;
  }
  return cdf;
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

/// P(U <= u) for the normal approximation.
double normal_u_cdf(int64_t n, int64_t m, double u) {
  const double mean = static_cast<double>(n * m) / 2.0;
  const double sd = std::sqrt(static_cast<double>(n * m) * static_cast<double>(n + m + 1) / 12.0);
  return normal_cdf((u + 0.5 - mean) / sd);
}

}  // namespace

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const auto n = static_cast<int64_t>(a.size());
  const auto m = static_cast<int64_t>(b.size());
  if (n == 0 || m == 0) return 1.0;
  const double u = u_statistic(a, b);
  double lower = 0, upper = 0;  // P(U <= u), P(U >= u)
  if (n * m <= kExactLimit) {
    const auto cdf = u_cdf(n, m);
    const auto floor_u = static_cast<int64_t>(std::floor(u));
    const auto ceil_u = static_cast<int64_t>(std::ceil(u));
    lower = cdf[static_cast<size_t>(floor_u)];
    upper = 1.0 - (ceil_u > 0 ? cdf[static_cast<size_t>(ceil_u - 1)] : 0.0);
  } else {
    lower = normal_u_cdf(n, m, u);
    upper = 1.0 - normal_u_cdf(n, m, u - 1.0);
  }
  return std::min(1.0, 2.0 * std::min(lower, upper));
}

std::optional<std::pair<std::pair<double, double>, double>> shift_interval(const std::vector<double>& a,
                                                                           const std::vector<double>& b, double alpha) {
  const auto n = static_cast<int64_t>(a.size());
  const auto m = static_cast<int64_t>(b.size());
  if (n < 2 || m < 2) return std::nullopt;
  // k - 1 = the largest c with P(U <= c) <= alpha / 2; coverage 1 - 2 P(U <= c).
  int64_t c = -1;
  double tail = 0;
  if (n * m <= kExactLimit) {
    const auto cdf = u_cdf(n, m);
    for (int64_t u = 0; u < static_cast<int64_t>(cdf.size()) && cdf[static_cast<size_t>(u)] <= alpha / 2; ++u) {
      c = u;
      tail = cdf[static_cast<size_t>(u)];
    }
  } else {
    for (int64_t u = 0; u <= n * m / 2 && normal_u_cdf(n, m, static_cast<double>(u)) <= alpha / 2; ++u) {
      c = u;
      tail = normal_u_cdf(n, m, static_cast<double>(u));
    }
  }
  if (c < 0) return std::nullopt;
  std::vector<double> d;
  d.reserve(static_cast<size_t>(n * m));
  for (double x : a)
    for (double y : b) d.push_back(y - x);
  std::sort(d.begin(), d.end());
  const auto k = static_cast<size_t>(c);  // 0-based index of the (c+1)-th smallest
  return std::make_pair(std::make_pair(d[k], d[d.size() - 1 - k]), 1.0 - 2.0 * tail);
}

Comparison compare_samples(const std::vector<double>& a, const std::vector<double>& b, Direction direction,
                           double alpha, double min_effect) {
  Comparison r;
  if (a.empty() || b.empty()) return r;
  r.median_a = median_of(a);
  r.median_b = median_of(b);
  if (r.median_a != 0) r.ratio = r.median_b / r.median_a;

  // The effect of B against A, as a ratio, and whether it is clearly up or down.
  const double bound = 1.0 + min_effect;
  const auto up_or_down = [&](bool up) {
    switch (direction) {
      case Direction::kLowerIsBetter:
        return up ? Verdict::kWorse : Verdict::kBetter;
      case Direction::kHigherIsBetter:
        return up ? Verdict::kBetter : Verdict::kWorse;
      case Direction::kNeutral:
        return up ? Verdict::kHigher : Verdict::kLower;
    }
    return Verdict::kUnclear;
  };
  if (a.size() < 2 || b.size() < 2) {
    r.verdict = Verdict::kSingleRun;
    if (a.size() == 1 && b.size() == 1 && a[0] == b[0]) r.verdict = Verdict::kSame;
    return r;
  }

  r.p = mann_whitney_p(a, b);
  const bool positive = std::all_of(a.begin(), a.end(), [](double x) { return x > 0; }) &&
                        std::all_of(b.begin(), b.end(), [](double x) { return x > 0; });
  if (positive) {
    std::vector<double> la(a.size()), lb(b.size());
    std::transform(a.begin(), a.end(), la.begin(), [](double x) { return std::log(x); });
    std::transform(b.begin(), b.end(), lb.begin(), [](double x) { return std::log(x); });
    if (const auto iv = shift_interval(la, lb, alpha)) {
      r.lo = std::exp(iv->first.first);
      r.hi = std::exp(iv->first.second);
      r.level = iv->second;
    }
  } else if (r.median_a != 0) {
    if (const auto iv = shift_interval(a, b, alpha)) {
      r.lo = 1.0 + iv->first.first / std::fabs(r.median_a);
      r.hi = 1.0 + iv->first.second / std::fabs(r.median_a);
      r.level = iv->second;
    }
  }

  const bool all_equal = std::all_of(a.begin(), a.end(), [&](double x) { return x == a[0]; }) &&
                         std::all_of(b.begin(), b.end(), [&](double x) { return x == a[0]; });
  const bool within_bound = r.lo && r.hi && *r.lo >= 1.0 / bound && *r.hi <= bound;
  const bool significant =
      *r.p < alpha && r.median_b != r.median_a && (!r.ratio || *r.ratio >= bound || *r.ratio <= 1.0 / bound);
  if (!all_equal && significant) {
    r.verdict = up_or_down(r.median_b > r.median_a);
  } else if (all_equal || within_bound) {
    r.verdict = Verdict::kSame;
  } else {
    r.verdict = Verdict::kUnclear;
  }
  return r;
}

std::string_view verdict_name(Verdict v, bool timing) {
  switch (v) {
    case Verdict::kBetter:
      return timing ? "faster" : "better";
    case Verdict::kWorse:
      return timing ? "slower" : "worse";
    case Verdict::kHigher:
      return "higher";
    case Verdict::kLower:
      return "lower";
    case Verdict::kSame:
      return "same";
    case Verdict::kUnclear:
      return "unclear";
    case Verdict::kSingleRun:
      return "single run";
    case Verdict::kNoisy:
      return "noisy";
  }
  return "unclear";
}

}  // namespace bench::report
