// defines: bench::BuildInfo, build_info — provenance of this build, stored with every run
#pragma once

namespace bench {

struct BuildInfo {
  const char* version;   ///< harness version ("0.1.0")
  const char* git_sha;   ///< source revision, "-dirty" appended for uncommitted changes
  const char* compiler;  ///< "GNU 12.2.0"
  const char* flags;     ///< build type and flags
  bool cuda;             ///< built with the CUDA kernels
};

/// The build's provenance.
const BuildInfo& build_info();

}  // namespace bench
