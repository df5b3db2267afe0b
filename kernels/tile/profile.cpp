#include "profile.h"

#include "parallel.h"

namespace bench::tile {

namespace {
thread_local LaunchObserver* t_observer = nullptr;
thread_local bool t_open = false;  // an outermost kernel of this thread is being reported
}  // namespace

LaunchObserver::~LaunchObserver() = default;

LaunchObserver* observe_launches(LaunchObserver* observer) {
  LaunchObserver* before = t_observer;
  t_observer = observer;
  return before;
}

namespace detail {

LaunchObserver* claim_observer() {
  if (t_observer == nullptr || t_open || in_parallel_for()) return nullptr;
  t_open = true;
  return t_observer;
}

void release_observer() { t_open = false; }

}  // namespace detail

}  // namespace bench::tile
