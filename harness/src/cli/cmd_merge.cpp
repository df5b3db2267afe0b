// `bench merge OUT IN...`: results databases into one (store::Store::merge), with a line per run.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/prepare.h"
#include "store/runs.h"
#include "store/store.h"

namespace bench::cli {

int cmd_merge(const GlobalOptions& g, const MergeArgs& o) {
  std::unique_ptr<store::Store> out;
  std::vector<store::MergeOutcome> done;
  try {
    out = std::make_unique<store::Store>(o.output);
    done = out->merge(o.inputs);
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
  int64_t added = 0, replaced = 0, kept = 0;
  for (const auto& m : done) {
    added += m.added;
    replaced += m.replaced;
    kept += m.kept;
    if (!g.quiet)
      std::fprintf(stderr, "%s\n",
                   fmt::format("{}: {} -> run {}{}: {} cases added, {} replaced, {} already here", m.source,
                               m.description, m.target_run, m.created ? " (new)" : "", m.added, m.replaced, m.kept)
                       .c_str());
  }
  // The runs that received cases, as they stand now: the result of the command.
  std::vector<int64_t> targets;
  for (const auto& m : done)
    if (std::find(targets.begin(), targets.end(), m.target_run) == targets.end()) targets.push_back(m.target_run);
  for (const int64_t id : targets) {
    const store::RunSummary r = store::run_summary(*out, id);
    std::string line = fmt::format("run {} ({}): {} of {} cases finished, {} stored", id, r.experiment_name, r.finished,
                                   r.n_cases, r.stored);
    if (!r.sweep.empty()) line += fmt::format(", sweep {} of {} shards", r.sweep, r.shard_count);
    line += ": " + r.status;
    if (!r.error.empty()) line += " (" + r.error + ")";
    std::printf("%s\n", line.c_str());
  }
  if (!g.quiet)
    std::fprintf(stderr, "%s\n",
                 fmt::format("merged {} run(s) from {} database(s) into {}: {} cases added, {} replaced, {} already "
                             "there",
                             done.size(), o.inputs.size(), o.output, added, replaced, kept)
                     .c_str());
  return kOk;
}

}  // namespace bench::cli
