// Thread placement (kernels/tile/threads.h): a team of two or more is pinned one thread per CPU,
// the process's CPU set stays visible, and one thread gets the whole set back.
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

}  // namespace
}  // namespace bench::tile
