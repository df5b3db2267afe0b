// defines: bench::runners, find_runner, runner_sections, shard_unit_key — the runner table: the one
// place where runners are registered (runners/registry.cpp) and looked up by name
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "experiment/schema.h"
#include "runners/runner.h"

namespace bench {

/// Every runner, in the order a variant's cases are expanded (throughput, stability, diagnostics).
const std::vector<const Runner*>& runners();

/// The runner named `name`, or nullptr.
const Runner* find_runner(std::string_view name);

/// The runner of case `c`. Throws bench::Error when no runner has its name.
const Runner& runner_of(const Case& c);

/// What the experiment layer needs of every runner (experiment/schema.h), in runners() order.
const RunnerSections& runner_sections();

/// The key shard_of groups case `c` by (experiment/shard.h): its runner's name and group key.
std::string shard_unit_key(const Case& c, const ResolvedCase& rc);

}  // namespace bench
