// The device's figures for scripts/gpu-check.sh (its "timing" section): the copy bandwidth, the
// GEMM ceilings (square, and the shapes of a GPT-2-small step), the bandwidth of the row kernels,
// RoPE, AdamW and the cross-entropy as a share of the copy, the attention's TFLOP/s (our flash
// kernels and cuDNN's SDPA); and the checks only CUDA has, which kernels_test cannot make on the
// host targets: the caching allocator on cudaMalloc, event timing and the L2 flush, an optimizer
// step captured into a CUDA graph and replayed, cuBLASLt's epilogues and misaligned views, and
// cuDNN's SDPA, our float32 flash attention (cuda_check_flash32.cuh) and the bf16 forward on wgmma
// (cuda_check_wgmma.cuh, last: written without a GPU) against float64. Every
// other kernel's correctness on CUDA is kernels_test's (the cuda target of tests/kernels): not
// repeated here.
//
//   cuda_check [--backend cuda|cpu] [--small] [--only PREFIX,...] [--md FILE] [--json-rows FILE]
//              [--list]
//
// Every check writes its row the moment it ends (tests/support/check_table.h): a throw is its
// FAIL row and the next check runs; a sticky CUDA error ends the program after the row that names
// the check that caused it; a kill leaves every row that finished. --backend cpu --small runs the
// same timings on the CPU executor at small sizes (the CUDA-only checks say SKIPPED): how CI runs
// this program and scripts/gpu-check.sh --dry-run without a GPU. Exit: 0 no FAIL, 1 a FAIL, 2 bad
// arguments, 3 a sticky CUDA error, 77 --backend cuda without a device.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../kernels/activation.h"
#include "../../kernels/adamw.h"
#include "../../kernels/attention.h"
#include "../../kernels/caching_allocator.h"
#include "../../kernels/cross_entropy.h"
#include "../../kernels/cuda/flash_attention.cuh"
#include "../../kernels/cuda/gemm.cuh"
#include "../../kernels/cuda_launchers.h"
#include "../../kernels/device_runtime.h"
#include "../../kernels/elementwise.h"
#include "../../kernels/gemm.h"
#include "../../kernels/memory.h"
#include "../../kernels/norm.h"
#include "../../kernels/rope.h"
#include "../../kernels/softmax.h"
#include "../support/check_table.h"

namespace {

using namespace bench;
using kernels::acc_t;
using test::CheckResult;
using tile::bf16;

/// Throws std::runtime_error naming the call when a CUDA call fails (the check's FAIL row).
void cuda_ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}
#define CUDA_OK(expr) cuda_ok(static_cast<cudaError_t>(expr), #expr)

/// Where this run measures: the device or the CPU executor, and at which sizes.
struct Setup {
  bool cuda = true;
  bool small = false;
  tile::Exec exec() const { return kernels::exec_for(cuda ? kernels::Memory::kCuda : kernels::Memory::kHost); }
  kernels::Memory memory() const { return cuda ? kernels::Memory::kCuda : kernels::Memory::kHost; }
  int reps() const { return small ? 5 : 20; }
};
Setup g_setup;

template <class T>
const char* dtype_name() {
  return std::is_same_v<T, bf16> ? "bf16" : "float";
}

template <class T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return tile::float_to_bf16(x);
  } else {
    return static_cast<T>(x);
  }
}
template <class T>
double to_double(T x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return tile::bf16_to_float(x);
  } else {
    return static_cast<double>(x);
  }
}

template <class T>
std::vector<T> random_vec(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<T> v(n);
  for (auto& x : v) x = from_float<T>(nd(gen) * scale);
  return v;
}

/// n elements in the run's memory (the device, or the host for --backend cpu), poisoned (every
/// byte 0xff: NaN), or holding a host vector; host() copies them back.
template <class T>
class Buf {
 public:
  explicit Buf(size_t n) : n_(n) {
    const size_t bytes = std::max<size_t>(n, 1) * sizeof(T);
    p_ = static_cast<T*>(kernels::device_allocate(g_setup.memory(), bytes));
    if (bytes <= (size_t{256} << 20)) {  // outputs of checks; larger buffers are timing's, zeroed
      const std::vector<unsigned char> poison(bytes, 0xff);
      kernels::copy_bytes(p_, poison.data(), poison.size());
    }
  }
  explicit Buf(const std::vector<T>& v) : Buf(v.size()) { kernels::copy_bytes(p_, v.data(), v.size() * sizeof(T)); }
  ~Buf() { kernels::device_free(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  std::vector<T> host() const {
    std::vector<T> v(n_);
    kernels::copy_bytes(v.data(), p_, n_ * sizeof(T));
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

/// Median and spread of `reps` timed runs of f, each after an L2 (CPU: cache) flush and after 3
/// untimed warm-ups; CUDA events on the run's stream, or the steady clock on the CPU.
struct Times {
  double median = 0, min = 0, max = 0;
};
Times time_ms(const std::function<void()>& f, int reps = 0) {
  if (reps == 0) reps = g_setup.reps();
  const tile::Exec exec = g_setup.exec();
  static Buf<char>* flush = nullptr;
  if (flush == nullptr) flush = new Buf<char>(g_setup.cuda ? size_t{256} << 20 : size_t{64} << 20);
  for (int i = 0; i < 3; ++i) f();
  kernels::synchronize(exec);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    if (g_setup.cuda) {
      auto* stream = static_cast<cudaStream_t>(exec.stream);
      CUDA_OK(cudaMemsetAsync(flush->get(), i & 0xff, flush->size(), stream));
      kernels::cuda::EventTimer timer(exec.stream);
      timer.start();
      f();
      t.push_back(timer.stop_ms());
    } else {
      std::memset(flush->get(), i & 0xff, flush->size());
      const auto t0 = std::chrono::steady_clock::now();
      f();
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char s[256];
  std::snprintf(s, sizeof s, f, a, b, c, d);
  return s;
}

/// Within atol + rtol |ref| everywhere (NaN fails): PASS with the largest error, or FAIL at the
/// first element that is not.
template <class A, class B>
CheckResult compare(const std::vector<A>& ref, const std::vector<B>& got, double atol, double rtol) {
  if (ref.size() != got.size()) return CheckResult::fail("sizes differ");
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = to_double(ref[i]), g = to_double(got[i]), err = std::abs(g - r);
    if (!(err <= atol + rtol * std::abs(r)))
      return CheckResult::fail(fmt("at %.0f: %.6g vs %.6g", static_cast<double>(i), g, r));
    worst = std::max(worst, err);
  }
  return {"PASS", worst, "max abs err", fmt("within %.2g + %.2g |ref|", atol, rtol)};
}

CheckResult cuda_only() { return CheckResult::skipped("CUDA only (--backend cpu)"); }

double g_copy_gbps = 0;

// --- the ceilings -------------------------------------------------------------------------------

void copy_bandwidth(test::CheckTable& t) {
  t.run("ceiling/copy", [] {
    const size_t bytes = g_setup.small ? size_t{64} << 20 : size_t{1} << 30;
    Buf<char> a(bytes), b(bytes);
    const Times ms = time_ms([&] { kernels::copy_bytes(b.get(), a.get(), bytes); }, g_setup.small ? 5 : 10);
    g_copy_gbps = 2.0 * static_cast<double>(bytes) / (ms.median * 1e-3) * 1e-9;
    return CheckResult::info(g_copy_gbps, "GB/s",
                             fmt("read + write of %.0f MiB; %.3f ms (%.3f..%.3f)", static_cast<double>(bytes >> 20),
                                 ms.median, ms.min, ms.max));
  });
}

/// TFLOP/s of `count` back-to-back products of m x n x k, timed as one (events around the batch).
template <class T>
double gemm_tflops(const std::vector<std::array<int64_t, 3>>& shapes, int count) {
  std::vector<std::unique_ptr<Buf<T>>> bufs;
  double flops = 0;
  std::vector<std::function<void()>> calls;
  for (const auto& [m, n, k] : shapes) {
    bufs.push_back(std::make_unique<Buf<T>>(random_vec<T>(static_cast<size_t>(m * k), 21)));
    bufs.push_back(std::make_unique<Buf<T>>(random_vec<T>(static_cast<size_t>(k * n), 22)));
    bufs.push_back(std::make_unique<Buf<T>>(static_cast<size_t>(m * n)));
    T* a = bufs[bufs.size() - 3]->get();
    T* b = bufs[bufs.size() - 2]->get();
    T* c = bufs.back()->get();
    calls.push_back([=] { kernels::gemm<T>(g_setup.exec(), false, false, m, n, k, 1.f, a, k, b, n, 0.f, c, n); });
    flops += 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  }
  const Times ms = time_ms(
      [&] {
        for (int i = 0; i < count; ++i)
          for (auto& call : calls) call();
      },
      g_setup.small ? 3 : 5);
  return flops * count / (ms.median * 1e-3) * 1e-12;
}

void gemm_ceilings(test::CheckTable& t) {
  // The square ceilings on a GPU are the run's device record's, by the same routine
  // (kernels::cuda::measure_gemm_ceiling): one ceiling, measured one way, everywhere. The dry
  // run's CPU executor times a small square instead.
  const auto square = [&](bool in_bf16) {
    const double n = static_cast<double>(kernels::cuda::kGemmCeilingN);
    if (g_setup.cuda)
      return CheckResult::info(kernels::cuda::measure_gemm_ceiling(in_bf16) * 1e-3, "TFLOP/s",
                               fmt(in_bf16 ? "%.0f^3, 5 x 10 back-to-back, event-timed, median: the device record's "
                                             "routine (measure_gemm_ceiling)"
                                           : "%.0f^3 (no TF32), 5 x 10 back-to-back, event-timed, median: the device "
                                             "record's routine (measure_gemm_ceiling)",
                                   n));
    const double rate = in_bf16 ? gemm_tflops<bf16>({{256, 256, 256}}, 10) : gemm_tflops<float>({{256, 256, 256}}, 10);
    return CheckResult::info(rate, "TFLOP/s", "256^3 on the CPU executor, 10 back-to-back");
  };
  t.run("ceiling/gemm/bf16 square", [&] { return square(true); });
  t.run("ceiling/gemm/float square", [&] { return square(false); });
  // The forward GEMMs of a GPT-2-small step (8192 tokens, d 768, d_ff 3072, vocabulary padded to
  // 50304): what MFU's denominator should be for that model.
  const int64_t tok = g_setup.small ? 128 : 8192, d = g_setup.small ? 64 : 768, vocab = g_setup.small ? 512 : 50304;
  t.run("ceiling/gemm/bf16 gpt2-small shapes", [&] {
    return CheckResult::info(
        gemm_tflops<bf16>({{tok, 3 * d, d}, {tok, d, d}, {tok, 4 * d, d}, {tok, d, 4 * d}, {tok, vocab, d}}, 2),
        "TFLOP/s",
        fmt("qkv, proj, fc, fc2, lm head at %.0f tokens, d %.0f, vocabulary %.0f, back-to-back",
            static_cast<double>(tok), static_cast<double>(d), static_cast<double>(vocab)));
  });
}

// --- bandwidth of the memory-bound kernels ------------------------------------------------------

template <class T>
void bandwidth_rows(test::CheckTable& t);

/// The rows of bandwidth_rows; a failure outside a row (allocating, preparing) is a row too.
template <class T>
void bandwidth(test::CheckTable& t) {
  try {
    bandwidth_rows<T>(t);
  } catch (const std::exception& e) {
    t.finish(std::string("bandwidth/(setup)/") + dtype_name<T>(), CheckResult::fail(std::string("threw: ") + e.what()));
  }
}

template <class T>
void bandwidth_rows(test::CheckTable& t) {
  using A = acc_t<T>;
  const int64_t rows = g_setup.small ? 256 : 16384, cols = g_setup.small ? 1024 : 4096, n = rows * cols;
  const double e = sizeof(T);
  const std::string dt = dtype_name<T>(), shape = std::to_string(rows) + "x" + std::to_string(cols);
  const tile::Exec exec = g_setup.exec();
  Buf<T> x(random_vec<T>(n, 21)), y(n), dy(random_vec<T>(n, 22)), w(random_vec<T>(cols, 23));
  Buf<A> mean(rows), rstd(rows), ws(kernels::norm_backward_workspace(rows, cols));
  kernels::norm_forward<T>(exec, true, x.get(), w.get(), nullptr, y.get(), mean.get(), rstd.get(), rows, cols, 1e-5);
  const auto row = [&](const std::string& kernel, double bytes, const std::string& sh, auto&& launch) {
    t.run("bandwidth/" + kernel + "/" + dt, [&] {
      const Times ms = time_ms(launch);
      const double gbps = bytes / (ms.median * 1e-3) * 1e-9;
      const std::string share = g_copy_gbps > 0 ? fmt("%.0f%% of copy; ", 100 * gbps / g_copy_gbps) : "";
      return CheckResult::info(gbps, "GB/s", share + fmt("%.4f ms (%.4f..%.4f); ", ms.median, ms.min, ms.max) + sh);
    });
  };
  row("rmsnorm forward", 2 * n * e, shape, [&] {
    kernels::norm_forward<T>(exec, false, x.get(), w.get(), nullptr, y.get(), nullptr, rstd.get(), rows, cols, 1e-6);
  });
  row("rmsnorm backward", 3 * n * e, shape, [&] {
    kernels::norm_backward<T>(exec, false, dy.get(), x.get(), w.get(), mean.get(), rstd.get(), y.get(), nullptr,
                              nullptr, rows, cols, ws.get());
  });
  row("layernorm forward", 2 * n * e, shape, [&] {
    kernels::norm_forward<T>(exec, true, x.get(), w.get(), w.get(), y.get(), mean.get(), rstd.get(), rows, cols, 1e-5);
  });
  row("layernorm backward (+dw, db)", 3 * n * e, shape, [&] {
    kernels::norm_backward<T>(exec, true, dy.get(), x.get(), w.get(), mean.get(), rstd.get(), y.get(), w.get(), w.get(),
                              rows, cols, ws.get());
  });
  row("rmsnorm backward (+dw)", 3 * n * e, shape, [&] {
    kernels::norm_backward<T>(exec, false, dy.get(), x.get(), w.get(), mean.get(), rstd.get(), y.get(), w.get(),
                              nullptr, rows, cols, ws.get());
  });
  row("softmax forward", 2 * n * e, shape, [&] {
    kernels::softmax_forward<T>(exec, x.get(), y.get(), rows, cols, cols, 1.0, 0.0, kernels::SoftmaxMask{false, 0, 0},
                                nullptr);
  });
  row("softmax backward", 3 * n * e, shape, [&] {
    kernels::softmax_backward<T>(exec, x.get(), dy.get(), nullptr, y.get(), rows, cols, cols, 1.0, 0.0,
                                 kernels::SoftmaxMask{false, 0, 0});
  });
  row("swiglu forward", 1.5 * n * e, shape,
      [&] { kernels::glu_forward<T>(exec, kernels::Activation::kSilu, x.get(), y.get(), rows, cols / 2); });
  // The gated backward reads the gate and up halves (n) and dh (n / 2), and writes dgate and dup (n):
  // SwiGLU, and ReGLU, whose bf16 build is the one declared at 24 blocks an SM (kernels/activation.h).
  row("swiglu backward", 2.5 * n * e, shape,
      [&] { kernels::glu_backward<T>(exec, kernels::Activation::kSilu, x.get(), dy.get(), y.get(), rows, cols / 2); });
  row("reglu backward", 2.5 * n * e, shape,
      [&] { kernels::glu_backward<T>(exec, kernels::Activation::kRelu, x.get(), dy.get(), y.get(), rows, cols / 2); });
  row("add", 3 * n * e, shape, [&] { kernels::add<T>(exec, x.get(), dy.get(), y.get(), n); });
  {
    // RoPE in place on fused rows of 32 heads of 128 (the tables stay in cache: 2 n e).
    const int64_t heads = cols / 128, dh = 128, seq = std::min<int64_t>(rows, 4096);
    std::vector<A> cs(static_cast<size_t>(seq * dh / 2)), sn(cs.size());
    for (size_t i = 0; i < cs.size(); ++i) {
      cs[i] = static_cast<A>(std::cos(0.001 * static_cast<double>(i)));
      sn[i] = static_cast<A>(std::sin(0.001 * static_cast<double>(i)));
    }
    Buf<A> dcos(cs), dsin(sn);
    row("rope (in place)", 2 * n * e, shape, [&] {
      kernels::rope_apply<T>(exec, x.get(), rows, seq, heads, dh, heads * dh, dcos.get(), dsin.get(),
                             kernels::RopeLayout::kHalf, false);
    });
  }
  {
    // AdamW: reads p, g, m, v, writes p, m, v (moments in float).
    Buf<A> m(std::vector<A>(static_cast<size_t>(n), A(0))), v(std::vector<A>(static_cast<size_t>(n), A(0)));
    const kernels::AdamWStep step{1e-4, 0.9, 0.95, 1e-8, 1e-5, 10, 1.0};
    row("adamw", (3 * e + 4.0 * sizeof(A)) * static_cast<double>(n), std::to_string(n) + " params",
        [&] { kernels::adamw_update<T>(exec, y.get(), dy.get(), m.get(), v.get(), n, step, nullptr); });
  }
  {
    std::vector<int32_t> targets(static_cast<size_t>(rows / 4));
    for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<int32_t>(i % static_cast<size_t>(cols * 4));
    Buf<int32_t> gt(targets);
    Buf<A> loss(rows / 4), z(rows / 4);
    row("cross_entropy fwd+bwd", 2 * n * e, std::to_string(rows / 4) + "x" + std::to_string(cols * 4), [&] {
      kernels::cross_entropy<T>(exec, x.get(), gt.get(), rows / 4, cols * 4, cols * 4, loss.get(), z.get(), y.get(),
                                1e-4, 1.0);
    });
  }
}

}  // namespace

#include "cuda_check_device.cuh"   // the CUDA-only checks and the attention rates
#include "cuda_check_flash32.cuh"  // the float32 flash attention against float64, and its rates
#include "cuda_check_wgmma.cuh"    // the bf16 wgmma flash forward, backward (sm_90a) against float64, their rates

namespace {

void list() {
  for (const char* c : {"device/facts",
                        "runtime/caching allocator",
                        "runtime/event timer and L2 flush",
                        "runtime/captured step/float",
                        "runtime/captured step/bf16",
                        "gemm/cublaslt ...",
                        "cudnn/<case>/forward",
                        "cudnn/<case>/backward",
                        "ceiling/copy",
                        "ceiling/gemm/bf16 square",
                        "ceiling/gemm/float square",
                        "ceiling/gemm/bf16 gpt2-small shapes",
                        "bandwidth/<kernel>/float",
                        "bandwidth/<kernel>/bf16",
                        "attention/flash forward",
                        "attention/flash backward",
                        "attention/flash backward heaviest first",
                        "attention/cudnn forward",
                        "attention/cudnn backward",
                        "attention/flash forward dropout 0.1",
                        "attention/flash backward dropout 0.1",
                        "attention/flash backward heaviest first dropout 0.1",
                        "flash32/<case>/forward",
                        "flash32/<case>/backward",
                        "flash32/deterministic",
                        "attention/flash f32 forward/<norms|big>",
                        "attention/flash f32 backward/<norms|big>",
                        "wgmma/<case>/forward",
                        "wgmma_ws/<case>/forward",
                        "wgmma_ws_tma/<case>/forward",
                        "wgmma_ws_keys64/<case>/forward",
                        "wgmma_ws_tma_keys64/<case>/forward",
                        "wgmma/<case>/backward",
                        "wgmma_tma/<case>/backward",
                        "wgmma_ws/<case>/backward",
                        "attention/flash wgmma forward",
                        "attention/flash wgmma ws forward",
                        "attention/flash wgmma ws tma forward",
                        "attention/flash wgmma ws forward keys 64",
                        "attention/flash wgmma ws tma forward keys 64",
                        "attention/flash wgmma backward",
                        "attention/flash wgmma backward heaviest first",
                        "attention/flash wgmma backward bulk dq",
                        "attention/flash wgmma backward tma",
                        "attention/flash wgmma backward ws",
                        "attention/flash wgmma forward dropout 0.1",
                        "attention/flash wgmma ws forward dropout 0.1",
                        "attention/flash wgmma ws tma forward dropout 0.1",
                        "attention/flash wgmma ws forward keys 64 dropout 0.1",
                        "attention/flash wgmma ws tma forward keys 64 dropout 0.1",
                        "attention/flash wgmma backward dropout 0.1",
                        "attention/flash wgmma backward heaviest first dropout 0.1",
                        "attention/flash wgmma backward bulk dq dropout 0.1",
                        "attention/flash wgmma backward tma dropout 0.1",
                        "attention/flash wgmma backward ws dropout 0.1"})
    std::printf("%s\n", c);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    const std::string part = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string md, jsonl;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "cuda_check: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend") {
      const std::string b = value();
      if (b != "cuda" && b != "cpu") {
        std::fprintf(stderr, "cuda_check: --backend is cuda or cpu, not '%s'\n", b.c_str());
        return 2;
      }
      g_setup.cuda = b == "cuda";
    } else if (a == "--small") {
      g_setup.small = true;
    } else if (a == "--only") {
      only = split(value());
    } else if (a == "--md") {
      md = value();
    } else if (a == "--json-rows") {
      jsonl = value();
    } else if (a == "--list") {
      list();
      return 0;
    } else {
      std::fprintf(stderr, "cuda_check: unknown argument '%s' (see the top of tests/cuda/cuda_check.cu)\n", a.c_str());
      return 2;
    }
  }
  test::CheckTable t("timing", md, jsonl, only);
  if (g_setup.cuda) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      t.finish("device/facts", CheckResult::skipped("no CUDA device visible"));
      return 77;
    }
    t.device_probe = kernels::cuda::sticky_error;
  }
  t.run("device/facts", device_facts);
  runtime_checks(t);
  gemm_checks(t);
  cudnn_checks(t);
  flash32_checks(t);
  copy_bandwidth(t);
  gemm_ceilings(t);
  bandwidth<float>(t);
  bandwidth<bf16>(t);
  attention_rates(t);
  flash32_rates(t);
  // Last: never run on a GPU before, so a fault (a sticky error ends the program) costs no other row.
  wgmma_checks(t);
  wgmma_rates(t);
  return t.failures() == 0 ? 0 : 1;
}
