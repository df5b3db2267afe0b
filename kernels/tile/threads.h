// defines: bench::tile::available_cpus, thread_policy — where parallel_for's worker threads run
//
// With two or more threads, tile::set_num_threads (and the first parallel_for, for the default
// team) pins each thread of the OpenMP team to its own CPU, one per physical core first, unless
// the environment places them (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY, BENCH_PIN_THREADS=0);
// one thread is left free to move. docs/design.md ("Threads") has the measurements behind it.
#pragma once

#include <string>
#include <vector>

namespace bench::tile {

/// The CPUs this process may run on: the calling thread's affinity, or the set the team was
/// pinned within (pinning narrows the calling thread's own affinity to one CPU).
std::vector<int> available_cpus();
/// How the worker threads are placed, in words, for the run's device record.
std::string thread_policy();
/// Place the current team now (what the first parallel_for would do), so that thread_policy()
/// describes the threads that will run.
void place_threads();

}  // namespace bench::tile
