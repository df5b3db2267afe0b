// The runner table. Adding a runner: its own file (a class implementing bench::Runner and a
// function returning its one instance) and two lines here (docs/design.md, "Adding a runner").
#include "runners/registry.h"

#include "bench/error.h"

namespace bench {

// Each defined in its runner's file.
const Runner& throughput_runner();
const Runner& stability_runner();
const Runner& diagnostics_runner();

const std::vector<const Runner*>& runners() {
  static const std::vector<const Runner*> all = {&throughput_runner(), &stability_runner(), &diagnostics_runner()};
  return all;
}

const Runner* find_runner(std::string_view name) {
  for (const Runner* r : runners())
    if (r->name() == name) return r;
  return nullptr;
}

const Runner& runner_of(const Case& c) {
  const Runner* r = find_runner(c.runner);
  if (r == nullptr) throw Error("case " + std::to_string(c.ordinal) + ": no runner '" + c.runner + "'");
  return *r;
}

const RunnerSections& runner_sections() {
  static const RunnerSections sections = [] {
    RunnerSections out;
    for (const Runner* r : runners())
      out.push_back({std::string(r->name()), r->params(),
                     [r](const Params& settings, ModelSpec& model) { r->resolve(settings, model); }});
    return out;
  }();
  return sections;
}

std::string shard_unit_key(const Case& c, const ResolvedCase& rc) {
  return c.runner + "\n" + runner_of(c).group_key(rc);
}

}  // namespace bench
