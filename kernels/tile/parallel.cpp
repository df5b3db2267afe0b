#include "parallel.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "threads.h"
#include "topology.h"

namespace bench::tile {

namespace {

// The team (docs/design.md, "Threads"). tile::plan_team decides its size and placement from the
// CPUs the process may use; this file makes it so. With several threads, each OpenMP thread of
// the team (the calling thread is thread 0) is pinned to its own CPU, one per physical core
// first: a thread that stays on its core keeps its cache, and when another process takes one
// core, only the thread pinned there shares it, instead of the team migrating and spinning at
// every barrier for a thread that is not running (measured on two cores with one core busy:
// 3.3-3.5x slower unpinned, about 1.8x pinned). A team asked to be larger than the usable CPUs
// splits each loop into as many parts as it has threads (its results are those of that many
// threads) but runs them on one OpenMP thread per usable CPU: libgomp's wait policy is read when
// it loads, before any of our code runs, so the one way to make an oversubscribed team stop
// waiting actively on threads that have no CPU is to not start those threads. The user's own
// placement (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY, or BENCH_PIN_THREADS=0) is left alone.

struct Team {
  std::mutex mu;
  bool decided = false;
  bool user_placed = false;  ///< the environment places the threads; we do not
  TeamRequest request;
  TeamPlan plan;
  cpu_set_t base{};  ///< the calling thread's CPUs before we pinned it
  std::vector<int> base_cpus;
  Topology topo;         ///< of base_cpus
  bool pinned = false;   ///< the pool's threads are pinned now
  int pool_threads = 0;  ///< the largest team placed so far (every thread of it is reset on unpinning)
  std::string policy = "not pinned";
};

Team& state() {
  static Team t;
  return t;
}

std::atomic<bool> g_decided{false};  // the team has been decided (set_team or first use)
std::atomic<int> g_parts{1};         // parallel_for splits a range into this many parts (the team's size)
std::atomic<int> g_workers{1};       // ... run by this many OpenMP threads
thread_local int t_ranges = 0;       // ranges of parallel_for the thread is running (nested: serial)

/// Marks the thread as running a range of parallel_for while it exists.
struct InRange {
  InRange() { ++t_ranges; }
  ~InRange() { --t_ranges; }
  InRange(const InRange&) = delete;
  InRange& operator=(const InRange&) = delete;
};

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

std::string cpu_text(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size(); ++i) s += (i ? "," : "") + std::to_string(cpus[i]);
  return s;
}

cpu_set_t set_of(const std::vector<int>& cpus) {
  cpu_set_t s;
  CPU_ZERO(&s);
  for (const int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &s);
  return s;
}

/// Every thread of the pool, the calling one included, gets `set`.
void reset_pool(Team& t, const cpu_set_t& set) {
#pragma omp parallel num_threads(std::max(t.pool_threads, 1))
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  sched_setaffinity(0, sizeof set, &set);
}

/// The default request: OMP_NUM_THREADS when the user set it, else one thread per usable CPU.
TeamRequest default_request() {
  TeamRequest r;
  if (const char* v = std::getenv("OMP_NUM_THREADS"); v != nullptr && *v != '\0') {
    r.threads = std::atoi(v);
    if (r.threads > 0) r.by = "OMP_NUM_THREADS=" + std::string(v);
  }
  return r;
}

TeamPlan apply(Team& t, const TeamRequest& r) {
  if (!t.decided) {
    t.decided = true;
    t.user_placed = env_set("OMP_PROC_BIND") || env_set("OMP_PLACES") || env_set("GOMP_CPU_AFFINITY") ||
                    (env_set("BENCH_PIN_THREADS") && std::string(std::getenv("BENCH_PIN_THREADS")) == "0");
  }
  // The CPUs to place on: the calling thread's own, unless we pinned it (then the ones before).
  if (!t.pinned) {
    CPU_ZERO(&t.base);
    if (sched_getaffinity(0, sizeof t.base, &t.base) != 0) CPU_SET(0, &t.base);
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &t.base) && (r.within.empty() || std::find(r.within.begin(), r.within.end(), c) != r.within.end()))
      cpus.push_back(c);
  if (cpus.empty()) cpus = r.within;
  if (cpus != t.base_cpus || t.topo.cpus.empty()) {
    t.base_cpus = cpus;
    t.topo = read_topology("/", cpus);
  }
  t.request = r;
  t.plan = plan_team(t.topo, r.threads, r.by);
  omp_set_num_threads(t.plan.workers);
  g_parts.store(t.plan.threads, std::memory_order_relaxed);
  g_workers.store(t.plan.workers, std::memory_order_relaxed);
  g_decided.store(true, std::memory_order_release);
  if (t.user_placed) {
    t.plan.cpu_of.clear();
    t.policy = "placed by the environment (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY or BENCH_PIN_THREADS=0)";
    t.pool_threads = std::max(t.pool_threads, t.plan.workers);
    return t.plan;
  }
  if (t.pinned) {
    reset_pool(t, t.base);
    t.pinned = false;
  }
  const std::vector<int>& on = t.plan.cpu_of;
  if (!on.empty()) {
#pragma omp parallel num_threads(static_cast <int>(on.size()))
    {
      const cpu_set_t one = set_of({on[static_cast<size_t>(omp_get_thread_num())]});
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    t.pinned = true;
    t.policy = "pinned: thread i on CPU " + cpu_text(on) + " (i = 0, 1, ...)";
  } else {
    t.policy = "not pinned (one thread)";
  }
  if (t.plan.oversubscribed)
    t.policy += "; each loop split in " + std::to_string(t.plan.threads) + " parts run by " +
                std::to_string(t.plan.workers) + (t.plan.workers == 1 ? " thread" : " threads") + " (oversubscribed)";
  t.pool_threads = std::max(t.pool_threads, t.plan.workers);
  return t.plan;
}

void ensure_decided() {
  if (g_decided.load(std::memory_order_acquire)) return;
  Team& t = state();
  const std::lock_guard lock(t.mu);
  if (!t.decided || !g_decided.load(std::memory_order_relaxed)) apply(t, default_request());
}

}  // namespace

void parallel_for(int64_t n, RangeFn fn, void* arg) {
  if (n <= 0) return;
  const bool nested = omp_in_parallel() != 0;
  if (!nested) ensure_decided();
  const int parts = nested ? 1 : static_cast<int>(std::min<int64_t>(g_parts.load(std::memory_order_relaxed), n));
  if (parts <= 1) {
    const InRange in;
    fn(arg, 0, n);
    return;
  }
  const int workers = std::min(parts, g_workers.load(std::memory_order_relaxed));
#pragma omp parallel num_threads(workers)
  {
    const int nt = omp_get_num_threads();
    for (int64_t p = omp_get_thread_num(); p < parts; p += nt) {
      const int64_t begin = n * p / parts;
      const int64_t end = n * (p + 1) / parts;
      if (begin < end) {
        const InRange in;
        fn(arg, begin, end);
      }
    }
  }
}

bool in_parallel_for() { return t_ranges > 0; }

int num_threads() {
  ensure_decided();
  return g_parts.load(std::memory_order_relaxed);
}

void set_num_threads(int n) {
  TeamRequest r;
  if (n > 0) {
    r.threads = n;
    r.by = std::to_string(n) + " asked for";
  } else {
    r = default_request();
  }
  set_team(r);
}

TeamPlan set_team(const TeamRequest& r) {
  Team& t = state();
  const std::lock_guard lock(t.mu);
  return apply(
      t, r.threads > 0 ? r : [&] {
        TeamRequest d = default_request();
        d.within = r.within;
        return d;
      }());
}

TeamRequest team_request() {
  ensure_decided();
  Team& t = state();
  const std::lock_guard lock(t.mu);
  return t.request;
}

TeamPlan team() {
  ensure_decided();
  Team& t = state();
  const std::lock_guard lock(t.mu);
  return t.plan;
}

std::vector<int> available_cpus() {
  Team& t = state();
  const std::lock_guard lock(t.mu);
  cpu_set_t set;
  if (t.pinned) {
    set = t.base;
  } else if (sched_getaffinity(0, sizeof set, &set) != 0) {
    return {};
  }
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

void place_threads() { ensure_decided(); }

std::string thread_policy() {
  ensure_decided();
  Team& t = state();
  const std::lock_guard lock(t.mu);
  return t.policy;
}

}  // namespace bench::tile
