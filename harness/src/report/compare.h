// defines: bench::report::CompareOptions, CompareRow, CompareReport, compare, render_compare —
// `bench compare`: B against the baseline A, per matching case, mode and metric (docs/results.md)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/report.h"
#include "report/significance.h"
#include "store/store.h"

namespace bench::report {

/// What to compare. Without `run`, a and b are run ids and cases match by label. With `run`, a
/// and b select cases of that run: "#N" is the case with ordinal N; anything else is a list of
/// words ("norm_position=pre norm=rmsnorm", a variant name) that a case's label must all contain,
/// and the cases of A and B match by the rest of their labels.
struct CompareOptions {
  int64_t run = 0;
  std::string a, b;
  std::vector<std::string> metrics;  ///< empty: the defaults (docs/results.md)
  double alpha = 0.05;               ///< significance level of the test, and 1 - the interval's level
  double min_effect = 0.02;          ///< smallest relative change that counts (0.02 = 2 %)
};

/// One compared metric of one matching pair of cases (and mode).
struct CompareRow {
  std::string runner;  ///< the cases' runner
  std::string key;     ///< what the two sides share: the label, or the rest of it after the selectors
  std::string a_label, b_label;
  std::string mode;         ///< throughput mode; empty for stability
  std::string metric;       ///< key, e.g. "median_ms"
  std::string header;       ///< as people read it, e.g. "median ms"
  Value a_value, b_value;   ///< the medians (numbers), or the statuses (strings) for "status"
  size_t n_a = 0, n_b = 0;  ///< repetitions (throughput) or seeds (stability)
  Comparison result;
  bool timing = false;      ///< faster / slower rather than better / worse
  bool regression = false;  ///< a clear regression: slower or worse
};

struct CompareReport {
  std::string a_title, b_title;  ///< "run 3 (norms, 2026-..., git abc1234)" or the selector and its run
  std::string rule;              ///< the decision rule in one sentence
  std::vector<CompareRow> rows;
  std::vector<std::string> only_a, only_b;  ///< labels with no match on the other side
  int regressions = 0;
};

/// Compare as `o` says. Throws bench::Error for an unknown run, a selector that matches nothing,
/// an unknown metric, or when no case of A matches a case of B.
CompareReport compare(const store::Store& db, const CompareOptions& o);

/// Table: a header (A, B, the rule), a table per runner (runners/registry.h: "throughput",
/// "stability" ...) with rows, then one ("other") for runners this build does not have, the
/// unmatched labels and a count of verdicts. CSV: one block per table. JSON: {"a", "b", "rule",
/// one key per runner, "other" when it has rows, "only_in_a", "only_in_b", "regressions"}.
/// Markdown: the tables under headings.
std::string render_compare(const CompareReport& r, Format f);

}  // namespace bench::report
