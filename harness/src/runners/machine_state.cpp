#include "runners/machine_state.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#ifdef __linux__
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#endif

#include "runners/child.h"  // allowed_cpus

namespace bench {

CpuTimes parse_cpu_times(const std::string& proc_stat, const std::vector<int>& cpus) {
  const std::set<int> wanted(cpus.begin(), cpus.end());
  CpuTimes t;
  std::istringstream in(proc_stat);
  std::string line;
  while (std::getline(in, line)) {
    // "cpuN user nice system idle iowait irq softirq steal guest guest_nice"; "cpu " is the total.
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    fields >> cpu;
    if (wanted.count(cpu) == 0) continue;
    int64_t v[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // user nice system idle iowait irq softirq steal
    for (int64_t& x : v)
      if (!(fields >> x)) x = 0;  // older kernels have fewer fields: the missing ones are 0
    t.total += v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
    t.busy += v[0] + v[1] + v[2] + v[5] + v[6];
    t.steal += v[7];
    t.cpus += 1;
  }
  return t;
}

CpuTimes read_cpu_times(const std::vector<int>& cpus) {
  std::ifstream f("/proc/stat");
  if (!f) return {};
  std::stringstream text;
  text << f.rdbuf();
  return parse_cpu_times(text.str(), cpus);
}

MachineState machine_state_between(const CpuTimes& before, const CpuTimes& after, double own_cpu_s,
                                   double ticks_per_s) {
  MachineState s;
  s.cores = after.cpus;
  const auto elapsed = static_cast<double>(after.total - before.total);
  if (after.cpus == 0 || after.cpus != before.cpus || !(elapsed > 0) || !(ticks_per_s > 0)) return s;
  s.steal = std::clamp(static_cast<double>(after.steal - before.steal) / elapsed, 0.0, 1.0);
  const double others = static_cast<double>(after.busy - before.busy) - own_cpu_s * ticks_per_s;
  s.other_busy = std::clamp(others / elapsed, 0.0, 1.0);
  return s;
}

double own_cpu_seconds() {
#ifdef __linux__
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return NAN;
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
#else
  return NAN;
#endif
}

MachineSampler::MachineSampler() : MachineSampler(allowed_cpus()) {}

MachineSampler::MachineSampler(std::vector<int> cpus)
    : cpus_(std::move(cpus)), start_(read_cpu_times(cpus_)), own_start_s_(own_cpu_seconds()) {}

MachineState MachineSampler::stop() const {
  const double own_end_s = own_cpu_seconds();
  const CpuTimes end = read_cpu_times(cpus_);
  MachineState s;
#ifdef __linux__
  s = machine_state_between(start_, end, own_end_s - own_start_s_, static_cast<double>(sysconf(_SC_CLK_TCK)));
  double load[1] = {NAN};
  if (getloadavg(load, 1) == 1) s.load_avg = load[0];
#endif
  if (s.cores == 0) s.cores = static_cast<int>(cpus_.size());
  return s;
}

}  // namespace bench
