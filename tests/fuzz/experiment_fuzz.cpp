// libFuzzer target: an experiment file, from bytes to every case validated and its memory
// estimated — what `bench validate` does. The contract under test: any input either passes or
// throws bench::Error (which the CLI prints as one line); anything else (another exception, a
// crash, a sanitizer report, a hang) is a finding. Run by scripts/fuzz.sh (preset `fuzz`).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "bench/error.h"
#include "experiment/experiment.h"
#include "experiment/resolve.h"
#include "model/model.h"
#include "plugins/registry.h"
#include "runners/registry.h"

namespace {

const bench::Registry& registry() {
  static const bench::Registry* r = [] {
    auto* reg = new bench::Registry();  // loaded once, kept for the process
    reg->load_defaults();
    return reg;
  }();
  return *r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/bench_fuzz_" + std::to_string(getpid()) + ".toml";
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    bench::ExperimentFile file = bench::read_experiment(path, bench::runner_sections());
    // plugin_paths would dlopen whatever a random input names: not part of what is fuzzed.
    file.plugin_paths.clear();
    for (const auto& c : bench::expand_cases(file, registry(), "cpu", 64)) {
      const bench::ResolvedCase rc = bench::resolve_case(c, registry(), bench::runner_sections());
      (void)bench::Model::plan(rc.model, registry());  // validates and measures, as `bench validate` does
    }
  } catch (const bench::Error&) {
    // A clear error: the expected outcome for most inputs.
  }
  return 0;
}
