#include "runners/device.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
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

/// The last-level caches' total size in bytes (each shared cache once), from sysfs; 0 if unknown.
size_t last_level_cache_bytes() {
  std::map<std::string, size_t> caches;  // shared_cpu_list -> size, of the highest level seen
  int top = 0;
  for (int cpu = 0; cpu < 4096; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache";
    if (!std::filesystem::is_directory(dir)) break;
    for (int i = 0; i < 16; ++i) {
      const std::string index = dir + "/index" + std::to_string(i);
      std::ifstream level_in(index + "/level"), size_in(index + "/size"), shared_in(index + "/shared_cpu_list");
      int level = 0;
      std::string size, shared;
      if (!(level_in >> level) || !(size_in >> size) || !(shared_in >> shared)) break;
      size_t bytes = std::strtoull(size.c_str(), nullptr, 10);
      if (size.back() == 'K') bytes <<= 10;
      if (size.back() == 'M') bytes <<= 20;
      if (level > top) {
        top = level;
        caches.clear();
      }
      if (level == top) caches[shared] = bytes;
    }
  }
  size_t total = 0;
  for (const auto& [shared, bytes] : caches) total += bytes;
  return total;
}

}  // namespace

double stream_copy_gbps() {
  // As STREAM measures it: c[i] = a[i] over doubles, each array twice the last-level caches (at
  // least 64 MiB, at most 512 MiB: a VM may report its host's whole LLC, and every run measures
  // this), split over the team by parallel_for as every kernel is, so the threads are placed as
  // the kernels' are; the arrays are first written by the same split, so on a NUMA machine their
  // pages lie near the threads that copy them. Bytes read + written (no write-allocate traffic,
  // as STREAM counts), the best of 5 timed copies after one (STREAM's choice: the ceiling).
  const size_t bytes = std::clamp<size_t>(2 * last_level_cache_bytes(), size_t{64} << 20, size_t{512} << 20);
  const auto n = static_cast<int64_t>(bytes / sizeof(double));
  std::unique_ptr<double[]> a(new double[static_cast<size_t>(n)]), c(new double[static_cast<size_t>(n)]);
  tile::parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      a[static_cast<size_t>(i)] = 1.0 + static_cast<double>(i & 1023);
      c[static_cast<size_t>(i)] = 0.0;
    }
  });
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    tile::parallel_for(n, [&](int64_t b, int64_t e) {
      const double* __restrict src = a.get();
      double* __restrict dst = c.get();
      for (int64_t i = b; i < e; ++i) dst[i] = src[i];
    });
    const double t = seconds_since(t0);
    if (rep > 0) best = best == 0 ? t : std::min(best, t);
  }
  if (c[static_cast<size_t>(n - 1)] != a[static_cast<size_t>(n - 1)]) throw Error("stream copy: wrong result");
  return 2.0 * static_cast<double>(bytes) / best * 1e-9;
}

std::string DeviceInfo::json() const {
  nlohmann::json j = {{"kind", kind},
                      {"name", name},
                      {"cores", cores},
                      {"threads", threads},
                      {"threads_why", threads_why},
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

DeviceInfo device_from_json(const std::string& text) {
  DeviceInfo d;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    d.kind = j.at("kind").get<std::string>();
    d.name = j.at("name").get<std::string>();
    d.cores = j.at("cores").get<int>();
    d.threads = j.at("threads").get<int>();
    d.threads_why = j.value("threads_why", "");
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
  d.threads_why = tile::team().why;
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

  d.copy_gbps = stream_copy_gbps();
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
