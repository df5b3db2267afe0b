// Test support: build resolved cases and models from TOML text.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/interfaces.h"
#include "experiment/experiment.h"
#include "experiment/resolve.h"
#include "plugins/registry.h"
#include "runners/registry.h"

namespace bench::test {

/// A registry with the build's own plugins (loaded once per process).
inline Registry& builtin_registry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    reg->load_defaults();
    return reg;
  }();
  return *r;
}

/// Write `text` to a fresh file under the temp directory and return its path.
inline std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("bench_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

/// The experiment file at `path`, read with the build's runners.
inline ExperimentFile read_file_experiment(const std::string& path) { return read_experiment(path, runner_sections()); }

/// Cases of an experiment given as TOML text.
inline std::vector<Case> cases_of(const std::string& toml, const std::string& device = "cpu",
                                  const std::string& name = "exp.toml") {
  const ExperimentFile f = read_file_experiment(write_temp(name, toml));
  return expand_cases(f, builtin_registry(), device);
}

/// A case resolved with the built-in plugins and the build's runners.
inline ResolvedCase resolve(const Case& c) { return resolve_case(c, builtin_registry(), runner_sections()); }

/// The first case of an experiment, resolved.
inline ResolvedCase resolve_first(const std::string& toml) { return resolve(cases_of(toml).at(0)); }

/// One batch of a case's dataset: inputs and targets, batch_size x seq_len each.
struct Batch {
  std::vector<int32_t> in, tg;
};

/// Training batch `index` of the case's dataset.
inline Batch batch_of(const ResolvedCase& rc, int64_t index = 0) {
  std::unique_ptr<Component> ds = builtin_registry().create(*rc.data.info, rc.data.params);
  Batch b;
  b.in.resize(static_cast<size_t>(rc.model.dims.tokens()));
  b.tg.resize(b.in.size());
  dynamic_cast<Dataset*>(ds.get())->batch(Split::kTrain, index, rc.model.dims.batch_size, rc.model.dims.seq_len,
                                          b.in.data(), b.tg.data());
  return b;
}

}  // namespace bench::test
