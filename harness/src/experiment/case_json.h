// defines: bench::case_json, case_from_json — one resolved case as JSON text and back: how
// `bench run --isolate / --jobs / --devices` hands a child process its case, so that the child
// neither reads nor re-prepares the experiment
#pragma once

#include <string>
#include <utility>

#include "experiment/experiment.h"
#include "experiment/resolve.h"

namespace bench {

class Registry;

/// The case (ordinal, runner, variant, label, axes) and its resolved settings: every dimension,
/// the model's dtype, final norm, decay groups and backend, and for each slot, the dataset and the
/// runner section the component or settings as given, with where each was given (so that paths
/// resolve against the experiment's directory and messages name the place). Numbers keep their
/// bits; the case's merged TOML (Case::config) is not included.
std::string case_json(const Case& c, const ResolvedCase& rc);

/// The case of case_json, with its components looked up in `registry` and its runner's settings
/// in `runners`, the parameters checked again against their declarations (Params::resolve), which
/// gives the same values. Throws bench::Error for text that is not such a case, or a component or
/// runner that is not there.
std::pair<Case, ResolvedCase> case_from_json(const std::string& text, const Registry& registry,
                                             const RunnerSections& runners);

}  // namespace bench
