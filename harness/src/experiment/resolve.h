// defines: bench::Budget, ResolvedCase, resolve_case, validate_case
//
// A Case holds merged TOML values; resolving it checks every key and type against the
// harness's schemas and the chosen components' declared parameters, and yields typed settings.
#pragma once

#include <cstdint>
#include <string>

#include "bench/component.h"
#include "bench/params.h"
#include "experiment/experiment.h"
#include "model/spec.h"

namespace bench {

class Registry;

/// What one case spends, and for a matched experiment what it was held to (experiment/match.h
/// measures and solves it; stored with the case as metrics).
struct Budget {
  int64_t params_total = 0;          ///< every trainable parameter, a tied matrix once
  int64_t params_non_embedding = 0;  ///< params_total less the token (and learned position) embedding
  double flops_per_token = 0;        ///< declared forward + backward FLOPs per token (Component::cost)
  int64_t train_tokens = 0;          ///< steps x batch_size x seq_len; 0 for a runner that does not train
  double train_flops_total = 0;      ///< flops_per_token x train_tokens
  int64_t d_ff = 0;                  ///< the FFN's hidden width as built (0 = none reported)
  std::string match;                 ///< "params" or "flops" in a matched experiment, else ""
  double match_target = 0;           ///< the reference's params_non_embedding or train_flops_total
  double match_gap = 0;              ///< (achieved - target) / target
};

/// A case with typed, checked settings.
struct ResolvedCase {
  ModelSpec model;
  SlotChoice data;
  Params runner;  ///< the runner section's settings
  int64_t seed = 0;
  Budget budget;  ///< filled by prepare (measure_budget, match_budgets), not by resolve_case
};

/// Check and type a case: its model and data against the harness's keys and the components'
/// declared parameters (the dataset also validates itself), its runner section against
/// `runners`' settings. Throws ConfigError at the offending key.
ResolvedCase resolve_case(const Case& c, const Registry& registry, const RunnerSections& runners);

/// Construct every configured component of the case once, without setting anything up, and let
/// each check itself against the model's dimensions (Component::validate): a case's configuration
/// checked alone. `bench run` and `bench validate` get these checks, and those of set-up, from
/// the case's plan-only build instead (Model::plan). Throws ConfigError or Error.
void validate_case(const ResolvedCase& rc, const Registry& registry);

/// The resolved configuration as a table: model (sizes and every slot's component with its
/// parameters), data, the runner's settings ("runner") and seed.
Value resolved_value(const ResolvedCase& rc);
/// resolved_value as JSON text, for storage with the case.
std::string resolved_json(const ResolvedCase& rc);

}  // namespace bench
