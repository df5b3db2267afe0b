// defines: bench::DeviceInfo, describe_cpu — the facts stored with every run's numbers
#pragma once

#include <string>

namespace bench {

/// What the measurements ran on, with measured ceilings used as denominators.
struct DeviceInfo {
  std::string kind;        ///< "cpu"
  std::string name;        ///< CPU model name
  int cores = 0;           ///< logical CPUs visible
  int threads = 0;         ///< worker threads used
  std::string isa;         ///< relevant ISA extensions (avx2, avx512f, amx ...)
  double peak_gflops = 0;  ///< measured fp32 GEMM rate at 1024^3 (MFU denominator)
  double copy_gbps = 0;    ///< measured memcpy bandwidth, 64 MiB
  double memory_gib = 0;   ///< physical memory
  std::string gemm;        ///< GEMM library and version
  std::string note;        ///< how the device was chosen
  /// JSON object of all fields.
  std::string json() const;
};

/// Probe the CPU and measure its ceilings (about half a second).
DeviceInfo describe_cpu(const std::string& note);

/// The DeviceInfo whose json() is `json` (how `bench run --jobs` hands its measured device to the
/// processes it starts). Throws bench::Error on text that is not such an object.
DeviceInfo device_from_json(const std::string& json);

}  // namespace bench
