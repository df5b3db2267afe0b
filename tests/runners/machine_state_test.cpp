// The machine-state sampler: its arithmetic on hand-made /proc/stat texts, and on the live machine
// against a child process that keeps this process's core busy.
#include "runners/machine_state.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

namespace bench {
namespace machine_state_test {
namespace {

// user nice system idle iowait irq softirq steal guest guest_nice
constexpr const char* kBefore =
    "cpu  400 0 200 9000 10 0 0 40 0 0\n"
    "cpu0 100 0 50 3000 5 0 0 10 0 0\n"
    "cpu1 100 0 50 3000 5 0 0 20 0 0\n"
    "cpu2 200 0 100 3000 0 0 0 10 0 0\n"
    "intr 12345\n";
constexpr const char* kAfter =
    "cpu  700 0 300 9300 10 0 0 90 0 0\n"
    "cpu0 160 0 60 3020 5 4 2 20 7 0\n"
    "cpu1 110 0 55 3090 5 0 0 20 0 0\n"
    "cpu2 430 0 185 3190 0 0 0 50 0 0\n"
    "intr 22345\n";

TEST(MachineState, SumsTheLinesOfTheAskedCpus) {
  const CpuTimes t = parse_cpu_times(kAfter, {0, 1});
  EXPECT_EQ(t.cpus, 2);
  // guest (7 on cpu0) is already in user: not counted twice.
  EXPECT_EQ(t.total, (160 + 60 + 3020 + 5 + 4 + 2 + 20) + (110 + 55 + 3090 + 5 + 20));
  EXPECT_EQ(t.busy, (160 + 60 + 4 + 2) + (110 + 55));
  EXPECT_EQ(t.steal, 20 + 20);
  EXPECT_EQ(parse_cpu_times(kAfter, {2, 7}).cpus, 1);           // no line for cpu7
  EXPECT_EQ(parse_cpu_times("cpu3 1 2 3 4\n", {3}).total, 10);  // an old kernel's four fields
}

TEST(MachineState, FractionsOfTheCoresTimeWithThisProcessTakenAway) {
  const std::vector<int> cpus = {0, 1};
  const CpuTimes a = parse_cpu_times(kBefore, cpus), b = parse_cpu_times(kAfter, cpus);
  // Over cpus 0 and 1, from the lines by hand:
  const double total = (3271.0 - 3165.0) + (3280.0 - 3175.0);  // 106 + 105 jiffies
  const double busy = (226.0 - 150.0) + (165.0 - 150.0);       // 76 + 15
  const double steal = (20.0 - 10.0) + (20.0 - 20.0);
  ASSERT_EQ(b.total - a.total, static_cast<int64_t>(total));
  // This process ran 0.31 s at 100 jiffies a second: 31 of the busy jiffies are its own.
  const MachineState s = machine_state_between(a, b, 0.31, 100);
  EXPECT_EQ(s.cores, 2);
  EXPECT_DOUBLE_EQ(s.steal, steal / total);
  EXPECT_DOUBLE_EQ(s.other_busy, (busy - 31) / total);
  // More of its own time than the cores were busy (accounting granularity): clamped at 0.
  EXPECT_DOUBLE_EQ(machine_state_between(a, b, 5.0, 100).other_busy, 0.0);
  // No time passed, or a reading failed: not known.
  EXPECT_TRUE(std::isnan(machine_state_between(a, a, 0, 100).other_busy));
  EXPECT_TRUE(std::isnan(machine_state_between(CpuTimes{}, CpuTimes{}, 0, 100).steal));
}

/// The state of core `cpu` over `seconds` of this process sleeping, while `busy_child` spins in a child.
MachineState window(int cpu, double seconds, bool busy_child) {
  pid_t child = -1;
  if (busy_child) {
    child = fork();
    if (child == 0) {
      const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds + 1.0);
      volatile double x = 0;
      while (std::chrono::steady_clock::now() < end) x = x + 1;
      _exit(0);
    }
  }
  const MachineSampler sampler({cpu});
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const MachineState s = sampler.stop();
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  return s;
}

/// This process spinning for `seconds`: the state, and the share of the window it ran.
std::pair<MachineState, double> own_spin_window(int cpu, double seconds) {
  const double cpu0 = own_cpu_seconds();
  const MachineSampler sampler({cpu});
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
  const MachineState s = sampler.stop();
  return {s, (own_cpu_seconds() - cpu0) / seconds};
}

TEST(MachineState, AChildSpinningOnOurCoreIsOtherOurOwnSpinIsNot) {
#ifndef __linux__
  GTEST_SKIP() << "reads /proc";
#endif
  // One core of ours only (the child inherits it), so one spinning process fills it.
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && cpu < 0; ++c)
    if (CPU_ISSET(c, &saved)) cpu = c;
  ASSERT_GE(cpu, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) GTEST_SKIP() << "cannot pin to one core";

  const MachineState busy = window(cpu, 0.6, true);
  const auto [own, own_share] = own_spin_window(cpu, 0.6);
  sched_setaffinity(0, sizeof saved, &saved);

  EXPECT_EQ(busy.cores, 1);
  ASSERT_FALSE(std::isnan(busy.other_busy));
  // The child keeps the core busy the whole window, whatever else runs there (others only take
  // their share from the child, and are "other" too): well above 0.8 unless a hypervisor steals.
  EXPECT_GT(busy.other_busy + busy.steal, 0.8) << "other " << busy.other_busy << ", steal " << busy.steal;
  // Our own spinning is taken away: the core was busy all along, but only 1 - own_share of it
  // was others' (had it counted as other, other_busy would be about 1). Half our share as margin
  // for the accounting's granularity.
  ASSERT_GT(own_share, 0.05) << "this process hardly ran";
  EXPECT_LT(own.other_busy, 1.0 - 0.5 * own_share)
      << "own-spin other " << own.other_busy << ", own share " << own_share;
  EXPECT_GE(busy.steal, 0.0);
  EXPECT_LE(busy.steal, 1.0);
  EXPECT_GE(busy.load_avg, 0.0);
}

}  // namespace
}  // namespace machine_state_test
}  // namespace bench
