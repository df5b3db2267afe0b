// `bench merge OUT IN...`: results databases into one (store::Store::merge), with a line per run.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/prepare.h"
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
    const auto r = out->query(
        "SELECT experiment_name, status, ifnull(error, ''), n_cases, ifnull(sweep, ''), shard_count, "
        "(SELECT count(*) FROM cases WHERE run_id = runs.id), "
        "(SELECT count(*) FROM cases WHERE run_id = runs.id AND status IN ('completed', 'diverged')) "
        "FROM runs WHERE id = ?1",
        {Value::integer(id)});
    const auto& row = r.rows.at(0);
    std::string line = fmt::format("run {} ({}): {} of {} cases finished, {} stored", id, row[0].as_string(),
                                   row[7].as_int(), row[3].as_int(), row[6].as_int());
    if (!row[4].as_string().empty())
      line += fmt::format(", sweep {} of {} shards", row[4].as_string(), row[5].is_null() ? 0 : row[5].as_int());
    line += ": " + row[1].as_string();
    if (!row[2].as_string().empty()) line += " (" + row[2].as_string() + ")";
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
