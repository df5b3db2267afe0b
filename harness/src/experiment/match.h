// defines: bench::MatchSpec, read_match, measure_budget, match_budgets — matched budgets:
// an experiment's variants held at the non-embedding parameters (a width solved per variant) or
// at the training FLOPs (steps or batch size solved per variant) of a reference variant, and the
// budget every case records (parameters, FLOPs per token, training tokens and FLOPs)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/value.h"
#include "experiment/experiment.h"
#include "experiment/resolve.h"

namespace bench {

class Model;
class Registry;

/// What an experiment holds equal across its variants (the top-level `match*` keys).
struct MatchSpec {
  std::string budget;     ///< "params" or "flops"
  std::string reference;  ///< the variant whose budget the others are solved to
  /// The key path of the solved value: params: "model.ffn.d_ff", "model.d_model" ...; flops:
  /// "steps" (the runner's) or "model.batch_size".
  std::string width;
  std::string width_name;        ///< as written: "d_ff", "steps" ...
  int64_t multiple = 1;          ///< the solved value is a positive multiple of this
  double tolerance = 0.05;       ///< largest accepted |achieved - target| / target
  bool tolerance_given = false;  ///< match_tolerance was written (else the default applies)
  SourceLoc at;                  ///< the `match` key
  SourceLoc width_at;            ///< the key naming the width (match_width / match_by), else `match`
  SourceLoc tolerance_at;        ///< match_tolerance, else `match`
};

/// The top-level `match*` keys of `root`, checked; nullopt when the file has no `match`. Throws
/// ConfigError at the offending key (a match_* key without `match` included).
std::optional<MatchSpec> read_match(const Value& root);

/// The budget (resolve.h) of a resolved case, counted from its plan-only build (nothing allocated), without
/// the match fields. Throws ConfigError / Error as Model::plan does.
Budget measure_budget(const ResolvedCase& rc, const Registry& registry);
/// The same, from the case's plan-only build `m` (Model::Validating) when the caller has one.
Budget measure_budget(const ResolvedCase& rc, const Model& m);

/// Solve a matched experiment: every case of a variant other than the reference gets the width
/// (or steps, or batch size) that brings its budget closest to its reference case's (the
/// reference's case of the same runner whose axes agree with it). Rewrites the cases'
/// configurations and returns, per case, its target and gap (Budget::match set; the counts are
/// filled by measure_budget later). Without `match` returns a Budget per case with match empty.
/// Throws ConfigError at the `match*` key when a case cannot be matched within the tolerance.
std::vector<Budget> match_budgets(const ExperimentFile& file, std::vector<Case>& cases, const Registry& registry);

/// 6738415616 -> "6,738,415,616" (rounded to a whole number): the counts of match errors, of
/// `bench validate` and of `bench calc`.
std::string thousands(double v);

}  // namespace bench
