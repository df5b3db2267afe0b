// defines: bench::cli::Prepared, prepare — read, load plugins, expand and check an experiment
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "experiment/experiment.h"
#include "experiment/resolve.h"
#include "plugins/registry.h"

namespace bench::cli {

/// An experiment ready to run: every case resolved and validated.
struct Prepared {
  ExperimentFile file;
  std::unique_ptr<Registry> registry;
  std::string device;       ///< resolved: "cpu"
  std::string device_note;  ///< why
  std::vector<Case> cases;
  std::vector<ResolvedCase> resolved;
  size_t max_model_bytes = 0;  ///< largest case, measured by a dry set-up
  size_t max_model_case = 0;   ///< index in `cases` of that case
};

/// Everything before the first case runs. Throws ConfigError / Error.
Prepared prepare(const std::string& path, const std::string& device_flag);

/// Memory the host can give this process now (MemAvailable), in bytes.
size_t available_memory();

/// "123.4 MiB".
std::string mib(double bytes);

/// Throws ConfigError naming the file and the largest case when it needs more than `available`
/// bytes: checked before anything runs or is stored.
void check_memory(const Prepared& p, size_t available);

/// Print an error as one line "bench: <what>" (or "file:line:col: message") to stderr.
void print_error(const std::exception& e);

}  // namespace bench::cli
