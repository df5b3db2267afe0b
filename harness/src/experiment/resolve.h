// defines: bench::ResolvedCase, resolve_case, validate_case
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

/// A case with typed, checked settings.
struct ResolvedCase {
  ModelSpec model;
  SlotChoice data;
  Params runner;  ///< the runner section's settings
  int64_t seed = 0;
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
