// defines: bench::test::ScopedLaunchObserver — a tile/profile.h LaunchObserver of the calling
//          thread's outermost launches while it exists; LaunchCounter — one that counts them (as
//          the profile's calls column does)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/tile/profile.h"

namespace bench::test {

/// The calling thread's launch observer from its construction to its destruction, which restores
/// the previous one; a subclass says what it records (begin does nothing unless overridden).
class ScopedLaunchObserver : public tile::LaunchObserver {
 public:
  ScopedLaunchObserver() : previous_(tile::observe_launches(this)) {}
  ~ScopedLaunchObserver() override { tile::observe_launches(previous_); }
  ScopedLaunchObserver(const ScopedLaunchObserver&) = delete;
  ScopedLaunchObserver& operator=(const ScopedLaunchObserver&) = delete;

  void begin(const tile::Exec&, const char*) override {}

 private:
  tile::LaunchObserver* previous_;
};

/// Counts the outermost launches of the calling thread from its construction to its destruction:
/// in all, by kernel name, and their names in launch order.
class LaunchCounter final : public ScopedLaunchObserver {
 public:
  void end(const tile::Exec&, const char* name, const tile::Traffic&) override {
    ++total;
    ++by_name[name];
    names.emplace_back(name);
  }

  /// What a stretch launched: in all and by kernel name.
  struct Counts {
    int64_t total = 0;
    std::map<std::string, int64_t> by_name;
  };

  int64_t total = 0;                       ///< launches so far
  std::map<std::string, int64_t> by_name;  ///< launches so far by kernel name
  std::vector<std::string> names;          ///< their names in launch order
};

}  // namespace bench::test
