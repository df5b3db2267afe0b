#include "runners/device.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/error.h"
#include "bench/random.h"
#include "kernels/device_runtime.h"
#include "kernels/gemm.h"
#include "kernels/memory.h"
#include "kernels/tile/parallel.h"
#include "kernels/tile/threads.h"

namespace bench {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median of `reps` timings of f, after one untimed call.
template <class F>
double median_seconds(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

std::string DeviceInfo::json() const {
  nlohmann::json j = {{"kind", kind},
                      {"name", name},
                      {"cores", cores},
                      {"threads", threads},
                      {"thread_policy", thread_policy},
                      {"isa", isa},
                      {"peak_gflops_fp32_gemm", peak_gflops},
                      {"peak_gflops_bf16_gemm", peak_gflops_bf16},
                      {"copy_gbps", copy_gbps},
                      {"memory_gib", memory_gib},
                      {"gemm", gemm},
                      {"note", note}};
  return j.dump();
}

DeviceInfo device_from_json(const std::string& json) {
  DeviceInfo d;
  try {
    const nlohmann::json j = nlohmann::json::parse(json);
    d.kind = j.at("kind").get<std::string>();
    d.name = j.at("name").get<std::string>();
    d.cores = j.at("cores").get<int>();
    d.threads = j.at("threads").get<int>();
    d.thread_policy = j.value("thread_policy", "");
    d.isa = j.at("isa").get<std::string>();
    d.peak_gflops = j.at("peak_gflops_fp32_gemm").get<double>();
    d.peak_gflops_bf16 = j.value("peak_gflops_bf16_gemm", 0.0);
    d.copy_gbps = j.at("copy_gbps").get<double>();
    d.memory_gib = j.at("memory_gib").get<double>();
    d.gemm = j.at("gemm").get<std::string>();
    d.note = j.at("note").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("not a device description: ") + e.what());
  }
  return d;
}

DeviceInfo describe_cpu(const std::string& note) {
  DeviceInfo d;
  d.kind = "cpu";
  d.note = note;
  d.cores = static_cast<int>(std::thread::hardware_concurrency());
  d.threads = tile::num_threads();
  tile::place_threads();
  d.thread_policy = tile::thread_policy();
  d.gemm = kernels::gemm_backend();
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> isa;
  while (std::getline(cpuinfo, line)) {
    if (d.name.empty() && line.rfind("model name", 0) == 0) d.name = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0) {
      std::istringstream ss(line.substr(line.find(':') + 1));
      std::string f;
      while (ss >> f)
        if (f == "avx2" || f == "fma" || f == "avx512f" || f == "avx512_bf16" || f == "amx_tile" || f == "amx_bf16")
          isa.insert(f);
    }
  }
  for (const auto& f : isa) d.isa += (d.isa.empty() ? "" : " ") + f;
  d.memory_gib = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE)) /
                 (1024.0 * 1024.0 * 1024.0);

  // GEMM ceiling: fp32 1024^3 on random data (never on zeros).
  const int64_t n = 1024;
  std::vector<float> a(static_cast<size_t>(n * n)), b(a.size()), c(a.size());
  Rng rng(7);
  for (auto& x : a) x = static_cast<float>(rng.uniform() - 0.5);
  for (auto& x : b) x = static_cast<float>(rng.uniform() - 0.5);
  const double t = median_seconds(
      5, [&] { kernels::gemm<float>(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n); });
  d.peak_gflops = 2.0 * static_cast<double>(n * n * n) / t * 1e-9;
  // The same product in bf16 storage (kernels/gemm.h: widened to float, one rounding of C).
  std::vector<tile::bf16> a16(a.size()), b16(b.size()), c16(c.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a16[i] = tile::float_to_bf16(a[i]);
    b16[i] = tile::float_to_bf16(b[i]);
  }
  const double t16 = median_seconds(5, [&] {
    kernels::gemm<tile::bf16>(false, false, n, n, n, 1.f, a16.data(), n, b16.data(), n, 0.f, c16.data(), n);
  });
  d.peak_gflops_bf16 = 2.0 * static_cast<double>(n * n * n) / t16 * 1e-9;

  // Copy bandwidth: 64 MiB memcpy, bytes read + written.
  const size_t bytes = 64u << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (size_t i = 0; i < bytes; i += 4096) src[i] = static_cast<char>(rng.next());
  const double tc = median_seconds(5, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  d.copy_gbps = 2.0 * static_cast<double>(bytes) / tc * 1e-9;
  return d;
}

DeviceInfo describe_cuda(const std::string& note) {
#if BENCH_HAVE_CUDA
  DeviceInfo d;
  try {
    const kernels::cuda::DeviceFacts f = kernels::cuda::describe_device(kernels::cuda::current_device());
    d.kind = "cuda";
    d.name = f.name;
    d.cores = f.sm_count;
    d.threads = tile::num_threads();
    d.isa = "sm_" + std::to_string(f.cc_major) + std::to_string(f.cc_minor);
    d.memory_gib = static_cast<double>(f.memory_bytes) / (1024.0 * 1024.0 * 1024.0);
    d.copy_gbps = f.copy_gbps;
    d.gemm = "cuBLASLt fp32 (CUBLAS_COMPUTE_32F, no TF32) and bf16 (float accumulation)";
    d.note = note + "; driver " + std::to_string(f.driver_version) + ", runtime " + std::to_string(f.runtime_version) +
             ", cuBLASLt " + std::to_string(f.cublaslt_version) + ", cuDNN " +
             (f.cudnn_version > 0 ? std::to_string(f.cudnn_version) : std::string("not found"));

    // The GEMM ceilings, fp32 and bf16, measured as cuda_check measures them (one routine:
    // kernels/device_runtime.h, measure_gemm_ceiling).
    d.peak_gflops = kernels::cuda::measure_gemm_ceiling(false);
    d.peak_gflops_bf16 = kernels::cuda::measure_gemm_ceiling(true);
  } catch (const std::exception& e) {
    throw Error(std::string("measuring the CUDA device: ") + e.what());
  }
  return d;
#else
  (void)note;
  throw Error("this build has no CUDA");
#endif
}

DeviceInfo describe_device(const std::string& device, const std::string& note) {
  return device == "cuda" ? describe_cuda(note) : describe_cpu(note);
}

}  // namespace bench
