// Every experiment file the project ships (experiments/*.toml, and the GPU check's
// tests/cuda/*.toml) reads, expands and resolves against the built-in plugins, on the cpu and on
// the cuda device tables: a file broken by a renamed key or plugin fails here, not in a user's run.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "experiment/resolve.h"
#include "support/toml_case.h"

namespace bench {
namespace shipped_experiments_test {
namespace {

std::vector<std::string> shipped_files() {
  std::vector<std::string> out;
  for (const char* dir : {"/experiments", "/tests/cuda"})
    for (const auto& e : std::filesystem::directory_iterator(std::string(BENCH_SOURCE_DIR) + dir))
      if (e.path().extension() == ".toml") out.push_back(e.path().string());
  return out;
}

TEST(ShippedExperiments, EveryFileResolvesOnTheCpuAndOnCuda) {
  const std::vector<std::string> files = shipped_files();
  EXPECT_GE(files.size(), 12u);
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    const ExperimentFile f = test::read_file_experiment(file);
    for (const char* device : {"cpu", "cuda"}) {
      const std::vector<Case> cases = expand_cases(f, test::builtin_registry(), device);
      EXPECT_FALSE(cases.empty()) << device;
      for (const Case& c : cases) EXPECT_NO_THROW((void)test::resolve(c)) << device;
    }
  }
}

}  // namespace
}  // namespace shipped_experiments_test
}  // namespace bench
