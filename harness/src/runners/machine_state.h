// defines: bench::CpuTimes, MachineState, read_cpu_times, parse_cpu_times, machine_state_between,
// MachineSampler — the machine's state around a timing window: load average, CPU time stolen by
// the hypervisor, and the share of this process's cores that other processes kept busy
// (docs/design.md, "How throughput is measured"). Linux reads /proc; elsewhere every value is NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace bench {

/// Jiffies summed over a set of CPUs, from the per-CPU lines of /proc/stat.
struct CpuTimes {
  int64_t total = 0;  ///< every field but guest and guest_nice (already counted in user and nice)
  int64_t busy = 0;   ///< user + nice + system + irq + softirq: running something, on this machine
  int64_t steal = 0;  ///< time a hypervisor gave the CPU to another machine
  int cpus = 0;       ///< how many of the asked-for CPUs /proc/stat had a line for
};

/// The machine's state over one window. NaN where it could not be read.
struct MachineState {
  double load_avg = NAN;    ///< 1-minute load average at the end of the window
  double steal = NAN;       ///< stolen time / elapsed time of the cores, 0..1
  double other_busy = NAN;  ///< busy time of the cores not spent by this process / their elapsed time, 0..1
  int cores = 0;            ///< the cores this process may run on (sched_getaffinity); 0 when unknown
};

/// Sums the lines "cpuN ..." of a /proc/stat text for the CPUs in `cpus`.
CpuTimes parse_cpu_times(const std::string& proc_stat, const std::vector<int>& cpus);

/// /proc/stat now, for `cpus`; cpus = 0 when it cannot be read.
CpuTimes read_cpu_times(const std::vector<int>& cpus);

/// The state between two readings: steal and other_busy as fractions of the total jiffies of the
/// cores between them, other_busy after taking away `own_cpu_s` (this process's CPU time over the
/// window) at `ticks_per_s` jiffies a second, clamped to [0, 1]. NaN when no time passed.
MachineState machine_state_between(const CpuTimes& before, const CpuTimes& after, double own_cpu_s, double ticks_per_s);

/// This process's CPU time so far (user + system, every thread), seconds.
double own_cpu_seconds();

/// Takes a reading when made and another at stop(): the state of the window in between.
class MachineSampler {
 public:
  /// Over the cores this process may run on (runners/child.h: allowed_cpus).
  MachineSampler();
  /// Over the given cores.
  explicit MachineSampler(std::vector<int> cpus);
  /// The state from construction to now, with the load average of now.
  MachineState stop() const;

 private:
  std::vector<int> cpus_;
  CpuTimes start_;
  double own_start_s_ = 0;
};

}  // namespace bench
