// The team's size and placement decided from a topology (kernels/tile/topology.h), on synthetic
// machines, and the reader run on fake sysfs / procfs / cgroup trees.
#include "kernels/tile/topology.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace bench::tile {
namespace topology_test {
namespace {

namespace fs = std::filesystem;

/// `packages` x `cores` x `smt` CPUs numbered as Linux numbers them on such a machine: all first
/// hyper-threads (package by package), then all second ones.
Topology machine(int packages, int cores, int smt) {
  Topology t;
  const int per_round = packages * cores;
  for (int s = 0; s < smt; ++s)
    for (int p = 0; p < packages; ++p)
      for (int c = 0; c < cores; ++c) {
        CpuInfo cpu;
        cpu.id = s * per_round + p * cores + c;
        cpu.core = c;
        cpu.package = p;
        for (int k = 0; k < smt; ++k) cpu.siblings.push_back(k * per_round + p * cores + c);
        t.cpus.push_back(cpu);
      }
  std::sort(t.cpus.begin(), t.cpus.end(), [](const CpuInfo& a, const CpuInfo& b) { return a.id < b.id; });
  t.online = static_cast<int>(t.cpus.size());
  return t;
}

const CpuInfo& cpu(const Topology& t, int id) {
  for (const CpuInfo& c : t.cpus)
    if (c.id == id) return c;
  throw std::runtime_error("no cpu " + std::to_string(id));
}

/// Each worker thread on its own CPU of the mask.
void expect_distinct_in_mask(const Topology& t, const TeamPlan& p) {
  ASSERT_EQ(p.cpu_of.size(), static_cast<size_t>(p.workers));
  const std::set<int> distinct(p.cpu_of.begin(), p.cpu_of.end());
  EXPECT_EQ(distinct.size(), p.cpu_of.size()) << "two threads pinned to one CPU";
  for (const int c : p.cpu_of) EXPECT_NO_THROW(cpu(t, c)) << "CPU " << c << " is not in the mask";
}

TEST(Topology, VmWhoseVcpusAllReportOneCoreId) {
  // 16 vCPUs, all core 0 of package 0, and each (as such VMs report) the sibling of all others.
  Topology t;
  for (int i = 0; i < 16; ++i) {
    CpuInfo c;
    c.id = i;
    c.core = 0;
    c.package = 0;
    for (int k = 0; k < 16; ++k) c.siblings.push_back(k);
    t.cpus.push_back(c);
  }
  t.online = 16;
  const TeamPlan p = plan_team(t, 0, "");
  EXPECT_EQ(p.threads, 16) << "one core id must not shrink the team to one thread";
  EXPECT_FALSE(p.oversubscribed);
  EXPECT_EQ(p.why, "16 threads: 16 CPUs in the affinity mask");
  expect_distinct_in_mask(t, p);
  // The same with no siblings lists at all: grouped by core id, still one CPU each.
  for (CpuInfo& c : t.cpus) c.siblings.clear();
  const TeamPlan q = plan_team(t, 4, "--threads 4");
  EXPECT_EQ(q.threads, 4);
  expect_distinct_in_mask(t, q);
}

TEST(Topology, TwoSocketsOfEightCoresWithSmt) {
  const Topology t = machine(2, 8, 2);
  ASSERT_EQ(t.cpus.size(), 32u);
  EXPECT_EQ(cpu(t, 17).siblings, (std::vector<int>{1, 17}));
  const TeamPlan all = plan_team(t, 0, "");
  EXPECT_EQ(all.threads, 32);
  expect_distinct_in_mask(t, all);
  // The first 16 threads take one hyper-thread of every physical core, alternating sockets.
  std::set<std::pair<int, int>> cores;
  for (int i = 0; i < 16; ++i) {
    const CpuInfo& c = cpu(t, all.cpu_of[static_cast<size_t>(i)]);
    cores.insert({c.package, c.core});
    EXPECT_EQ(c.package, i % 2) << "thread " << i;
  }
  EXPECT_EQ(cores.size(), 16u) << "two of the first 16 threads share a physical core";
  // A team of 8: 8 physical cores, 4 on each socket.
  const TeamPlan eight = plan_team(t, 8, "--threads 8");
  expect_distinct_in_mask(t, eight);
  int on0 = 0;
  std::set<std::pair<int, int>> cores8;
  for (const int id : eight.cpu_of) {
    on0 += cpu(t, id).package == 0;
    cores8.insert({cpu(t, id).package, cpu(t, id).core});
  }
  EXPECT_EQ(on0, 4);
  EXPECT_EQ(cores8.size(), 8u);
  EXPECT_EQ(eight.why, "8 threads: --threads 8");
}

TEST(Topology, AffinityMaskOfThreeCpusOutOf64) {
  const Topology all = machine(1, 64, 1);
  Topology t;
  for (const int id : {5, 40, 63}) t.cpus.push_back(cpu(all, id));
  t.online = 64;
  const TeamPlan p = plan_team(t, 0, "");
  EXPECT_EQ(p.threads, 3);
  EXPECT_EQ(p.why, "3 threads: 3 CPUs in the affinity mask (of 64 online)");
  expect_distinct_in_mask(t, p);
  EXPECT_EQ(std::set<int>(p.cpu_of.begin(), p.cpu_of.end()), (std::set<int>{5, 40, 63}));
}

TEST(Topology, QuotaOfTwoCpusOnSixteen) {
  Topology t = machine(1, 16, 1);
  t.quota = 2.0;
  EXPECT_EQ(usable_cpus(t), 2);
  const TeamPlan p = plan_team(t, 0, "");
  EXPECT_EQ(p.threads, 2);
  EXPECT_FALSE(p.oversubscribed);
  EXPECT_EQ(p.why, "2 threads: cgroup quota 2.0 CPUs of 16 CPUs in the affinity mask");
  expect_distinct_in_mask(t, p);
  // A quota of 1.5 CPUs runs two threads part of the time; 0.5 runs one.
  t.quota = 1.5;
  EXPECT_EQ(usable_cpus(t), 2);
  t.quota = 0.5;
  EXPECT_EQ(usable_cpus(t), 1);
  EXPECT_EQ(plan_team(t, 0, "").why, "1 thread: cgroup quota 0.5 CPUs of 16 CPUs in the affinity mask");
  // A quota above the mask changes nothing.
  t.quota = 32;
  EXPECT_EQ(plan_team(t, 0, "").why, "16 threads: 16 CPUs in the affinity mask");
}

TEST(Topology, MoreThreadsThanCpusRunOnOneThreadPerCpu) {
  const Topology two = machine(1, 2, 1);
  const TeamPlan p = plan_team(two, 16, "--threads 16");
  EXPECT_EQ(p.threads, 16);
  EXPECT_EQ(p.workers, 2);
  EXPECT_TRUE(p.oversubscribed);
  expect_distinct_in_mask(two, p);
  EXPECT_EQ(p.why, "16 threads: --threads 16 (oversubscribed: 2 CPUs in the affinity mask)");
  // Within the mask but over the quota: oversubscribed as well, two workers on two cores.
  Topology q = machine(1, 16, 1);
  q.quota = 2;
  const TeamPlan over = plan_team(q, 4, "threads = 4 in x.toml");
  EXPECT_TRUE(over.oversubscribed);
  EXPECT_EQ(over.workers, 2);
  expect_distinct_in_mask(q, over);
  EXPECT_EQ(over.why,
            "4 threads: threads = 4 in x.toml (oversubscribed: cgroup quota 2.0 CPUs of 16 CPUs in the affinity mask)");
  // One thread is never pinned (it stays free to move to an idle core), nor is one worker.
  EXPECT_TRUE(plan_team(two, 1, "--threads 1").cpu_of.empty());
  EXPECT_EQ(plan_team(two, 1, "--threads 1").why, "1 thread: --threads 1");
  Topology one = machine(1, 1, 1);
  const TeamPlan solo = plan_team(one, 8, "--threads 8");
  EXPECT_EQ(solo.workers, 1);
  EXPECT_TRUE(solo.cpu_of.empty());
  EXPECT_EQ(solo.why, "8 threads: --threads 8 (oversubscribed: 1 CPU in the affinity mask)");
}

/// A fake root: sysfs topology of `cpus`, /proc/self/cgroup and mountinfo, and cgroup files.
class FakeRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("bench-topology-" + std::to_string(getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  /// CPU `id` as core `core` of `package` with thread siblings `siblings`.
  void cpu(int id, int core, int package, const std::string& siblings) {
    const std::string d = "sys/devices/system/cpu/cpu" + std::to_string(id) + "/topology/";
    write(d + "core_id", std::to_string(core));
    write(d + "physical_package_id", std::to_string(package));
    write(d + "thread_siblings_list", siblings);
  }
  fs::path root_;
};

TEST_F(FakeRoot, ReadsTopologyAndCgroupV2Quota) {
  for (int i = 0; i < 4; ++i) cpu(i, i % 2, 0, i % 2 == 0 ? "0,2" : "1,3");
  write("sys/devices/system/cpu/online", "0-3");
  write("proc/self/cgroup", "0::/user.slice/job.scope");
  write("proc/self/mountinfo",
        "25 30 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
        "26 30 0:23 / /proc rw - proc proc rw");
  // The job's own limit is 3 CPUs, its parent's 1.5: the smaller counts.
  write("sys/fs/cgroup/user.slice/job.scope/cpu.max", "300000 100000");
  write("sys/fs/cgroup/user.slice/cpu.max", "150000 100000");
  write("sys/fs/cgroup/cpu.max", "max 100000");
  const Topology t = read_topology(root_.string(), {0, 1, 2, 3});
  ASSERT_EQ(t.cpus.size(), 4u);
  EXPECT_EQ(t.online, 4);
  EXPECT_EQ(t.cpus[2].core, 0);
  EXPECT_EQ(t.cpus[3].siblings, (std::vector<int>{1, 3}));
  EXPECT_DOUBLE_EQ(t.quota, 1.5);
  EXPECT_EQ(t.quota_file, (root_ / "sys/fs/cgroup/user.slice/cpu.max").string());
  EXPECT_EQ(usable_cpus(t), 2);
  // One per physical core first: 0 and 1 (cores 0 and 1), then their siblings 2 and 3.
  EXPECT_EQ(placement_order(t), (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(FakeRoot, ReadsCgroupV1QuotaInsideANamespace) {
  for (int i = 0; i < 8; ++i) cpu(i, i, 0, std::to_string(i));
  write("sys/devices/system/cpu/online", "0-7");
  // In a container: the cpu hierarchy's mount root is the container's cgroup.
  write("proc/self/cgroup", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/");
  write("proc/self/mountinfo",
        "40 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
        "41 31 0:30 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory");
  write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000");
  write("sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000");
  const Topology t = read_topology(root_.string(), {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_DOUBLE_EQ(t.quota, 2.5);
  EXPECT_EQ(usable_cpus(t), 3);
  EXPECT_EQ(plan_team(t, 0, "").why, "3 threads: cgroup quota 2.5 CPUs of 8 CPUs in the affinity mask");
}

TEST_F(FakeRoot, NoQuotaAndMissingFilesLeaveFieldsUnknown) {
  cpu(0, 0, 0, "0");
  write("proc/self/cgroup", "1:cpu:/\n0::/");
  write("proc/self/mountinfo", "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu");
  write("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1");
  write("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000");
  const Topology t = read_topology(root_.string(), {0, 1});
  EXPECT_EQ(t.quota, 0);
  EXPECT_EQ(t.online, 0);
  ASSERT_EQ(t.cpus.size(), 2u);
  EXPECT_EQ(t.cpus[1].core, -1);
  EXPECT_TRUE(t.cpus[1].siblings.empty());
  EXPECT_EQ(plan_team(t, 0, "").threads, 2);
  EXPECT_EQ(placement_order(t), (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace topology_test
}  // namespace bench::tile
