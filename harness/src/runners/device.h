// defines: bench::DeviceInfo, describe_cpu — the facts stored with every run's numbers
#pragma once

#include <string>
#include <string_view>

namespace bench {

/// What the measurements ran on, with measured ceilings used as denominators.
struct DeviceInfo {
  std::string kind;           ///< "cpu" or "cuda"
  std::string name;           ///< CPU model name
  int cores = 0;              ///< logical CPUs visible
  int threads = 0;            ///< worker threads used
  std::string threads_why;    ///< why that many: "2 threads: 2 CPUs in the affinity mask" (tile::TeamPlan)
  std::string thread_policy;  ///< how the worker threads are placed (tile::thread_policy); CPU only
  std::string isa;            ///< relevant ISA extensions (avx2, avx512f, amx ...)
  /// Measured fp32 GEMM rate of one square size (MFU denominator of float32 models): 1024^3 on the
  /// CPU; on a GPU 4096^3, ten back to back between CUDA events, median of five. The throughput
  /// runner adds a second denominator per model: its own GEMMs (runners/gemm_ceiling.h).
  double peak_gflops = 0;
  /// Measured bf16 GEMM rate (bf16 in and out, float accumulation): MFU denominator of bfloat16
  /// models; 0 when not measured (databases written before it existed).
  double peak_gflops_bf16 = 0;
  /// The MFU denominator for a model of dtype `dtype` ("bfloat16" or another).
  double peak_for(std::string_view dtype) const {
    return dtype == "bfloat16" && peak_gflops_bf16 > 0 ? peak_gflops_bf16 : peak_gflops;
  }
  /// Measured memory bandwidth, bytes read + written per second / 1e9: on the CPU STREAM's copy
  /// over arrays of twice the last-level caches (64-512 MiB) by the kernels' own team (best of 5;
  /// before 2026-12-04: one thread's 64 MiB memcpy); on a GPU a device-to-device copy.
  double copy_gbps = 0;
  double memory_gib = 0;  ///< physical memory
  std::string gemm;       ///< GEMM library and version
  std::string note;       ///< how the device was chosen
  /// JSON object of all fields.
  std::string json() const;
};

/// The CPU's memory bandwidth as STREAM's copy measures it with the current team, in GB/s
/// (bytes read + written): the roofline's memory ceiling.
double stream_copy_gbps();

/// Probe the CPU and measure its ceilings (about half a second).
DeviceInfo describe_cpu(const std::string& note);

/// The current CUDA device, with its ceilings measured: copy bandwidth (256 MiB device to device)
/// and the cuBLASLt GEMM rates at 4096^3, fp32 without TF32 and bf16 with float accumulation (the
/// rates of the float32 and bfloat16 models' GEMMs: MFU's denominators). cores = SMs, isa = "sm_XY", note += driver and
/// runtime versions. Throws bench::Error in a build without CUDA or on a CUDA error.
DeviceInfo describe_cuda(const std::string& note);

/// describe_cuda for device "cuda", else describe_cpu.
DeviceInfo describe_device(const std::string& device, const std::string& note);

/// The DeviceInfo whose json() is `text` (how `bench run --jobs` hands its measured device to the
/// processes it starts). Throws bench::Error on text that is not such an object.
DeviceInfo device_from_json(const std::string& text);

}  // namespace bench
