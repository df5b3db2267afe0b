// defines: the `bench` subcommands and the options they share
#pragma once

#include <cstdint>
#include <string>

namespace bench::cli {

/// Exit codes scripts can rely on.
enum ExitCode : int {
  kOk = 0,
  kFailed = 1,    ///< a case or the run failed at run time
  kBadInput = 2,  ///< invalid experiment, arguments, plugin or database
  kInterrupted = 130,
  kTerminated = 143,
};

struct GlobalOptions {
  std::string db = "results/bench.db";
  bool quiet = false;
};

struct RunOptions {
  std::string file;
  std::string device;  ///< empty: the experiment's
  int64_t threads = -1;
  std::string format = "table";
};

int cmd_run(const GlobalOptions& g, const RunOptions& o);
int cmd_validate(const GlobalOptions& g, const std::string& file, const std::string& device);
int cmd_list(const GlobalOptions& g, const std::string& what, const std::string& experiment);
int cmd_results(const GlobalOptions& g, int64_t run, const std::string& format);
int cmd_query(const GlobalOptions& g, const std::string& sql, const std::string& format);

}  // namespace bench::cli
