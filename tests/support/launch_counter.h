// defines: bench::test::LaunchCounter — the outermost kernel launches of the calling thread while
// it exists (tile/profile.h's LaunchObserver, as the profile's calls column counts them).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/tile/profile.h"

namespace bench::test {

/// Counts the outermost launches of the calling thread from its construction to its destruction:
/// in all, by kernel name, and their names in launch order. Restores the previous observer.
class LaunchCounter final : public tile::LaunchObserver {
 public:
  LaunchCounter() : previous_(tile::observe_launches(this)) {}
  ~LaunchCounter() override { tile::observe_launches(previous_); }
  LaunchCounter(const LaunchCounter&) = delete;
  LaunchCounter& operator=(const LaunchCounter&) = delete;

  void begin(const tile::Exec&, const char*) override {}
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

 private:
  tile::LaunchObserver* previous_;
};

}  // namespace bench::test
