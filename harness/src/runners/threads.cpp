#include "runners/threads.h"

#include <algorithm>
#include <cstdio>

namespace bench {

tile::TeamRequest thread_request(int64_t cli_threads, int64_t file_threads, const std::string& file, int64_t processes,
                                 int usable) {
  tile::TeamRequest r;
  if (cli_threads > 0) {
    r.threads = static_cast<int>(cli_threads);
    r.by = "--threads " + std::to_string(cli_threads);
  } else if (cli_threads < 0 && file_threads > 0) {
    r.threads = static_cast<int>(file_threads);
    r.by = "threads = " + std::to_string(file_threads) + " in " + file;
  } else if (processes > 1) {
    r.threads = static_cast<int>(std::max<int64_t>(1, usable / processes));
    r.by =
        "an equal share of " + std::to_string(usable) + " CPUs for each of " + std::to_string(processes) + " processes";
  }
  return r;
}

int usable_cpus() { return tile::usable_cpus(tile::read_topology("/", tile::available_cpus())); }

tile::TeamPlan use_threads(const tile::TeamRequest& r, bool quiet) {
  tile::TeamPlan plan = tile::set_team(r);
  if (plan.oversubscribed && !quiet)
    std::fprintf(stderr, "warning: %s; each parallel loop is split in %d parts, run by %d %s\n", plan.why.c_str(),
                 plan.threads, plan.workers, plan.workers == 1 ? "thread" : "threads, one per CPU");
  return plan;
}

}  // namespace bench
