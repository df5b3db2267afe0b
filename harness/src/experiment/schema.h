// defines: the harness-owned keys of an experiment file — top level, [model], runner sections
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/component.h"
#include "bench/params.h"

namespace bench::schema {

/// Top-level keys and what they hold.
const std::vector<std::string>& top_level_keys();
/// Keys allowed inside [[variant]], [cpu] and [cuda] (override sections).
const std::vector<std::string>& override_keys();

/// Model keys owned by the harness (sizes, dtype, ...), as parameter specs.
const std::vector<ParamSpec>& model_params();
/// Model keys that select a component: key -> slot ("norm" -> Slot::kNorm).
std::optional<Slot> model_slot(std::string_view key);
/// Model slot keys in a fixed order.
const std::vector<std::pair<std::string, Slot>>& model_slots();
/// Default component per model slot.
std::string_view default_component(Slot slot);

/// Runner names in the order their cases run: "throughput", "stability".
const std::vector<std::string>& runners();
/// Settings of a runner section.
const std::vector<ParamSpec>& runner_params(std::string_view runner);

}  // namespace bench::schema
