// defines: test::Output, test::ChildrenGetTheProcessCpus, test::shell, test::bench_cli,
// test::read_file — running the bench program (or any command) from a test and reading what it
// wrote
#pragma once

#include <sched.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "kernels/tile/threads.h"
#include "support/toml_case.h"

namespace bench::test {

/// What a command printed, and how it ended (128 + signal when a signal ended it).
struct Output {
  int code = 0;
  std::string out;
  std::string err;
};

/// The whole file, bytes as they are ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// While alive, the calling thread may run on every CPU of the process (tile::available_cpus), so
/// that a child forked meanwhile inherits them all. A child inherits its parent thread's CPUs, and
/// an earlier test of the same binary that trained in process leaves the main thread pinned to one
/// CPU by the team: a bench started from it then sees a one-CPU machine, with one thread fewer
/// than the test expects.
class ChildrenGetTheProcessCpus {
 public:
  ChildrenGetTheProcessCpus() {
    saved_ok_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0;
    cpu_set_t all;
    CPU_ZERO(&all);
    for (const int c : tile::available_cpus()) CPU_SET(c, &all);
    if (saved_ok_ && CPU_COUNT(&all) > 0) sched_setaffinity(0, sizeof all, &all);
  }
  ~ChildrenGetTheProcessCpus() {
    if (saved_ok_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  ChildrenGetTheProcessCpus(const ChildrenGetTheProcessCpus&) = delete;
  ChildrenGetTheProcessCpus& operator=(const ChildrenGetTheProcessCpus&) = delete;

 private:
  cpu_set_t saved_{};
  bool saved_ok_ = false;
};

/// Runs `cmd` with /bin/sh, capturing stdout and stderr.
inline Output shell(const std::string& cmd) {
  const std::string err_file = write_temp("shell_stderr.txt", "");
  Output r;
  FILE* p = nullptr;
  {
    const ChildrenGetTheProcessCpus cpus;
    p = popen((cmd + " 2>" + err_file).c_str(), "r");
  }
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = read_file(err_file);
  return r;
}

/// The bench program of this build.
inline std::string bench_program() { return std::string(BENCH_BINARY_DIR) + "/bin/bench"; }

/// Runs `bench ARGS`, with `env` ("NAME=value ...") added to its environment when given.
inline Output bench_cli(const std::string& args, const std::string& env = "") {
  return shell((env.empty() ? "" : "env " + env + " ") + bench_program() + " " + args);
}

}  // namespace bench::test
