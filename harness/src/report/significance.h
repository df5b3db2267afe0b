// defines: bench::report::Direction, Verdict, Comparison, compare_samples, mann_whitney_p,
// shift_interval — the statistics of `bench compare` (the rule is stated in docs/results.md)
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace bench::report {

/// Which way a metric improves.
enum class Direction {
  kLowerIsBetter,   ///< time, loss, spikes
  kHigherIsBetter,  ///< tokens/s, GFLOP/s
  kNeutral,         ///< a change is reported (higher / lower) but is neither better nor worse
};

/// The verdict on B against the baseline A.
enum class Verdict {
  kBetter,     ///< a clear improvement (significant and at least the minimum effect)
  kWorse,      ///< a clear regression
  kHigher,     ///< a clear increase of a neutral metric
  kLower,      ///< a clear decrease of a neutral metric
  kSame,       ///< the interval of B/A lies within the minimum effect: no change that matters
  kUnclear,    ///< neither: too few repetitions or too much spread to tell
  kSingleRun,  ///< one value per side: no spread to judge against
  kNoisy,      ///< a side's timing stopped above its noise target: not judged (bench compare)
};

/// The outcome of comparing the samples of B with those of the baseline A.
struct Comparison {
  double median_a = 0, median_b = 0;
  std::optional<double> ratio;   ///< median_b / median_a; none when median_a is 0
  std::optional<double> lo, hi;  ///< confidence interval of B/A; none when not available
  double level = 0;              ///< its actual coverage (the exact test's, >= 1 - alpha)
  std::optional<double> p;       ///< two-sided Mann-Whitney p; none with one value per side
  Verdict verdict = Verdict::kUnclear;
};

/// Exact two-sided p of the Mann-Whitney U test of `a` against `b` (ties count one half; the null
/// distribution is the no-ties one, exact for n * m <= 2500, else normal with a continuity
/// correction).
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b);

/// The distribution-free confidence interval (Hodges-Lehmann / Moses) for the shift b - a: order
/// statistics k and n*m+1-k of the n*m pairwise differences, k from the exact U distribution so
/// that the coverage is at least 1 - alpha. Returns the interval and its coverage, or nothing when
/// the samples are too small for that coverage.
std::optional<std::pair<std::pair<double, double>, double>> shift_interval(const std::vector<double>& a,
                                                                           const std::vector<double>& b, double alpha);

/// Compares B with the baseline A: ratio of medians, the interval of B/A (from log values when all
/// are positive, else from the differences relative to |median A|), the Mann-Whitney p and the
/// verdict: better / worse (or higher / lower) when p < alpha and |B/A - 1| >= min_effect; same when
/// the interval lies within [1/(1 + min_effect), 1 + min_effect]; otherwise unclear; single run when
/// either side has one value (then only an exact tie is "same").
Comparison compare_samples(const std::vector<double>& a, const std::vector<double>& b, Direction direction,
                           double alpha, double min_effect);

/// "faster", "slower", "better", "worse", "higher", "lower", "same", "unclear", "single run", "noisy";
/// `timing` words (faster / slower) for better / worse of a time or rate.
std::string_view verdict_name(Verdict v, bool timing);

}  // namespace bench::report
