#include "cli/signals.h"

#include <pthread.h>
#include <signal.h>

#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace bench::cli {

namespace {

std::mutex g_mutex;
std::atomic<bool>* g_armed_stop = nullptr;
std::atomic<int>* g_which = nullptr;
bool g_second_ends = true;

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

/// Ends the process by `sig` with its default action, from the signal thread.
[[noreturn]] void end_by(int sig) {
  std::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);  // to this thread, where it is no longer blocked: the default action ends the process
  std::_Exit(128 + sig);
}

void receive() {
  const sigset_t set = stop_signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    const std::lock_guard lock(g_mutex);
    if (g_armed_stop == nullptr) end_by(sig);
    const bool again = g_armed_stop->exchange(true);
    if (!again) {
      g_which->store(sig);
    } else if (g_second_ends) {
      end_by(sig);
    }
  }
}

}  // namespace

void start_signal_thread() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(receive).detach();
}

void arm_stop(std::atomic<bool>* stop, std::atomic<int>* which, bool second_ends) {
  const std::lock_guard lock(g_mutex);
  g_armed_stop = stop;
  g_which = which;
  g_second_ends = second_ends;
}

void disarm_stop() {
  const std::lock_guard lock(g_mutex);
  g_armed_stop = nullptr;
  g_which = nullptr;
}

SpawnSignals::SpawnSignals() {
  posix_spawnattr_init(&attr_);
  sigset_t empty;
  sigemptyset(&empty);
  const sigset_t dfl = stop_signals();
  posix_spawnattr_setsigmask(&attr_, &empty);
  posix_spawnattr_setsigdefault(&attr_, &dfl);
  posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
}

SpawnSignals::~SpawnSignals() { posix_spawnattr_destroy(&attr_); }

}  // namespace bench::cli
