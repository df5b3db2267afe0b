// Thread placement (kernels/tile/threads.h): a team of two or more is pinned one thread per CPU,
// the process's CPU set stays visible, one thread gets the whole set back, and a team larger
// than the CPUs is not pinned.
#include "kernels/tile/threads.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

#include "kernels/tile/parallel.h"

namespace bench::tile {
namespace threads_test {
namespace {

/// The CPUs in the calling thread's affinity mask.
std::vector<int> my_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  pthread_getaffinity_np(pthread_self(), sizeof set, &set);
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

TEST(Threads, TeamIsPinnedOnePerCpuAndOneThreadIsFree) {
  for (const char* v : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "BENCH_PIN_THREADS"})
    if (std::getenv(v) != nullptr) GTEST_SKIP() << v << " is set: the environment places the threads";
  const std::vector<int> all = available_cpus();
  if (all.size() < 2) GTEST_SKIP() << "one CPU: nothing to pin";
  const int before = num_threads();

  set_num_threads(2);
  EXPECT_EQ(thread_policy().rfind("pinned: thread i on CPU ", 0), 0u) << thread_policy();
  std::mutex mu;
  std::vector<std::vector<int>> masks;
  parallel_for(2, [&](int64_t, int64_t) {
    const std::vector<int> m = my_cpus();
    const std::lock_guard lock(mu);
    masks.push_back(m);
  });
  ASSERT_EQ(masks.size(), 2u);
  std::set<int> distinct;
  for (const auto& m : masks) {
    ASSERT_EQ(m.size(), 1u) << "a pinned thread may run on one CPU";
    distinct.insert(m[0]);
    EXPECT_NE(std::find(all.begin(), all.end(), m[0]), all.end());
  }
  EXPECT_EQ(distinct.size(), 2u) << "two threads on one CPU";
  EXPECT_EQ(available_cpus(), all) << "pinning must not shrink what the process may use";

  set_num_threads(1);
  EXPECT_EQ(thread_policy(), "not pinned (one thread)");
  EXPECT_EQ(my_cpus(), all);

  set_num_threads(before);
}

TEST(Threads, MoreThreadsThanCpusRunEveryPartOnOneThreadPerCpu) {
  for (const char* v : {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "BENCH_PIN_THREADS"})
    if (std::getenv(v) != nullptr) GTEST_SKIP() << v << " is set: the environment places the threads";
  const std::vector<int> all = available_cpus();
  const int before = num_threads();
  const int many = 4 * static_cast<int>(all.size());
  set_num_threads(many);
  EXPECT_EQ(num_threads(), many);
  EXPECT_TRUE(team().oversubscribed);
  EXPECT_LE(team().workers, static_cast<int>(all.size()));
  const std::string asked = std::to_string(many) + " threads: " + std::to_string(many) + " asked for (oversubscribed: ";
  EXPECT_EQ(team().why.rfind(asked, 0), 0u) << team().why;
  EXPECT_NE(thread_policy().find("each loop split in " + std::to_string(many) + " parts"), std::string::npos)
      << thread_policy();
  // The range is split as `many` threads would split it, each part run once, by threads that
  // each hold a CPU of their own (or one unpinned thread).
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> parts;
  std::set<pthread_t> threads;
  std::vector<std::vector<int>> masks;
  parallel_for(1000, [&](int64_t b, int64_t e) {
    const std::vector<int> m = my_cpus();
    const std::lock_guard lock(mu);
    parts.emplace_back(b, e);
    threads.insert(pthread_self());
    masks.push_back(m);
  });
  std::sort(parts.begin(), parts.end());
  ASSERT_EQ(parts.size(), static_cast<size_t>(many));
  for (int p = 0; p < many; ++p) {
    EXPECT_EQ(parts[static_cast<size_t>(p)].first, 1000 * p / many);
    EXPECT_EQ(parts[static_cast<size_t>(p)].second, 1000 * (p + 1) / many);
  }
  EXPECT_LE(threads.size(), all.size()) << "more threads than CPUs ran";
  if (all.size() >= 2) {
    for (const auto& m : masks) EXPECT_EQ(m.size(), 1u) << "a worker of two or more is pinned to its CPU";
  }
  set_num_threads(before);
}

}  // namespace
}  // namespace threads_test
}  // namespace bench::tile
