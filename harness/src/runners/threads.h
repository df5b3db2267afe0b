// defines: bench::thread_request, use_threads — the one place that decides the CPU thread count
//
// Every command that runs kernels (bench run, its child processes, bench eval) asks
// thread_request for the team and sets it with use_threads; nothing else sets the thread count.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/tile/threads.h"

namespace bench {

/// The team asked for, by precedence: `cli_threads` > 0 (--threads N); else, without --threads
/// (`cli_threads` < 0), `file_threads` > 0 (`threads = N` in the experiment `file`); else, for
/// `processes` > 1 at once (--jobs), an equal share of the `usable` CPUs each; else the default
/// (tile::set_team: OMP_NUM_THREADS if set, else one thread per usable CPU). So --threads 0 asks
/// for the default even where the file names a count.
tile::TeamRequest thread_request(int64_t cli_threads, int64_t file_threads, const std::string& file, int64_t processes,
                                 int usable);

/// The CPUs this process can keep busy at once (tile::usable_cpus: affinity mask and cgroup quota).
int usable_cpus();

/// Make the team `r` asks for in this process. With more threads than usable CPUs, one line on
/// stderr says so (unless `quiet`): "warning: 16 threads: --threads 16 (oversubscribed: 2 CPUs in
/// the affinity mask); each parallel loop is split in 16 parts, run by 2 threads, one per CPU".
tile::TeamPlan use_threads(const tile::TeamRequest& r, bool quiet);

}  // namespace bench
