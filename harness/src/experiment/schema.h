// defines: the harness-owned keys of an experiment file — top level, [model], and what the
// experiment layer knows of the runners' sections (RunnerSection)
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/component.h"
#include "bench/params.h"
#include "model/spec.h"

namespace bench {

/// What the experiment layer knows of a runner: the name of its section (and of its cases), the
/// settings the section takes, and a check of those settings beyond their declared ranges that may
/// also apply what they imply for the model (the stability runner's weight-decay groups). The
/// runners provide one each (runners/registry.h: runner_sections()); the order is the order in
/// which a variant's cases are expanded.
struct RunnerSection {
  std::string name;
  std::vector<ParamSpec> params;
  /// Throws ConfigError at the offending setting; may be empty.
  std::function<void(const Params& settings, ModelSpec& model)> resolve;
};
using RunnerSections = std::vector<RunnerSection>;

}  // namespace bench

namespace bench::schema {

/// Top-level keys: the harness's and one per runner section.
std::vector<std::string> top_level_keys(const RunnerSections& runners);
/// Keys allowed inside [[variant]], [cpu] and [cuda] (override sections).
std::vector<std::string> override_keys(const RunnerSections& runners);
/// The section of runner `name`, or nullptr.
const RunnerSection* find_runner(const RunnerSections& runners, std::string_view name);

/// Model keys owned by the harness (sizes, dtype, ...), as parameter specs.
const std::vector<ParamSpec>& model_params();
/// Model keys that select a component: key -> slot ("norm" -> Slot::kNorm).
std::optional<Slot> model_slot(std::string_view key);
/// Model slot keys in a fixed order.
const std::vector<std::pair<std::string, Slot>>& model_slots();

}  // namespace bench::schema
