#include "runners/gemm_ceiling.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "bench/error.h"
#include "bench/random.h"
#include "kernels/device_runtime.h"

namespace bench {

namespace {

// ----------------------------------------------------------------------------
// operands: one A, B and C per element size, in the model's memory

// A batched call's operands span count - 1 strides and one matrix.
int64_t elements_a(const kernels::GemmCall& c) { return (c.count - 1) * c.stride_a + (c.trans_a ? c.k : c.m) * c.lda; }
int64_t elements_b(const kernels::GemmCall& c) { return (c.count - 1) * c.stride_b + (c.trans_b ? c.n : c.k) * c.ldb; }
int64_t elements_c(const kernels::GemmCall& c) { return (c.count - 1) * c.stride_c + c.m * c.ldc; }

struct DeviceBuffer {
  void* p = nullptr;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p != nullptr) kernels::device_free(p);
  }
};

struct Operands {
  DeviceBuffer a, b, c;
};

/// `n` random values in [-0.5, 0.5) of the element size `bytes`, as raw bytes.
std::vector<char> random_values(int64_t n, int bytes, Rng& rng) {
  std::vector<char> out(static_cast<size_t>(n) * static_cast<size_t>(bytes));
  for (int64_t i = 0; i < n; ++i) {
    const double v = rng.uniform() - 0.5;
    char* at = out.data() + i * bytes;
    if (bytes == 8) {
      *reinterpret_cast<double*>(at) = v;
    } else if (bytes == 4) {
      *reinterpret_cast<float*>(at) = static_cast<float>(v);
    } else {
      *reinterpret_cast<tile::bf16*>(at) = tile::float_to_bf16(static_cast<float>(v));
    }
  }
  return out;
}

void fill(DeviceBuffer& buf, kernels::Memory memory, int64_t n, int bytes, Rng& rng) {
  const std::vector<char> host = random_values(n, bytes, rng);
  buf.p = kernels::device_allocate(memory, host.size());
  if (buf.p == nullptr)
    throw Error("timing the model's GEMMs: out of memory for " + std::to_string(host.size()) + " bytes");
  kernels::copy_bytes(buf.p, host.data(), host.size());
}

void run_call(const tile::Exec& exec, const kernels::GemmCall& c, const Operands& o) {
  const auto go = [&](auto tag) {
    using T = decltype(tag);
    if (c.count > 1) {
      kernels::gemm_batched<T>(exec, c.trans_a, c.trans_b, c.m, c.n, c.k, 1, static_cast<const T*>(o.a.p), c.lda,
                               c.stride_a, static_cast<const T*>(o.b.p), c.ldb, c.stride_b, c.accumulate ? 1 : 0,
                               static_cast<T*>(o.c.p), c.ldc, c.stride_c, c.count);
      return;
    }
    kernels::gemm<T>(exec, c.trans_a, c.trans_b, c.m, c.n, c.k, 1, static_cast<const T*>(o.a.p), c.lda,
                     static_cast<const T*>(o.b.p), c.ldb, c.accumulate ? 1 : 0, static_cast<T*>(o.c.p), c.ldc);
  };
  if (c.element_bytes == 8) {
    go(double{});
  } else if (c.element_bytes == 4) {
    go(float{});
  } else {
    go(tile::bf16{});
  }
}

}  // namespace

// ----------------------------------------------------------------------------
// the timing

GemmCeiling time_gemm_calls(const std::vector<kernels::GemmCall>& calls, kernels::Memory memory, int passes) {
  if (calls.empty()) throw Error("timing the model's GEMMs: the step made no GEMM");
  if (passes < 1) throw Error("timing the model's GEMMs: passes must be at least 1");
  GemmCeiling out;
  std::set<std::tuple<bool, bool, int64_t, int64_t, int64_t, int>> shapes;
  std::map<int, std::array<int64_t, 3>> sizes;  // element size -> largest A, B, C
  for (const auto& c : calls) {
    out.flops += c.flops();
    shapes.insert({c.trans_a, c.trans_b, c.m, c.n, c.k, c.element_bytes});
    auto& s = sizes[c.element_bytes];
    s = {std::max(s[0], elements_a(c)), std::max(s[1], elements_b(c)), std::max(s[2], elements_c(c))};
  }
  out.calls = static_cast<int64_t>(calls.size());
  out.shapes = static_cast<int64_t>(shapes.size());

  Rng rng(11);
  std::map<int, Operands> operands;
  for (const auto& [bytes, s] : sizes) {
    Operands& o = operands[bytes];
    fill(o.a, memory, s[0], bytes, rng);
    fill(o.b, memory, s[1], bytes, rng);
    fill(o.c, memory, s[2], bytes, rng);
  }
  const tile::Exec exec = kernels::exec_for(memory);
  kernels::GemmRecorder own;  // the timing's GEMMs are no step's: a recorder outside must not see them
  const auto pass = [&] {
    for (const auto& c : calls) run_call(exec, c, operands.at(c.element_bytes));
  };

  std::vector<double> ms;
#if BENCH_HAVE_CUDA
  if (exec.backend == tile::Backend::kCuda) {
    kernels::cuda::EventTimer timer(exec.stream);
    pass();
    kernels::synchronize(exec);
    for (int i = 0; i < passes; ++i) {
      timer.start();
      pass();
      ms.push_back(timer.stop_ms());
    }
  }
#endif
  if (ms.empty()) {
    pass();
    kernels::synchronize(exec);
    for (int i = 0; i < passes; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      pass();
      kernels::synchronize(exec);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::sort(ms.begin(), ms.end());
  out.median_ms = ms[ms.size() / 2];
  out.min_ms = ms.front();
  out.max_ms = ms.back();
  out.gflops_per_s = out.flops / (out.median_ms * 1e-3) * 1e-9;
  return out;
}

}  // namespace bench
