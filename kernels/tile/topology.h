// defines: bench::tile::Topology, read_topology, usable_cpus, TeamPlan, plan_team, place_team —
// what the CPU thread team may use, read apart from what is decided about it
//
// The reader (read_topology) turns sysfs, procfs and the process's own cgroup into a plain
// struct; the decisions (plan_team, place_team) are pure functions of that struct, so they are
// tested on synthetic machines (tests/kernels/topology_test.cpp): a VM whose vCPUs all report one
// core id, 2 sockets x 8 cores x 2 SMT, a narrow affinity mask, a cgroup quota.
#pragma once

#include <string>
#include <vector>

namespace bench::tile {

/// One CPU the process may run on, as sysfs describes it (-1 / empty: not known).
struct CpuInfo {
  int id = 0;
  int core = -1;              ///< topology/core_id
  int package = -1;           ///< topology/physical_package_id
  std::vector<int> siblings;  ///< topology/thread_siblings_list: the CPUs of its physical core
};

/// What the thread team may use.
struct Topology {
  std::vector<CpuInfo> cpus;  ///< the CPUs in the process's affinity mask, ascending id
  int online = 0;             ///< CPUs online in the machine (0: not known)
  double quota = 0;           ///< cgroup CPU bandwidth limit in CPUs (quota / period); 0: none
  std::string quota_file;     ///< the cgroup file the quota was read from
};

/// Read the topology of the CPUs in `allowed` from the tree under `root` ("/" for this machine):
/// sys/devices/system/cpu, proc/self/cgroup and proc/self/mountinfo (to find the process's own
/// cgroup directories, v2 `cpu.max` and v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`; the
/// smallest limit on the path from the process's cgroup up to its hierarchy's root counts).
/// Missing files leave fields unknown; nothing throws.
Topology read_topology(const std::string& root, const std::vector<int>& allowed);

/// The CPUs in this process's affinity mask (sched_getaffinity of the calling thread).
std::vector<int> affinity_mask();

/// How many threads the CPUs can keep running at once: the affinity mask, narrowed by the quota
/// (rounded up: a quota of 1.5 CPUs runs two threads part of the time). At least 1.
int usable_cpus(const Topology& t);

/// The team and why. A team larger than the usable CPUs (oversubscribed) keeps its size as the
/// number of parts each parallel loop is split into (so its results are those of that many
/// threads), but runs them on one OpenMP thread per usable CPU: no thread ever waits at a barrier
/// for another that has no CPU to run on, and no two threads are pinned to one CPU.
struct TeamPlan {
  int threads = 1;              ///< the team's size: parts of each parallel loop
  int workers = 1;              ///< OpenMP threads that run them: min(threads, usable_cpus)
  bool oversubscribed = false;  ///< threads > usable_cpus
  std::string why;              ///< "2 threads: 2 CPUs in the affinity mask", for the device record
  std::vector<int> cpu_of;      ///< worker i runs on CPU cpu_of[i]; empty: not pinned (one worker)
};

/// Decide the team for `requested` threads (<= 0: the default, usable_cpus), asked for by
/// `requested_by` ("--threads 16", "threads = 4 in x.toml"). Two or more workers are pinned one
/// per CPU in placement_order; a single one is left free to move to an idle core.
TeamPlan plan_team(const Topology& t, int requested, const std::string& requested_by);

/// The CPUs of `t` in the order threads are placed on them: one per physical core first (cores
/// taken from the packages in turn, so that a partial team spreads over the sockets' memory),
/// then each core's second hyper-thread, and so on. A core is the set of thread siblings; where
/// sysfs gives none, (package, core id); where it gives neither, the CPU alone.
std::vector<int> placement_order(const Topology& t);

}  // namespace bench::tile
