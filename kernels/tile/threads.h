// defines: bench::tile::TeamRequest, set_team, team_request, team, thread_policy, available_cpus —
// how many worker threads parallel_for runs and where they run
//
// The team is decided by tile::plan_team (tile/topology.h) from the CPUs the process may use: the
// affinity mask and the cgroup quota. Two or more threads that fit are pinned one per CPU, one per
// physical core first; a single thread, or a team larger than the usable CPUs (oversubscribed), is
// not pinned, and an oversubscribed team waits passively (parallel.cpp). The environment's own
// placement (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY, BENCH_PIN_THREADS=0) is left alone.
// docs/design.md ("Threads") has the measurements behind it.
#pragma once

#include <string>
#include <vector>

#include "topology.h"

namespace bench::tile {

/// What the team is asked to be.
struct TeamRequest {
  int threads = 0;          ///< <= 0: the default (OMP_NUM_THREADS if set, else one per usable CPU)
  std::string by;           ///< who asked, for the record: "--threads 16", "threads = 4 in x.toml"
  std::vector<int> within;  ///< the CPUs to place on; empty: the process's affinity mask
};

/// Make the team what `r` asks for, now: its size, its placement, its way of waiting. The one
/// setter of the thread count (the harness decides the request in one place: cli/threads.h).
TeamPlan set_team(const TeamRequest& r);
/// The request the team was last made from (the default before any set_team).
TeamRequest team_request();
/// The team now (decided on first use when no set_team came before).
TeamPlan team();

/// The CPUs this process may run on: the affinity mask as it was before the team was pinned
/// (pinning narrows the calling thread's own mask to one CPU).
std::vector<int> available_cpus();
/// How the worker threads are placed, in words, for the run's device record.
std::string thread_policy();
/// Place the current team now (what the first parallel_for would do), so that thread_policy()
/// describes the threads that will run.
void place_threads();

}  // namespace bench::tile
