// defines: bench::test::FiberTeam — n cooperative fibers on the calling thread, with barriers
// between them (the warp emulator of tests/kernels/flash_emulation_test.cpp runs a block's CUDA
// threads so: a barrier is a switch of stacks, not an OS thread's sleep and wake-up).
//
// A team's stacks outlive it: a fiber that ends its body parks at the top of its entry loop, and the
// thread keeps the stacks with their parked fibers for the next team of the same size (one a kernel
// launch in the emulator). A launch so maps, guards and faults in no fresh stacks, and under ASan
// each fiber keeps its fake stack (detect_stack_use_after_return): a fiber that died took its fake
// stack with it, and every launch mapped and faulted in a new one a thread. ASan sizes a fake stack
// by the stack (11 size classes of the stack's size each, walked round-robin, so a long-running
// fiber touches all of it): a stack is 64 KB, ASan's smallest, not 256 (the emulation tests' deepest
// fiber used 4.7 KB in the default build and 14 KB under ASan; the guard page faults past 64).
//
// The switch is Boost.Context's fcontext (make_fcontext / jump_fcontext: registers and stack
// pointer, in user space). ucontext's swapcontext also saved and restored the signal mask, a
// system call on every switch: 40 % of a flash emulation case's time (perf), and under ASan its
// interceptor cleared the shadow of the whole 256 KB stack on every resume. Boost.Context's public
// `fiber` wraps the same two calls, but unwinds an abandoned fiber (one left waiting when another
// threw) with an exception that the fibers' catch-all would have to let through, and annotates for
// ASan only under a macro of its own; this team abandons such fibers, and annotates itself.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <boost/context/detail/fcontext.hpp>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define BENCH_FIBERS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BENCH_FIBERS_ASAN 1
#endif
#endif
#if defined(BENCH_FIBERS_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace bench::test {

/// Runs body(0) .. body(n - 1) as fibers of the calling thread, each on a stack of its own, until
/// all have returned. A fiber runs until it waits at a Barrier (or defers itself, yield_last, until
/// no other fiber can go on); a barrier that fills lets its fibers go on. The fibers come in gangs
/// of `gang` consecutive ones (a warp's lanes), and between two releases of a phase barrier (the
/// block's __syncthreads) one gang at a time runs as far as it can, the gangs and the fibers within
/// each in a fresh pseudo-random order (fixed seed: every run the same). So one warp does all of
/// its work of a phase before the next starts: a read of shared memory that lacks its barrier sees
/// another warp's write too early or too late, and a write another warp still needs overwrites it,
/// whichever warp goes first, and the test fails. Waits that can never be met (a barrier some fiber
/// skips) are an exception, not a hang.
class FiberTeam {
 public:
  /// A barrier of `count` fibers of the team (CUDA's __syncthreads for a block, a warp's
  /// rendezvous for its lanes). A phase barrier's release starts a new order of the fibers.
  class Barrier {
   public:
    /// `eager`: at a release, the fibers that waited on it run before the releasing one goes on
    /// (a named barrier or an mbarrier of the warp emulator: a consumer that lets a producer go
    /// too early sees the producer's writes before its own next step).
    Barrier(FiberTeam& team, int count, bool phase = false, bool eager = false)
        : team_(&team), count_(count), phase_(phase), eager_(eager) {}
    /// Suspends the calling fiber until `count` fibers have arrived since the last release.
    void arrive_and_wait() {
      if (++arrived_ < count_) {
        team_->wait(this, generation_);
        return;
      }
      release();
    }
    /// Counts the calling fiber's arrival without waiting for the others (PTX's bar.arrive).
    void arrive() {
      if (++arrived_ == count_) release();
    }
    /// Suspends the calling fiber until the next release, without arriving (an mbarrier's waiter).
    void wait_release() { team_->wait(this, generation_); }
    /// Ends the current generation: every waiter goes on, and the arrivals start again from 0.
    void release() {
      arrived_ = 0;
      ++generation_;
      if (phase_)
        team_->new_phase();
      else if (eager_)
        team_->run_waiters_first(this, generation_ - 1);
    }
    int count() const { return count_; }
    int arrived() const { return arrived_; }

   private:
    friend class FiberTeam;
    FiberTeam* team_;
    int count_;
    bool phase_;
    bool eager_;
    int arrived_ = 0;
    uint64_t generation_ = 0;
  };

  /// A team of n fibers in gangs of `gang` (n a multiple of it), with `stack_bytes` of stack each
  /// (a guard page below each: an overflow faults instead of writing over another stack).
  /// The stacks are the thread's last team's of this n and stack_bytes where it has one (their
  /// fibers parked), new ones otherwise.
  explicit FiberTeam(int n, int gang = 1, size_t stack_bytes = size_t{64} << 10)
      : n_(n),
        gang_(gang),
        stack_bytes_(stack_bytes),
        fibers_(static_cast<size_t>(n)),
        order_(static_cast<size_t>(n)),
        gangs_(static_cast<size_t>(n / gang)) {
    if (gang < 1 || n % gang != 0)
      throw std::invalid_argument("FiberTeam: " + std::to_string(n) + " fibers in gangs of " + std::to_string(gang));
    stacks_ = Stacks::take(n, stack_bytes);
    std::iota(order_.begin(), order_.end(), 0);
    std::iota(gangs_.begin(), gangs_.end(), 0);
  }
  ~FiberTeam() { Stacks::give_back(std::move(stacks_)); }
  /// How many sets of stacks this thread has mapped (for tests: a team of a size seen before maps none).
  static int stacks_mapped() { return Stacks::mapped_; }
  FiberTeam(const FiberTeam&) = delete;
  FiberTeam& operator=(const FiberTeam&) = delete;

  /// Runs body(i) for every fiber i, to the end of all of them; rethrows what a body threw, and
  /// throws where the fibers left wait on barriers that can never fill.
  void run(const std::function<void(int)>& body) {
    body_ = &body;
    deferred_ = 0;  // a run that threw may have left fibers deferred
    for (int i = 0; i < n_; ++i) {
      fibers_[static_cast<size_t>(i)] = Fiber{};
      Slot& s = stacks_->slots[static_cast<size_t>(i)];
      if (s.parked) continue;  // it takes this run's body where it waits, in entry's loop
      // Never started, or left waiting by a run that threw: a fresh start on the stack.
      s.context = boost::context::detail::make_fcontext(stack(i) + stack_bytes_, stack_bytes_, &FiberTeam::entry);
      s.fake_stack = nullptr;  // an abandoned fiber's (ASan): left as it is, as the fiber is
#if defined(BENCH_FIBERS_ASAN)
      // An abandoned fiber's frames' redzones are still poisoned.
      ASAN_UNPOISON_MEMORY_REGION(stack(i), stack_bytes_);
#endif
    }
    int live = n_;
    while (live > 0) {
      restart_ = false;
      bool ran = false;
      // order_ holds the gangs one after the other: each runs until none of its fibers can go on.
      for (int g = 0; g < n_ && !restart_; g += gang_) {
        for (bool gang_ran = true; gang_ran && !restart_;) {
          gang_ran = false;
          for (int k = g; k < g + gang_ && !restart_; ++k) {
            const int i = order_[static_cast<size_t>(k)];
            Fiber& f = fibers_[static_cast<size_t>(i)];
            if (f.done || f.deferred || (f.waiting != nullptr && f.waiting->generation_ == f.generation)) continue;
            f.waiting = nullptr;
            resume(i);
            gang_ran = ran = true;
            if (f.done) --live;
          }
        }
      }
      if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
      if (!ran && deferred_ > 0) {  // no other fiber can go on: the deferred ones do
        for (Fiber& f : fibers_) f.deferred = false;
        deferred_ = 0;
        continue;
      }
      if (!ran && live > 0)
        throw std::logic_error("FiberTeam: " + std::to_string(live) +
                               " fibers wait on barriers that can never fill (one skipped by some fiber?)");
    }
    body_ = nullptr;
  }

  /// Called by a fiber: it goes on only once no other fiber can (every other one ended, waiting on
  /// a barrier, or deferred too): an asynchronous operation's completion that the other threads
  /// may overtake (the warp emulator's bulk waits).
  void yield_last() {
    fibers_[static_cast<size_t>(index_)].deferred = true;
    ++deferred_;
    restart_ = true;
    suspend(false);
  }

 private:
  static constexpr size_t kGuard = 4096;

  // A fiber in this team's run.
  struct Fiber {
    const Barrier* waiting = nullptr;  // the barrier it waits on, at `generation`
    uint64_t generation = 0;
    bool done = false;
    bool deferred = false;  // yield_last: runs once no other fiber can
  };

  // A fiber on its stack, from one team to the next.
  struct Slot {
    boost::context::detail::fcontext_t context = nullptr;  // where it resumes
    bool parked = false;                                   // its body ended: it waits for the next
    void* fake_stack = nullptr;                            // ASan's fake stack while it is suspended
  };

  // n stacks of `bytes` (a guard page below each) and their fibers; the thread keeps one set for
  // each (n, bytes) between teams.
  struct Stacks {
    Stacks(int fibers, size_t stack_bytes) : n(fibers), bytes(stack_bytes), slots(static_cast<size_t>(fibers)) {
      const size_t total = size();
      void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED)
        throw std::runtime_error("FiberTeam: cannot map " + std::to_string(total) + " bytes of stacks");
      base = static_cast<uint8_t*>(p);
      for (int i = 0; i < n; ++i) mprotect(base + static_cast<size_t>(i) * (bytes + kGuard), kGuard, PROT_NONE);
      ++mapped_;
    }
    ~Stacks() { munmap(base, size()); }  // a parked fiber is never resumed again
    Stacks(const Stacks&) = delete;
    Stacks& operator=(const Stacks&) = delete;
    size_t size() const { return static_cast<size_t>(n) * (bytes + kGuard); }

    static std::unique_ptr<Stacks> take(int fibers, size_t stack_bytes) {
      for (auto& s : pool_)
        if (s != nullptr && s->n == fibers && s->bytes == stack_bytes) return std::move(s);
      return std::make_unique<Stacks>(fibers, stack_bytes);
    }
    static void give_back(std::unique_ptr<Stacks> stacks) {
      for (auto& s : pool_)
        if (s == nullptr || (s->n == stacks->n && s->bytes == stacks->bytes)) {
          s = std::move(stacks);  // (a second team of one size alive at once: the later one's kept)
          return;
        }
      pool_.push_back(std::move(stacks));
    }

    int n;
    size_t bytes;
    std::vector<Slot> slots;
    uint8_t* base = nullptr;
    static inline thread_local std::vector<std::unique_ptr<Stacks>> pool_;
    static inline thread_local int mapped_ = 0;
  };

  uint8_t* stack(int i) const { return stacks_->base + static_cast<size_t>(i) * (stack_bytes_ + kGuard) + kGuard; }

  // The scheduler's side: into fiber i, back when it waits or ends.
  void resume(int i) {
    index_ = i;
    current_ = this;
#if defined(BENCH_FIBERS_ASAN)
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, stack(i), stack_bytes_);
#endif
    Slot& s = stacks_->slots[static_cast<size_t>(i)];
    s.context = boost::context::detail::jump_fcontext(s.context, nullptr).fctx;
#if defined(BENCH_FIBERS_ASAN)
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  }

  // The fiber's side: back to the scheduler, until the same run resumes it. With `done` its body
  // ended: it parks, and the run that resumes it is a later one, of this team or of another that
  // took these stacks, whose team it returns (`this` may be gone by then).
  FiberTeam* suspend(bool done) {
    fibers_[static_cast<size_t>(index_)].done = done;
    Slot& s = stacks_->slots[static_cast<size_t>(index_)];
    s.parked = done;
#if defined(BENCH_FIBERS_ASAN)
    __sanitizer_start_switch_fiber(&s.fake_stack, scheduler_bottom_, scheduler_size_);
#endif
    const boost::context::detail::fcontext_t scheduler =
        boost::context::detail::jump_fcontext(scheduler_, nullptr).fctx;
    FiberTeam* team = current_;
    team->scheduler_ = scheduler;
#if defined(BENCH_FIBERS_ASAN)
    __sanitizer_finish_switch_fiber(s.fake_stack, &team->scheduler_bottom_, &team->scheduler_size_);
#endif
    s.parked = false;
    return team;
  }

  void wait(const Barrier* b, uint64_t generation) {
    Fiber& f = fibers_[static_cast<size_t>(index_)];
    f.waiting = b;
    f.generation = generation;
    suspend(false);
  }

  // A phase barrier was released: the fibers start again from the first of a new order (the
  // releasing one included, which yields).
  void new_phase() {
    std::shuffle(gangs_.begin(), gangs_.end(), random_);
    for (size_t g = 0; g < gangs_.size(); ++g) {
      const auto first = order_.begin() + static_cast<std::ptrdiff_t>(g) * gang_;
      std::iota(first, first + gang_, gangs_[g] * gang_);
      std::shuffle(first, first + gang_, random_);
    }
    restart_ = true;
    suspend(false);
  }

  // An eager barrier was released: the gangs with a fiber that waited on it at `generation` move
  // to the front of the order (the others keep theirs), and the releasing fiber yields.
  void run_waiters_first(const Barrier* b, uint64_t generation) {
    const auto waits = [&](int g) {
      for (int k = g; k < g + gang_; ++k) {
        const Fiber& f = fibers_[static_cast<size_t>(order_[static_cast<size_t>(k)])];
        if (!f.done && f.waiting == b && f.generation == generation) return true;
      }
      return false;
    };
    std::vector<int> first, rest;
    for (int g = 0; g < n_; g += gang_) {
      std::vector<int>& to = waits(g) ? first : rest;
      to.insert(to.end(), order_.begin() + g, order_.begin() + g + gang_);
    }
    if (first.empty()) return;
    first.insert(first.end(), rest.begin(), rest.end());
    order_ = std::move(first);
    restart_ = true;
    suspend(false);
  }

  // A fiber's life: a body a run, for as long as the thread keeps its stack (Stacks).
  [[noreturn]] static void entry(boost::context::detail::transfer_t from) {
    FiberTeam* team = current_;
    team->scheduler_ = from.fctx;
#if defined(BENCH_FIBERS_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &team->scheduler_bottom_, &team->scheduler_size_);
#endif
    const int i = team->index_;
    for (;;) {
      try {
        (*team->body_)(i);
      } catch (...) {
        team->error_ = std::current_exception();
      }
      team = team->suspend(true);
    }
  }

  int n_;
  int gang_;
  size_t stack_bytes_;
  std::unique_ptr<Stacks> stacks_;
  std::vector<Fiber> fibers_;
  std::vector<int> order_;  // the fibers, gang after gang
  std::vector<int> gangs_;  // the gangs in order_
  std::minstd_rand random_{2024};
  boost::context::detail::fcontext_t scheduler_ = nullptr;  // where the scheduler resumes
  const std::function<void(int)>* body_ = nullptr;
  std::exception_ptr error_;
  bool restart_ = false;
  int deferred_ = 0;  // fibers deferred by yield_last
  int index_ = 0;
  const void* scheduler_bottom_ = nullptr;
  size_t scheduler_size_ = 0;
  static inline thread_local FiberTeam* current_ = nullptr;
};

}  // namespace bench::test
