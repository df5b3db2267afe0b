// The warp emulator's fibers (tests/support/fibers.h): every body runs once a run with its own
// index, a phase barrier holds every fiber until all arrived, and a team's stacks outlive it (the
// thread's next team of the same size takes them, with the fibers parked on them, also after a run
// that threw and left fibers waiting).
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "support/fibers.h"

namespace bench::kernels {
namespace fiber_team_test {
namespace {

using test::FiberTeam;

// Runs a team of n fibers (gangs of 8) through three phases: in each, every fiber writes its own
// count, then checks at the barrier that all n wrote theirs. Returns how often each index ran.
std::vector<int> run_phases(FiberTeam& team, int n) {
  FiberTeam::Barrier phase(team, n, true);
  std::vector<int> ran(static_cast<size_t>(n), 0), count(static_cast<size_t>(n), 0);
  team.run([&](int i) {
    ++ran[static_cast<size_t>(i)];
    for (int p = 1; p <= 3; ++p) {
      volatile int deep[64] = {};  // stack of the fiber's own, written in every phase
      deep[p] = p;
      count[static_cast<size_t>(i)] = deep[p];
      phase.arrive_and_wait();
      for (int j = 0; j < n; ++j)
        if (count[static_cast<size_t>(j)] < p) throw std::logic_error("a fiber passed the barrier early");
      phase.arrive_and_wait();
    }
  });
  return ran;
}

TEST(FiberTeam, RunsEveryBodyOnceThroughThePhases) {
  FiberTeam team(40, 8);
  EXPECT_EQ(run_phases(team, 40), std::vector<int>(40, 1));
  EXPECT_EQ(run_phases(team, 40), std::vector<int>(40, 1));  // the same team again: its parked fibers
}

TEST(FiberTeam, TheNextTeamOfTheSizeTakesTheStacks) {
  const int before = FiberTeam::stacks_mapped();
  {
    FiberTeam team(48, 8);
    EXPECT_EQ(run_phases(team, 48), std::vector<int>(48, 1));
  }
  EXPECT_EQ(FiberTeam::stacks_mapped(), before + 1);
  {
    FiberTeam team(48, 8);
    EXPECT_EQ(run_phases(team, 48), std::vector<int>(48, 1));
  }
  EXPECT_EQ(FiberTeam::stacks_mapped(), before + 1);  // taken, not mapped again
  {
    FiberTeam team(56, 8);  // another size: its own
    EXPECT_EQ(run_phases(team, 56), std::vector<int>(56, 1));
  }
  EXPECT_EQ(FiberTeam::stacks_mapped(), before + 2);
}

// A body that throws leaves the others waiting on a barrier that cannot fill: the run rethrows,
// and the next team on those stacks starts the abandoned fibers afresh and runs every body.
TEST(FiberTeam, AfterARunThatThrewTheNextStartsAfresh) {
  {
    FiberTeam team(24, 8);
    FiberTeam::Barrier all(team, 24);
    EXPECT_THROW(team.run([&](int i) {
      if (i == 5) throw std::runtime_error("fiber 5");
      all.arrive_and_wait();
    }),
                 std::runtime_error);
  }
  const int before = FiberTeam::stacks_mapped();
  FiberTeam team(24, 8);
  EXPECT_EQ(run_phases(team, 24), std::vector<int>(24, 1));
  EXPECT_EQ(FiberTeam::stacks_mapped(), before);
}

}  // namespace
}  // namespace fiber_team_test
}  // namespace bench::kernels
