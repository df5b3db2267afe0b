// defines: test::Output, test::shell, test::bench_cli, test::read_file — running the bench
// program (or any command) from a test and reading what it wrote
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

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

/// Runs `cmd` with /bin/sh, capturing stdout and stderr.
inline Output shell(const std::string& cmd) {
  const std::string err_file = write_temp("shell_stderr.txt", "");
  Output r;
  FILE* p = popen((cmd + " 2>" + err_file).c_str(), "r");
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
