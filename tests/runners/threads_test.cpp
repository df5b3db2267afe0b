// The one decision of the thread count (runners/threads.h): --threads, then the experiment's,
// then an equal share for --jobs, then the default.
#include "runners/threads.h"

#include <gtest/gtest.h>

namespace bench {
namespace threads_test {
namespace {

TEST(ThreadRequest, CommandLineThenFileThenShareThenDefault) {
  const tile::TeamRequest cli = thread_request(16, 4, "x.toml", 1, 2);
  EXPECT_EQ(cli.threads, 16);
  EXPECT_EQ(cli.by, "--threads 16");
  const tile::TeamRequest file = thread_request(-1, 4, "x.toml", 1, 2);
  EXPECT_EQ(file.threads, 4);
  EXPECT_EQ(file.by, "threads = 4 in x.toml");
  const tile::TeamRequest share = thread_request(-1, 0, "x.toml", 3, 16);
  EXPECT_EQ(share.threads, 5);
  EXPECT_EQ(share.by, "an equal share of 16 CPUs for each of 3 processes");
  EXPECT_EQ(thread_request(-1, 0, "x.toml", 4, 2).threads, 1) << "at least one thread each";
  EXPECT_EQ(thread_request(-1, 0, "x.toml", 1, 16).threads, 0) << "one process: the default team";
  EXPECT_EQ(thread_request(-1, 0, "x.toml", 0, 16).threads, 0);
  // --threads 0 asks for the default, over the file's count too.
  EXPECT_EQ(thread_request(0, 4, "x.toml", 1, 2).threads, 0);
  EXPECT_EQ(thread_request(0, 4, "x.toml", 2, 8).threads, 4) << "with --jobs the default is the equal share";
}

TEST(ThreadRequest, UsedTeamIsWhatWasAskedFor) {
  const tile::TeamRequest before = tile::team_request();
  const tile::TeamPlan p = use_threads(thread_request(1, 0, "", 1, usable_cpus()), true);
  EXPECT_EQ(p.threads, 1);
  EXPECT_EQ(p.why, "1 thread: --threads 1");
  EXPECT_EQ(tile::team().why, p.why);
  EXPECT_EQ(tile::team_request().by, "--threads 1");
  tile::set_team(before);
  EXPECT_GE(usable_cpus(), 1);
}

}  // namespace
}  // namespace threads_test
}  // namespace bench
