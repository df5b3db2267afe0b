#include "parallel.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "threads.h"

namespace bench::tile {

namespace {
void place(int n);
std::atomic<bool> placed{false};  // the team has been placed once (set_num_threads or first use)
thread_local int t_ranges = 0;    // ranges of parallel_for the thread is running (nested: serial)
/// Marks the thread as running a range of parallel_for while it exists.
struct InRange {
  InRange() { ++t_ranges; }
  ~InRange() { --t_ranges; }
  InRange(const InRange&) = delete;
  InRange& operator=(const InRange&) = delete;
};
}  // namespace

void parallel_for(int64_t n, RangeFn fn, void* arg) {
  if (n <= 0) return;
  const int threads = omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n));
  if (threads <= 1) {
    const InRange in;
    fn(arg, 0, n);
    return;
  }
  if (!placed.load(std::memory_order_acquire)) place(omp_get_max_threads());
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) {
      const InRange in;
      fn(arg, begin, end);
    }
  }
}

bool in_parallel_for() { return t_ranges > 0; }

int num_threads() { return omp_get_max_threads(); }

namespace {

// Thread placement (docs/design.md, "Threads"). With several workers, each OpenMP thread of the
// team (the calling thread is thread 0) is pinned to its own CPU of the set the process may run
// on, one per physical core first: a thread that stays on its core keeps its cache, and when
// another process takes one core, only the thread pinned there shares it, instead of the team
// migrating and spinning at every barrier for a thread that is not running (measured on two cores
// with one core busy: 3.3-3.5x slower unpinned, about 1.8x pinned; docs/design.md). One thread is
// left unpinned, free to move to an idle core. The user's own placement (OMP_PROC_BIND,
// OMP_PLACES, GOMP_CPU_AFFINITY, or BENCH_PIN_THREADS=0) is left alone.

struct Placement {
  std::mutex mu;
  bool decided = false;
  bool user_placed = false;  ///< the environment places the threads; we do not
  cpu_set_t base{};          ///< the CPUs the calling thread could use before we pinned it
  bool pinned = false;       ///< the team is pinned now
  int pinned_threads = 0;
  std::string policy = "not pinned";
};

Placement& placement() {
  static Placement p;
  return p;
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

int read_first_int(const std::string& path) {
  std::ifstream in(path);
  int v = -1;
  in >> v;
  return v;
}

/// The CPUs of `set` ordered one per physical core first (the first CPU of each core's sibling
/// list), then the other hyper-threads.
std::vector<int> ordered_cpus(const cpu_set_t& set) {
  std::vector<int> first, rest;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    const int lead =
        read_first_int("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list");
    (lead < 0 || lead == c ? first : rest).push_back(c);
  }
  first.insert(first.end(), rest.begin(), rest.end());
  return first;
}

std::string cpu_text(const std::vector<int>& cpus, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && i < cpus.size(); ++i) s += (i ? "," : "") + std::to_string(cpus[i]);
  return s;
}

void place(int n) {
  Placement& p = placement();
  const std::lock_guard lock(p.mu);
  placed.store(true, std::memory_order_release);
  if (!p.decided) {
    p.decided = true;
    p.user_placed = env_set("OMP_PROC_BIND") || env_set("OMP_PLACES") || env_set("GOMP_CPU_AFFINITY") ||
                    (env_set("BENCH_PIN_THREADS") && std::string(std::getenv("BENCH_PIN_THREADS")) == "0");
  }
  if (p.user_placed) {
    p.policy = "placed by the environment (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY or BENCH_PIN_THREADS=0)";
    return;
  }
  // The set to place on: the calling thread's own, unless we pinned it (then the one before).
  if (!p.pinned && sched_getaffinity(0, sizeof p.base, &p.base) != 0) return;
  const std::vector<int> cpus = ordered_cpus(p.base);
  if (n <= 1 || cpus.size() < 2) {
    if (p.pinned) {
      // Every pool thread gets the whole set back, the calling one included.
#pragma omp parallel num_threads(std::max(p.pinned_threads, 1))
      pthread_setaffinity_np(pthread_self(), sizeof p.base, &p.base);
      sched_setaffinity(0, sizeof p.base, &p.base);
      p.pinned = false;
    }
    p.policy = "not pinned (one thread)";
    return;
  }
  const int team = n;
#pragma omp parallel num_threads(team)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[static_cast<size_t>(omp_get_thread_num()) % cpus.size()], &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  }
  p.pinned = true;
  p.pinned_threads = team;
  p.policy = "pinned: thread i on CPU " + cpu_text(cpus, static_cast<size_t>(team)) + " (i = 0, 1, ...)";
}

}  // namespace

void set_num_threads(int n) {
  const int threads = n > 0 ? n : omp_get_num_procs();
  omp_set_num_threads(threads);
  place(threads);
}

std::vector<int> available_cpus() {
  Placement& p = placement();
  const std::lock_guard lock(p.mu);
  cpu_set_t set;
  if (p.pinned) {
    set = p.base;
  } else if (sched_getaffinity(0, sizeof set, &set) != 0) {
    return {};
  }
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

void place_threads() { place(omp_get_max_threads()); }

std::string thread_policy() {
  Placement& p = placement();
  const std::lock_guard lock(p.mu);
  return p.policy;
}

}  // namespace bench::tile
