// GPU check of the CUDA path: each tile kernel's CUDA launcher against its CPU launcher on the
// same random inputs (float and bf16 storage), the cuBLASLt GEMM and the flash attention forward
// and backward against float64 references, the runtime pieces (caching allocator, events, L2
// flush, device facts, an optimizer step captured into a CUDA graph and replayed), then the GEMM
// ceiling, the flash attention rate and the bandwidth of the row kernels at hidden 4096 against
// the device's measured copy bandwidth. Every output buffer starts as NaN. The cuDNN SDPA
// baseline (kernels/cuda/cudnn_attention.cu) is checked against the same float64 references and
// timed beside the flash kernels where libcudnn.so.9 loads (else SKIPPED, with why).
//
//   cuda_check [OUT.md [OUT.json]]     exit 0: all match, 1: a mismatch or CUDA error, 77: no GPU
//
// Standalone on purpose (CUDA runtime, cuBLASLt, libgomp, libdl and the kernel sources only; cuDNN
// is opened at run time), so that scripts/gpu-check.sh can build it with nvcc on a machine without
// the project's Debian packages.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../kernels/cuda/flash_attention.cuh"
#include "../../kernels/cuda/gemm.cuh"
#include "../../kernels/device_runtime.h"
#include "launcher_adapters.cuh"

namespace {

using namespace bench;
using kernels::acc_t;
using tile::bf16;

#define CUDA_OK(expr)                                                                               \
  do {                                                                                              \
    const auto err_ = static_cast<cudaError_t>(expr);                                               \
    if (err_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

template <class T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return tile::float_to_bf16(x);
  } else {
    return static_cast<T>(x);
  }
}
template <class T>
float to_float(T x) {
  if constexpr (std::is_same_v<T, bf16>) {
    return tile::bf16_to_float(x);
  } else {
    return static_cast<float>(x);
  }
}

template <class T>
std::vector<T> random_vec(size_t n, unsigned seed, float scale = 1.0f, float shift = 0.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<T> v(n);
  for (auto& x : v) x = from_float<T>(nd(gen) * scale + shift);
  return v;
}

/// A device copy of a host vector, copied back with `host()`.
template <class T>
class Device {
 public:
  /// n elements, poisoned: all bits set (NaN in float and bf16), so an element a kernel fails to
  /// write fails its comparison.
  explicit Device(size_t n) : n_(n) {
    CUDA_OK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)));
    CUDA_OK(cudaMemset(p_, 0xff, std::max<size_t>(n, 1) * sizeof(T)));
  }
  explicit Device(const std::vector<T>& v) : Device(v.size()) {
    CUDA_OK(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Device() { cudaFree(p_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  std::vector<T> host() const {
    std::vector<T> v(n_);
    CUDA_OK(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

struct Row {
  std::string kernel, dtype, what;
  double max_err = 0;
  double tol = 0;
  bool pass = true;
};
std::vector<Row> g_rows;

template <class A, class B>
void compare(const std::string& kernel, const std::string& dtype, const std::string& what, const std::vector<A>& cpu,
             const std::vector<B>& gpu, double atol, double rtol) {
  Row r{kernel, dtype, what, 0, rtol, cpu.size() == gpu.size()};
  for (size_t i = 0; i < cpu.size() && i < gpu.size(); ++i) {
    const double c = to_float(cpu[i]), g = to_float(gpu[i]);
    const double err = std::abs(c - g);
    if (!(err <= atol + rtol * std::abs(c))) r.pass = false;
    if (err > r.max_err || std::isnan(err)) r.max_err = std::isnan(err) ? INFINITY : err;
  }
  g_rows.push_back(r);
}

template <class T>
const char* dtype_name() {
  return std::is_same_v<T, bf16> ? "bf16" : "float";
}

// Tolerances: the executors sum in different orders; bf16 results round to 8 mantissa bits.
template <class T>
double rtol() {
  return std::is_same_v<T, bf16> ? 1.6e-2 : 2e-5;
}

template <class T>
void check_norm(bool center, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  const std::string name =
      std::string(center ? "layernorm" : "rmsnorm") + " " + std::to_string(rows) + "x" + std::to_string(cols);
  const auto x = random_vec<T>(rows * cols, 1, 2.0f, 0.5f);
  const auto w = random_vec<T>(cols, 2), b = random_vec<T>(cols, 3), dy = random_vec<T>(rows * cols, 4);
  std::vector<T> y(x.size()), dx(x.size()), dw(cols, from_float<T>(0)), db(cols, from_float<T>(0));
  std::vector<A> mean(rows), rstd(rows), ws(kernels::norm_backward_workspace(rows, cols));
  const tile::Exec cpu{};
  kernels::norm_forward<T>(cpu, center, x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), rows, cols,
                           1e-5);
  kernels::norm_backward<T>(cpu, center, dy.data(), x.data(), w.data(), mean.data(), rstd.data(), dx.data(), dw.data(),
                            db.data(), rows, cols, ws.data());
  Device<T> gx(x), gw(w), gb(b), gdy(dy), gy(x.size()), gdx(x.size()), gdw(std::vector<T>(cols, from_float<T>(0))),
      gdb(std::vector<T>(cols, from_float<T>(0)));
  Device<A> gmean(rows), grstd(rows), gws(ws.size());
  CUDA_OK(kernels::cuda::norm_forward<T>(nullptr, center, gx.get(), gw.get(), gb.get(), gy.get(), gmean.get(),
                                         grstd.get(), rows, cols, 1e-5));
  CUDA_OK(kernels::cuda::norm_backward<T>(nullptr, center, gdy.get(), gx.get(), gw.get(), gmean.get(), grstd.get(),
                                          gdx.get(), gdw.get(), gdb.get(), rows, cols, gws.get()));
  CUDA_OK(cudaDeviceSynchronize());
  compare(name, dtype_name<T>(), "y", y, gy.host(), 1e-5, rtol<T>());
  compare(name, dtype_name<T>(), "rstd", rstd, grstd.host(), 1e-6, 2e-5);
  compare(name, dtype_name<T>(), "dx", dx, gdx.host(), 1e-4, rtol<T>() * 4);
  compare(name, dtype_name<T>(), "dweight", dw, gdw.host(), 1e-3, rtol<T>() * 4);
  compare(name, dtype_name<T>(), "dbias", db, gdb.host(), 1e-3, rtol<T>() * 4);
}

template <class T>
void check_softmax(int64_t rows, int64_t cols, kernels::SoftmaxMask mask, double softcap) {
  using A = acc_t<T>;
  const std::string name = "softmax " + std::to_string(rows) + "x" + std::to_string(cols) +
                           (mask.causal ? " causal" : "") + (mask.window ? " window" : "") +
                           (softcap > 0 ? " softcap" : "");
  const auto s = random_vec<T>(rows * cols, 5, 3.0f), dp = random_vec<T>(rows * cols, 6);
  std::vector<T> p(s.size()), ds(s.size());
  std::vector<A> rmax(rows);
  const tile::Exec cpu{};
  kernels::softmax_forward<T>(cpu, s.data(), p.data(), rows, cols, cols, 0.125, softcap, mask, rmax.data());
  kernels::softmax_backward<T>(cpu, p.data(), dp.data(), s.data(), ds.data(), rows, cols, cols, 0.125, softcap, mask);
  Device<T> gs(s), gdp(dp), gp(s.size()), gds(s.size());
  Device<A> grmax(rows);
  CUDA_OK(kernels::cuda::softmax_forward<T>(nullptr, gs.get(), gp.get(), rows, cols, cols, 0.125, softcap, mask,
                                            grmax.get()));
  CUDA_OK(kernels::cuda::softmax_backward<T>(nullptr, gp.get(), gdp.get(), gs.get(), gds.get(), rows, cols, cols, 0.125,
                                             softcap, mask));
  CUDA_OK(cudaDeviceSynchronize());
  compare(name, dtype_name<T>(), "p", p, gp.host(), 1e-6, rtol<T>());
  compare(name, dtype_name<T>(), "row max", rmax, grmax.host(), 1e-6, 1e-6);
  compare(name, dtype_name<T>(), "ds", ds, gds.host(), 1e-6, rtol<T>() * 4);
}

/// ld > vocab: a padded vocabulary (the padding holds large logits the kernel must not read; its
/// gradient must come back 0, compared with the CPU's).
template <class T>
void check_cross_entropy(int64_t rows, int64_t vocab, int64_t ld) {
  using A = acc_t<T>;
  const std::string name =
      "cross_entropy " + std::to_string(rows) + "x" + std::to_string(vocab) + " ld " + std::to_string(ld);
  auto logits = random_vec<T>(rows * ld, 7, 2.0f, 5.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t v = vocab; v < ld; ++v) logits[static_cast<size_t>(i * ld + v)] = from_float<T>(50.0f);
  std::vector<int32_t> targets(rows);
  for (int64_t i = 0; i < rows; ++i) targets[i] = static_cast<int32_t>((i * 7919) % vocab);
  targets[0] = -1;  // ignored
  std::vector<A> loss(rows), z(rows);
  std::vector<T> dl(logits.size());
  kernels::cross_entropy<T>(tile::Exec{}, logits.data(), targets.data(), rows, vocab, ld, loss.data(), z.data(),
                            dl.data(), 1e-4, 1.0 / rows);
  Device<T> gl(logits), gdl(logits.size());
  Device<int32_t> gt(targets);
  Device<A> gloss(rows), gz(rows);
  CUDA_OK(kernels::cuda::cross_entropy<T>(nullptr, gl.get(), gt.get(), rows, vocab, ld, gloss.get(), gz.get(),
                                          gdl.get(), 1e-4, 1.0 / rows));
  CUDA_OK(cudaDeviceSynchronize());
  compare(name, dtype_name<T>(), "loss", loss, gloss.host(), 1e-4, 2e-5);
  compare(name, dtype_name<T>(), "z", z, gz.host(), 1e-4, 2e-5);
  compare(name, dtype_name<T>(), "dlogits", dl, gdl.host(), 1e-7, rtol<T>() * 4);
}

template <class T>
void check_rope(kernels::RopeLayout layout) {
  using A = acc_t<T>;
  const int64_t batch = 3, seq = 37, heads = 5, dh = 64, stride = heads * dh + 8;
  const std::string name = std::string("rope ") + (layout == kernels::RopeLayout::kHalf ? "half" : "interleaved");
  std::vector<A> cos(seq * dh / 2), sin(cos.size());
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t i = 0; i < dh / 2; ++i) {
      const double a = t * std::pow(10000.0, -2.0 * i / dh);
      cos[t * dh / 2 + i] = static_cast<A>(std::cos(a));
      sin[t * dh / 2 + i] = static_cast<A>(std::sin(a));
    }
  auto x = random_vec<T>(batch * seq * stride, 8);
  Device<T> gx(x);
  Device<A> gc(cos), gs(sin);
  for (bool inverse : {false, true}) {
    kernels::rope_apply<T>(tile::Exec{}, x.data(), batch * seq, seq, heads, dh, stride, cos.data(), sin.data(), layout,
                           inverse);
    CUDA_OK(kernels::cuda::rope_apply<T>(nullptr, gx.get(), batch * seq, seq, heads, dh, stride, gc.get(), gs.get(),
                                         layout, inverse));
    CUDA_OK(cudaDeviceSynchronize());
    compare(name, dtype_name<T>(), inverse ? "x rotated back" : "x rotated", x, gx.host(), 1e-6, rtol<T>());
  }
}

template <class T>
void check_glu(kernels::Activation act, const char* act_name) {
  const int64_t rows = 129, d_ff = 1000;
  const std::string name = std::string("glu ") + act_name;
  const auto gu = random_vec<T>(rows * 2 * d_ff, 9), dh = random_vec<T>(rows * d_ff, 10);
  std::vector<T> h(rows * d_ff), dgu(gu.size());
  kernels::glu_forward<T>(tile::Exec{}, act, gu.data(), h.data(), rows, d_ff);
  kernels::glu_backward<T>(tile::Exec{}, act, gu.data(), dh.data(), dgu.data(), rows, d_ff);
  Device<T> ggu(gu), gdh(dh), gh(h.size()), gdgu(gu.size());
  CUDA_OK(kernels::cuda::glu_forward<T>(nullptr, act, ggu.get(), gh.get(), rows, d_ff));
  CUDA_OK(kernels::cuda::glu_backward<T>(nullptr, act, ggu.get(), gdh.get(), gdgu.get(), rows, d_ff));
  CUDA_OK(cudaDeviceSynchronize());
  compare(name, dtype_name<T>(), "h", h, gh.host(), 1e-6, rtol<T>());
  compare(name, dtype_name<T>(), "dgu", dgu, gdgu.host(), 1e-6, rtol<T>());
}

template <class T>
void check_activation(kernels::Activation act, const char* act_name) {
  const int64_t n = 129 * 1000 + 3;  // not a multiple of the vector width
  const std::string name = std::string("activation ") + act_name;
  const auto x = random_vec<T>(n, 11), dy = random_vec<T>(n, 12);
  std::vector<T> y(n), dx(n);
  kernels::activation_forward<T>(tile::Exec{}, act, x.data(), y.data(), n);
  kernels::activation_backward<T>(tile::Exec{}, act, x.data(), dy.data(), dx.data(), n);
  Device<T> gx(x), gdy(dy), gy(n), gdx(n);
  CUDA_OK(kernels::cuda::activation_forward<T>(nullptr, act, gx.get(), gy.get(), n));
  CUDA_OK(kernels::cuda::activation_backward<T>(nullptr, act, gx.get(), gdy.get(), gdx.get(), n));
  CUDA_OK(cudaDeviceSynchronize());
  compare(name, dtype_name<T>(), "y", y, gy.host(), 1e-6, rtol<T>());
  compare(name, dtype_name<T>(), "dx", dx, gdx.host(), 1e-6, rtol<T>());
}

template <class T>
void check_softcap() {
  const int64_t n = 4 * 50257;  // a few rows of GPT-2 logits
  const double cap = 30.0;
  const auto x = random_vec<T>(n, 13, 60.0f);  // many beyond the cap
  const auto dy = random_vec<T>(n, 14);
  std::vector<T> y(n), dx(n);
  kernels::softcap_forward<T>(tile::Exec{}, x.data(), y.data(), n, cap);
  kernels::softcap_backward<T>(tile::Exec{}, y.data(), dy.data(), dx.data(), n, cap);
  Device<T> gx(x), gdy(dy), gy(n), gdx(n);
  CUDA_OK(kernels::cuda::softcap_forward<T>(nullptr, gx.get(), gy.get(), n, cap));
  CUDA_OK(kernels::cuda::softcap_backward<T>(nullptr, gy.get(), gdy.get(), gdx.get(), n, cap));
  CUDA_OK(cudaDeviceSynchronize());
  compare("softcap", dtype_name<T>(), "y", y, gy.host(), 1e-5, rtol<T>());
  compare("softcap", dtype_name<T>(), "dx", dx, gdx.host(), 1e-6, rtol<T>());
}

template <class T>
void check_adamw_and_elementwise() {
  using A = acc_t<T>;
  const int64_t n = 1'000'003;
  auto p = random_vec<T>(n, 11), g = random_vec<T>(n, 12);
  std::vector<A> m(n, 0.01f), v(n, 0.02f);
  Device<T> gp(p), gg(g);
  Device<A> gm(m), gv(v);
  for (int64_t step = 1; step <= 3; ++step) {
    const kernels::AdamWStep s{1e-3, 0.9, 0.95, 1e-8, 1e-4, step, 0.5};
    kernels::adamw_update<T>(tile::Exec{}, p.data(), g.data(), m.data(), v.data(), n, s);
    CUDA_OK(kernels::cuda::adamw_update<T>(nullptr, gp.get(), gg.get(), gm.get(), gv.get(), n, s, nullptr));
  }
  CUDA_OK(cudaDeviceSynchronize());
  compare("adamw 3 steps", dtype_name<T>(), "p", p, gp.host(), 1e-6, rtol<T>());
  compare("adamw 3 steps", dtype_name<T>(), "v", v, gv.host(), 1e-9, 1e-5);
  if constexpr (std::is_same_v<T, bf16>) {
    // Master weights (the bf16 model's optimizer): the float copy against the CPU's, and the
    // bf16 parameters its rounding on both.
    std::vector<A> master(n), m2(n, 0.01f), v2(n, 0.02f);
    for (int64_t i = 0; i < n; ++i) master[static_cast<size_t>(i)] = to_float(p[static_cast<size_t>(i)]) + 1e-4f;
    Device<A> gmaster(master), gm2(m2), gv2(v2);
    for (int64_t step = 1; step <= 3; ++step) {
      const kernels::AdamWStep s{1e-5, 0.9, 0.95, 1e-8, 0, step, 1.0};
      kernels::adamw_update<T>(tile::Exec{}, p.data(), g.data(), m2.data(), v2.data(), n, s, master.data());
      CUDA_OK(kernels::cuda::adamw_update<T>(nullptr, gp.get(), gg.get(), gm2.get(), gv2.get(), n, s, gmaster.get()));
    }
    CUDA_OK(cudaDeviceSynchronize());
    compare("adamw master", "bf16", "master", master, gmaster.host(), 1e-7, 1e-6);
    compare("adamw master", "bf16", "p", p, gp.host(), 0, 1.0 / 128);  // one ulp: FMA contraction may differ
  }

  std::vector<T> sum(n);
  kernels::add<T>(tile::Exec{}, p.data(), g.data(), sum.data(), n);
  Device<T> gsum(n);
  CUDA_OK(kernels::cuda::add<T>(nullptr, gp.get(), gg.get(), gsum.get(), n));
  const double ss = kernels::sum_squares<T>(tile::Exec{}, g.data(), n);
  Device<double> part(kernels::sum_squares_partials(n)), result(1);
  CUDA_OK(kernels::cuda::sum_squares<T>(nullptr, gg.get(), n, part.get(), result.get()));
  CUDA_OK(cudaDeviceSynchronize());
  compare("add", dtype_name<T>(), "out", sum, gsum.host(), 1e-6, rtol<T>());
  compare("sum_squares", dtype_name<T>(), "sum", std::vector<double>{ss}, result.host(), 0, 1e-6);
}

// --- bandwidth -------------------------------------------------------------------------------

struct Timing {
  std::string kernel, dtype, shape;
  double ms = 0, gbps = 0;
};
std::vector<Timing> g_timings;

/// Median of `reps` timed launches, each after an L2 flush (a 256 MiB memset).
double time_ms(const std::function<void()>& launch, int reps = 20) {
  static char* flush = nullptr;
  const size_t flush_bytes = 256u << 20;
  if (flush == nullptr) CUDA_OK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t a, b;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    CUDA_OK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
    CUDA_OK(cudaEventRecord(a));
    launch();
    CUDA_OK(cudaEventRecord(b));
    CUDA_OK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CUDA_OK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class T>
void bandwidth() {
  using A = acc_t<T>;
  const int64_t rows = 16384, cols = 4096, n = rows * cols;
  const double e = sizeof(T);
  Device<T> x(random_vec<T>(n, 21)), y(n), dy(random_vec<T>(n, 22)), w(random_vec<T>(cols, 23));
  Device<A> mean(rows), rstd(rows), ws(kernels::norm_backward_workspace(rows, cols));
  const std::string shape = "16384x4096";
  auto add_row = [&](const std::string& k, double ms, double bytes) {
    g_timings.push_back({k, dtype_name<T>(), shape, ms, bytes / (ms * 1e-3) * 1e-9});
  };
  add_row("rmsnorm forward", time_ms([&] {
            CUDA_OK(kernels::cuda::norm_forward<T>(nullptr, false, x.get(), w.get(), nullptr, y.get(), nullptr,
                                                   rstd.get(), rows, cols, 1e-6));
          }),
          2 * n * e);
  add_row("rmsnorm backward", time_ms([&] {
            CUDA_OK(kernels::cuda::norm_backward<T>(nullptr, false, dy.get(), x.get(), w.get(), mean.get(), rstd.get(),
                                                    y.get(), nullptr, nullptr, rows, cols, ws.get()));
          }),
          3 * n * e);
  add_row("layernorm forward", time_ms([&] {
            CUDA_OK(kernels::cuda::norm_forward<T>(nullptr, true, x.get(), w.get(), w.get(), y.get(), mean.get(),
                                                   rstd.get(), rows, cols, 1e-5));
          }),
          2 * n * e);
  add_row("softmax forward", time_ms([&] {
            CUDA_OK(kernels::cuda::softmax_forward<T>(nullptr, x.get(), y.get(), rows, cols, cols, 1.0, 0.0,
                                                      kernels::SoftmaxMask{false, 0, 0}, nullptr));
          }),
          2 * n * e);
  add_row(
      "swiglu forward", time_ms([&] {
        CUDA_OK(kernels::cuda::glu_forward<T>(nullptr, kernels::Activation::kSilu, x.get(), y.get(), rows, cols / 2));
      }),
      1.5 * n * e);
  add_row("add", time_ms([&] { CUDA_OK(kernels::cuda::add<T>(nullptr, x.get(), dy.get(), y.get(), n)); }), 3 * n * e);
  {
    // RoPE on the Q and K heads of fused rows: 16384 tokens of 32 heads of 128, half layout.
    const int64_t seq = 4096, heads = 32, dh = 128;
    std::vector<A> cs(static_cast<size_t>(seq * dh / 2)), sn(cs.size());
    for (size_t i = 0; i < cs.size(); ++i) {
      cs[i] = static_cast<A>(std::cos(0.001 * static_cast<double>(i)));
      sn[i] = static_cast<A>(std::sin(0.001 * static_cast<double>(i)));
    }
    Device<A> dcos(cs), dsin(sn);
    g_timings.push_back({"rope (in place)", dtype_name<T>(), "16384x32x128", 0, 0});
    const double ms = time_ms([&] {
      CUDA_OK(kernels::cuda::rope_apply<T>(nullptr, x.get(), rows, seq, heads, dh, heads * dh, dcos.get(), dsin.get(),
                                           kernels::RopeLayout::kHalf, false));
    });
    g_timings.back().ms = ms;
    g_timings.back().gbps = 2 * n * e / (ms * 1e-3) * 1e-9;  // the tables stay in L2
  }
  {
    // AdamW over 64M parameters: reads p, g, m, v, writes p, m, v (moments in float).
    Device<A> m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
    CUDA_OK(cudaMemset(m.get(), 0, static_cast<size_t>(n) * sizeof(A)));
    CUDA_OK(cudaMemset(v.get(), 0, static_cast<size_t>(n) * sizeof(A)));
    const kernels::AdamWStep step{1e-4, 0.9, 0.95, 1e-8, 1e-5, 10, 1.0};
    g_timings.push_back({"adamw", dtype_name<T>(), "64M params", 0, 0});
    const double ms = time_ms([&] {
      CUDA_OK(kernels::cuda::adamw_update<T>(nullptr, y.get(), dy.get(), m.get(), v.get(), n, step, nullptr));
    });
    g_timings.back().ms = ms;
    g_timings.back().gbps = (3 * e + 4.0 * sizeof(A)) * static_cast<double>(n) / (ms * 1e-3) * 1e-9;
  }
  std::vector<int32_t> targets(rows / 4);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<int32_t>(i % 32768);
  Device<int32_t> gt(targets);
  Device<A> loss(rows / 4), z(rows / 4);
  g_timings.push_back({"cross_entropy fwd+bwd", dtype_name<T>(), "4096x16384", 0, 0});
  {
    const double ms = time_ms([&] {
      CUDA_OK(kernels::cuda::cross_entropy<T>(nullptr, x.get(), gt.get(), rows / 4, cols * 4, cols * 4, loss.get(),
                                              z.get(), y.get(), 1e-4, 1.0));
    });
    g_timings.back().ms = ms;
    g_timings.back().gbps = 2 * n * e / (ms * 1e-3) * 1e-9;
  }
}

double copy_bandwidth() {
  const size_t bytes = 1u << 30;
  char *a, *b;
  CUDA_OK(cudaMalloc(&a, bytes));
  CUDA_OK(cudaMalloc(&b, bytes));
  CUDA_OK(cudaMemset(a, 1, bytes));
  const double ms = time_ms([&] { CUDA_OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, 10);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) * 1e-9;
}

/// The runtime pieces: the caching allocator on cudaMalloc reaches the driver only in the first of
/// 20 identical steps; event timing and the L2 flush work; the device facts are sane.
void check_runtime() {
  kernels::CachingAllocator alloc(kernels::cuda::make_cuda_backend(0));
  const std::vector<size_t> sizes = {size_t{64} << 20, 4096, size_t{3} << 20, 777, size_t{64} << 20};
  int64_t first = 0;
  for (int step = 0; step < 20; ++step) {
    std::vector<void*> blocks;
    for (const size_t n : sizes) {
      blocks.push_back(alloc.allocate(n));
      CUDA_OK(cudaMemsetAsync(blocks.back(), step, n));
    }
    CUDA_OK(cudaDeviceSynchronize());
    for (void* b : blocks) alloc.free(b);
    if (step == 0) first = alloc.stats().backend_allocs;
  }
  const auto st = alloc.stats();
  g_rows.push_back({"caching allocator", "-", "cudaMalloc calls after step 1 (of 20)",
                    static_cast<double>(st.backend_allocs - first), 0, st.backend_allocs == first});
  kernels::cuda::EventTimer timer;
  kernels::cuda::L2Flusher flusher(0);
  timer.start();
  flusher.flush();
  const double ms = timer.stop_ms();
  const double gbps = static_cast<double>(flusher.bytes()) / (ms * 1e-3) * 1e-9;
  g_rows.push_back({"L2 flush (event-timed memset)", "-", "GB/s written", gbps, 0, ms > 0 && gbps < 20000});
  const kernels::cuda::DeviceFacts f = kernels::cuda::describe_device(0);
  g_rows.push_back({"device facts", "-", "measured D2D copy GB/s", f.copy_gbps, 0,
                    f.sm_count > 0 && f.memory_bytes > 0 && f.copy_gbps > 100 && f.copy_gbps < 20000});
}

/// The capturable optimizer step (what cuda_graph = true replays): the gradients' sum of squares
/// into device memory (sum_of_into's program pair), adamw_scalars (step count, clip factor, bias
/// corrections) and adamw_update reading them from AdamWStep::state, captured once into a
/// StepGraph on this thread's stream and replayed three times, against three CPU steps of the
/// same launchers: the step count, the clip factor and the parameters (bf16 with master weights).
template <class T>
void check_captured_step() {
  using A = acc_t<T>;
  const int64_t n = 300'007;
  const int64_t parts = kernels::sum_squares_partials(n);
  auto p = random_vec<T>(n, 21), g = random_vec<T>(n, 22);  // |g| ~ sqrt(n): the clip at 1 acts
  std::vector<A> m(n, 0.0f), v(n, 0.0f), master(n);
  for (int64_t i = 0; i < n; ++i) master[static_cast<size_t>(i)] = to_float(p[static_cast<size_t>(i)]);
  A* const cpu_master = std::is_same_v<T, bf16> ? master.data() : nullptr;
  std::vector<double> state(kernels::kAdamStateSize, 0.0), partial(static_cast<size_t>(parts));
  const auto step_of = [](const double* st) { return kernels::AdamWStep{1e-3, 0.9, 0.95, 1e-8, 1e-4, 0, 1.0, st}; };
  Device<T> gp(p), gg(g);
  Device<A> gm(m), gv(v), gmaster(master);
  Device<double> gstate(std::vector<double>(kernels::kAdamStateSize, 0.0)), gpartial(static_cast<size_t>(parts));
  A* const dev_master = std::is_same_v<T, bf16> ? gmaster.get() : nullptr;
  for (int replay = 0; replay < 3; ++replay) {
    kernels::sum_of_into<T>(tile::Exec{}, kernels::SumOf::kSquares, g.data(), n, partial.data(),
                            state.data() + kernels::kAdamSumSquares);
    kernels::adamw_scalars(tile::Exec{}, state.data(), 0.9, 0.95, 1.0);
    kernels::adamw_update<T>(tile::Exec{}, p.data(), g.data(), m.data(), v.data(), n, step_of(state.data()),
                             cpu_master);
  }
  auto* stream = static_cast<cudaStream_t>(kernels::cuda::thread_stream());
  kernels::cuda::StepGraph graph(stream);
  auto enqueue = [&] {
    CUDA_OK(kernels::cuda::sum_of<T>(stream, kernels::SumOf::kSquares, gg.get(), n, gpartial.get(),
                                     gstate.get() + kernels::kAdamSumSquares));
    CUDA_OK(kernels::cuda::adamw_scalars(stream, gstate.get(), 0.9, 0.95, 1.0));
    CUDA_OK(kernels::cuda::adamw_update<T>(stream, gp.get(), gg.get(), gm.get(), gv.get(), n, step_of(gstate.get()),
                                           dev_master));
  };
  bool captured = true;
  try {
    graph.capture(enqueue);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "StepGraph: %s\n", e.what());
    captured = false;
  }
  g_rows.push_back({"captured step (StepGraph)", dtype_name<T>(), "graph nodes (expect 4)",
                    static_cast<double>(graph.nodes()), 0, captured && graph.nodes() == 4});
  if (!captured) return;
  for (int replay = 0; replay < 3; ++replay) graph.launch();
  CUDA_OK(cudaStreamSynchronize(stream));
  const std::vector<double> got = gstate.host();
  g_rows.push_back({"captured step (StepGraph)", dtype_name<T>(), "step count after 3 replays", got[kernels::kAdamStep],
                    0, got[kernels::kAdamStep] == 3.0});
  compare("captured step (StepGraph)", dtype_name<T>(), "clip factor",
          std::vector<double>{state[kernels::kAdamGradScale]}, std::vector<double>{got[kernels::kAdamGradScale]}, 0,
          1e-9);
  compare("captured step (StepGraph)", dtype_name<T>(), "p", p, gp.host(), 1e-6, rtol<T>());
  if constexpr (std::is_same_v<T, bf16>)
    compare("captured step (StepGraph)", "bf16", "master", master, gmaster.host(), 1e-7, 1e-5);
}

/// cuBLASLt through kernels::cuda::Gemm against a float64 product of the same (stored) inputs.
template <class T>
void check_gemm(kernels::cuda::Gemm& g, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                kernels::cuda::Epilogue epi = kernels::cuda::Epilogue::kNone, int64_t offset = 0) {
  using kernels::cuda::Epilogue;
  const int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
  const auto a = random_vec<T>(static_cast<size_t>(m * k), 11), b = random_vec<T>(static_cast<size_t>(k * n), 12);
  const auto bias = random_vec<T>(static_cast<size_t>(n), 13), c0 = random_vec<T>(static_cast<size_t>(m * n), 14);
  // With `offset`, A, B and C start that many elements into their buffers: pointers less aligned
  // than cuBLASLt's default assumption (256 bytes), as views into a model's buffers are.
  auto shifted = [&](const std::vector<T>& v) {
    std::vector<T> s(static_cast<size_t>(offset), from_float<T>(0.f));
    s.insert(s.end(), v.begin(), v.end());
    return s;
  };
  Device<T> da(shifted(a)), db(shifted(b)), dbias(bias), dc(shifted(c0));
  const float alpha = 0.5f, beta = 0.25f;
  g.run<T>(ta, tb, m, n, k, alpha, da.get() + offset, lda, db.get() + offset, ldb, beta, dc.get() + offset, ldc,
           nullptr, epi, epi == Epilogue::kNone ? nullptr : dbias.get());
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<double> ref(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += static_cast<double>(to_float(ta ? a[p * lda + i] : a[i * lda + p])) *
               static_cast<double>(to_float(tb ? b[j * ldb + p] : b[p * ldb + j]));
      double r = alpha * sum + beta * to_float(c0[i * ldc + j]);
      if (epi != Epilogue::kNone) r += to_float(bias[j]);
      if (epi == Epilogue::kReluBias) r = std::max(r, 0.0);
      if (epi == Epilogue::kGeluBias) r = 0.5 * r * (1 + std::tanh(0.7978845608028654 * (r + 0.044715 * r * r * r)));
      ref[i * n + j] = r;
    }
  const char* epi_name = epi == Epilogue::kNone       ? ""
                         : epi == Epilogue::kBias     ? " +bias"
                         : epi == Epilogue::kReluBias ? " +bias relu"
                                                      : " +bias gelu";
  const std::string what = std::string(ta ? "A^T" : "A") + (tb ? " B^T " : " B ") + std::to_string(m) + "x" +
                           std::to_string(n) + "x" + std::to_string(k) + epi_name +
                           (offset > 0 ? " at +" + std::to_string(offset) + " elements" : "");
  std::vector<T> got = dc.host();
  got.erase(got.begin(), got.begin() + offset);
  // float computes in float (no TF32); bf16 rounds its output to 8 bits of mantissa.
  if constexpr (std::is_same_v<T, float>)
    compare("gemm (cuBLASLt)", dtype_name<T>(), what, ref, got, 1e-3, 1e-4);
  else
    compare("gemm (cuBLASLt)", dtype_name<T>(), what, ref, got, 2e-2, 8e-3);
}

/// TFLOP/s of an n^3 GEMM: the ceiling MFU is measured against.
template <class T>
double gemm_tflops(kernels::cuda::Gemm& g, int64_t n) {
  const auto a = random_vec<T>(static_cast<size_t>(n * n), 21), b = random_vec<T>(static_cast<size_t>(n * n), 22);
  Device<T> da(a), db(b), dc(static_cast<size_t>(n * n));
  const double ms =
      time_ms([&] { g.run<T>(false, false, n, n, n, 1.f, da.get(), n, db.get(), n, 0.f, dc.get(), n, nullptr); }, 10);
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / (ms * 1e-3) * 1e-12;
}

/// The log-sum-exp of each query's logits [B, H, T] (what the flash forward's lse and cuDNN's stats
/// hold), from the float64 reference's rows.
std::vector<double> lse_reference(const kernels::AttentionArgs& a, const std::vector<double>& qkv64) {
  std::vector<double> lse(static_cast<size_t>(a.batch * a.n_heads * a.seq)), l, p;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.n_heads; ++h)
      for (int64_t i = 0; i < a.seq; ++i) {
        int64_t lo = 0, hi = 0;
        const double m = kernels::attention_reference_row(a, qkv64, b, h, i, l, p, lo, hi);
        double z = 0;
        for (int64_t j = lo; j < hi; ++j) z += std::exp(l[static_cast<size_t>(j)] - m);
        lse[static_cast<size_t>((b * a.n_heads + h) * a.seq + i)] = m + std::log(z);
      }
  return lse;
}

/// The flash attention forward against the float64 reference of kernels/attention.h on the same
/// bf16 inputs: output, max logit and log-sum-exp per query.
void check_flash(kernels::AttentionArgs a, const std::string& name) {
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * a.d_head;
  const auto qkv = random_vec<bf16>(static_cast<size_t>(a.batch * a.seq * width), 31);
  std::vector<double> qkv64(qkv.size());
  for (size_t i = 0; i < qkv.size(); ++i) qkv64[i] = to_float(qkv[i]);
  std::vector<double> out_ref, max_ref;
  kernels::attention_forward_reference(a, qkv64, out_ref, &max_ref);
  const std::vector<double> lse_ref = lse_reference(a, qkv64);
  Device<bf16> d_qkv(qkv), d_out(out_ref.size());
  Device<float> d_max(max_ref.size()), d_lse(max_ref.size());
  CUDA_OK(kernels::cuda::flash_attention_forward(nullptr, a, d_qkv.get(), d_out.get(), d_max.get(), d_lse.get()));
  CUDA_OK(cudaDeviceSynchronize());
  compare("flash attention", "bf16", name + " out", out_ref, d_out.host(), 2e-2, 2e-2);
  compare("flash attention", "bf16", name + " max logit", max_ref, d_max.host(), 1e-3, 1e-3);
  compare("flash attention", "bf16", name + " lse", lse_ref, d_lse.host(), 1e-3, 1e-3);
}

/// The flash attention backward against the float64 backward reference of kernels/attention.h
/// on the same bf16 inputs (qkv, dout), from the flash forward's own out and lse: dQ, dK, dV.
void check_flash_backward(kernels::AttentionArgs a, const std::string& name) {
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * a.d_head;
  const auto qkv = random_vec<bf16>(static_cast<size_t>(a.batch * a.seq * width), 33);
  const auto dout = random_vec<bf16>(static_cast<size_t>(a.batch * a.seq * a.n_heads * a.d_head), 34);
  std::vector<double> qkv64(qkv.size()), dout64(dout.size()), ref;
  for (size_t i = 0; i < qkv.size(); ++i) qkv64[i] = to_float(qkv[i]);
  for (size_t i = 0; i < dout.size(); ++i) dout64[i] = to_float(dout[i]);
  kernels::attention_backward_reference(a, qkv64, dout64, ref);
  Device<bf16> d_qkv(qkv), d_dout(dout), d_out(dout.size()), d_dqkv(qkv.size());
  Device<float> d_lse(static_cast<size_t>(a.batch * a.n_heads * a.seq));
  Device<char> work(kernels::cuda::flash_attention_backward_workspace(a));
  CUDA_OK(kernels::cuda::flash_attention_forward(nullptr, a, d_qkv.get(), d_out.get(), nullptr, d_lse.get()));
  CUDA_OK(kernels::cuda::flash_attention_backward(nullptr, a, d_qkv.get(), d_out.get(), d_dout.get(), d_lse.get(),
                                                  d_dqkv.get(), work.get()));
  CUDA_OK(cudaDeviceSynchronize());
  // bf16 P, dS and dO on the tensor cores and bf16 outputs: about 1% of the largest gradients.
  double scale = 0;
  for (const double v : ref) scale = std::max(scale, std::abs(v));
  compare("flash attention bwd", "bf16", name + " dqkv", ref, d_dqkv.host(), 2e-2 * scale, 3e-2);
}

/// The variants both flash checks run: MHA, GQA with a window, MQA non-causal with a soft-cap,
/// a long MHA with a soft-cap, GQA with dropout; d_head 64 and 128, lengths that are not
/// multiples of the tiles.
std::vector<std::pair<kernels::AttentionArgs, std::string>> flash_cases() {
  std::vector<std::pair<kernels::AttentionArgs, std::string>> cases;
  kernels::AttentionArgs a{2, 257, 4, 4, 64, 0.125};
  cases.emplace_back(a, "MHA T=257 dh=64");
  a = {1, 300, 8, 2, 128, 1.0 / std::sqrt(128.0)};
  a.window = 100;
  cases.emplace_back(a, "GQA 8/2 T=300 dh=128 window=100");
  a = {2, 128, 4, 1, 64, 0.5};
  a.causal = false;
  a.softcap = 5;
  cases.emplace_back(a, "MQA non-causal dh=64 softcap=5");
  a = {1, 1000, 2, 2, 128, 1.0 / std::sqrt(128.0)};
  a.softcap = 30;
  cases.emplace_back(a, "MHA T=1000 dh=128 softcap=30");
  a = {2, 200, 4, 2, 64, 0.125};
  a.dropout = 0.1;
  a.dropout_seed = 5;
  cases.emplace_back(a, "GQA 4/2 T=200 dh=64 dropout=0.1");
  return cases;
}

/// The model's attention on CUDA (kernels/cuda/attention.cu: cuBLASLt products and the softmax and
/// dropout programs, the CPU launcher's algorithm with T x T probabilities; or, for bf16 without
/// `materialize`, the flash kernels where attention_uses_flash says so, with lse and workspace in
/// the probs buffer) on the flash cases, against the float64 references: out, max logit, then
/// dqkv.
template <class T>
void check_attention(kernels::AttentionArgs a, const std::string& name, bool materialize) {
  a.materialize = materialize;
  const std::string path =
      std::is_same_v<T, bf16> && kernels::attention_uses_flash(a) ? "attention (model, flash)" : "attention (cuBLASLt)";
  using A = acc_t<T>;
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * a.d_head;
  const auto qkv = random_vec<T>(static_cast<size_t>(a.batch * a.seq * width), 35);
  const auto dout = random_vec<T>(static_cast<size_t>(a.batch * a.seq * a.n_heads * a.d_head), 36);
  std::vector<double> qkv64(qkv.size()), dout64(dout.size()), out_ref, max_ref, dqkv_ref;
  for (size_t i = 0; i < qkv.size(); ++i) qkv64[i] = to_float(qkv[i]);
  for (size_t i = 0; i < dout.size(); ++i) dout64[i] = to_float(dout[i]);
  kernels::attention_forward_reference(a, qkv64, out_ref, &max_ref);
  kernels::attention_backward_reference(a, qkv64, dout64, dqkv_ref);
  Device<T> d_qkv(qkv), d_dout(dout), d_out(out_ref.size()), d_dqkv(qkv.size());
  Device<T> probs(static_cast<size_t>(kernels::attention_probs_size(a)));
  Device<T> work(static_cast<size_t>(kernels::attention_workspace_size(a)));
  Device<A> d_max(max_ref.size());
  kernels::cuda::attention_forward<T>(nullptr, a, d_qkv.get(), d_out.get(), probs.get(), d_max.get(), work.get());
  kernels::cuda::attention_backward<T>(nullptr, a, d_qkv.get(), d_out.get(), probs.get(), d_dout.get(), d_dqkv.get(),
                                       work.get());
  CUDA_OK(cudaDeviceSynchronize());
  const bool half = std::is_same_v<T, bf16>;
  double scale = 0;
  for (const double v : dqkv_ref) scale = std::max(scale, std::abs(v));
  compare(path, dtype_name<T>(), name + " out", out_ref, d_out.host(), half ? 2e-2 : 1e-4, half ? 2e-2 : 1e-4);
  compare(path, dtype_name<T>(), name + " max logit", max_ref, d_max.host(), half ? 2e-2 : 1e-4, half ? 2e-2 : 1e-4);
  compare(path + " bwd", dtype_name<T>(), name + " dqkv", dqkv_ref, d_dqkv.host(), (half ? 2e-2 : 1e-4) * scale,
          half ? 3e-2 : 1e-4);
  if (!materialize) {  // the entropy recomputed from qkv (the flash path's probe), once per case and dtype
    std::vector<double> ent_ref;
    kernels::attention_entropy_reference(a, qkv64, ent_ref);
    Device<A> d_ent(ent_ref.size());
    CUDA_OK(kernels::cuda::attention_entropy<T>(nullptr, a, d_qkv.get(), d_ent.get()));
    CUDA_OK(cudaDeviceSynchronize());
    compare("attention entropy", dtype_name<T>(), name, ent_ref, d_ent.host(), 1e-4, 1e-4);
    // The row max recomputed from qkv (the cuDNN baseline's max-logit probe), on poisoned output.
    Device<A> d_rmax(max_ref.size());
    CUDA_OK(kernels::cuda::attention_row_max<T>(nullptr, a, d_qkv.get(), d_rmax.get()));
    CUDA_OK(cudaDeviceSynchronize());
    compare("attention row max", dtype_name<T>(), name, max_ref, d_rmax.host(), 1e-4, 1e-4);
  }
}

double g_flash_tflops = 0, g_flash_bwd_tflops = 0;

void check_flash_all() {
  for (const auto& [a, name] : flash_cases()) {
    check_flash(a, name);
    check_attention<float>(a, name, false);
    check_attention<bf16>(a, name, true);
    if (kernels::attention_uses_flash(a)) check_attention<bf16>(a, name, false);
  }
  // Speed: B=4, H=16, T=4096, dh=128, causal (half of the 4 B H T^2 dh FLOPs of a full product).
  kernels::AttentionArgs big{4, 4096, 16, 16, 128, 1.0 / std::sqrt(128.0)};
  const int64_t width = (big.n_heads + 2 * big.n_kv_heads) * big.d_head;
  const auto qkv = random_vec<bf16>(static_cast<size_t>(big.batch * big.seq * width), 32);
  Device<bf16> d_qkv(qkv), d_out(static_cast<size_t>(big.batch * big.seq * big.n_heads * big.d_head));
  const double ms = time_ms(
      [&] {
        CUDA_OK(kernels::cuda::flash_attention_forward(nullptr, big, d_qkv.get(), d_out.get(), nullptr, nullptr));
      },
      10);
  const double flops = 4.0 * 4 * 16 * 4096.0 * 4096.0 * 128 / 2;
  g_flash_tflops = flops / (ms * 1e-3) * 1e-12;

  for (const auto& [a, name] : flash_cases()) check_flash_backward(a, name);
  // Speed: the same shape; 5 products of T^2 dh per head against the forward's 2 (2.5x its FLOPs).
  Device<bf16> d_dout(static_cast<size_t>(big.batch * big.seq * big.n_heads * big.d_head)), d_dqkv(qkv.size());
  CUDA_OK(cudaMemcpy(d_dout.get(), d_qkv.get(), d_dout.size() * sizeof(bf16), cudaMemcpyDeviceToDevice));
  Device<float> d_lse(static_cast<size_t>(big.batch * big.n_heads * big.seq));
  Device<char> work(kernels::cuda::flash_attention_backward_workspace(big));
  CUDA_OK(kernels::cuda::flash_attention_forward(nullptr, big, d_qkv.get(), d_out.get(), nullptr, d_lse.get()));
  const double bwd_ms = time_ms(
      [&] {
        CUDA_OK(kernels::cuda::flash_attention_backward(nullptr, big, d_qkv.get(), d_out.get(), d_dout.get(),
                                                        d_lse.get(), d_dqkv.get(), work.get()));
      },
      10);
  g_flash_bwd_tflops = 2.5 * flops / (bwd_ms * 1e-3) * 1e-12;
}

// --- cuDNN SDPA, the baseline (kernels/cuda/cudnn_attention.cu) ------------------------------

std::string g_cudnn;          // the cuDNN loaded ("cuDNN 9.19.0 (libcudnn.so.9)"), or why none was
bool g_cudnn_loaded = false;  // libcudnn.so.9 loaded
bool g_cudnn_ok = false;      // and its timing ran
double g_cudnn_tflops = 0, g_cudnn_bwd_tflops = 0;

/// cuDNN's fused attention forward and backward against the float64 references of
/// kernels/attention.h on the same bf16 inputs: output, stats (the log-sum-exp per query) and
/// dQ, dK, dV, every output poisoned first. A cuDNN error (a shape it refuses) fails the case's
/// row with its message instead of ending the check.
void check_cudnn(kernels::AttentionArgs a, const std::string& name) {
  const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * a.d_head;
  const auto qkv = random_vec<bf16>(static_cast<size_t>(a.batch * a.seq * width), 37);
  const auto dout = random_vec<bf16>(static_cast<size_t>(a.batch * a.seq * a.n_heads * a.d_head), 38);
  std::vector<double> qkv64(qkv.size()), dout64(dout.size()), out_ref, dqkv_ref;
  for (size_t i = 0; i < qkv.size(); ++i) qkv64[i] = to_float(qkv[i]);
  for (size_t i = 0; i < dout.size(); ++i) dout64[i] = to_float(dout[i]);
  kernels::attention_forward_reference(a, qkv64, out_ref, nullptr);
  kernels::attention_backward_reference(a, qkv64, dout64, dqkv_ref);
  const std::vector<double> lse_ref = lse_reference(a, qkv64);
  Device<bf16> d_qkv(qkv), d_dout(dout), d_out(out_ref.size()), d_dqkv(qkv.size());
  Device<float> d_stats(lse_ref.size());
  try {
    kernels::cuda::cudnn_attention_forward<bf16>(nullptr, a, d_qkv.get(), d_out.get(), d_stats.get());
    kernels::cuda::cudnn_attention_backward<bf16>(nullptr, a, d_qkv.get(), d_out.get(), d_stats.get(), d_dout.get(),
                                                  d_dqkv.get());
    CUDA_OK(cudaDeviceSynchronize());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuDNN SDPA, %s: %s\n", name.c_str(), e.what());
    g_rows.push_back({"cudnn sdpa", "bf16", name + ": " + e.what(), INFINITY, 0, false});
    return;
  }
  double scale = 0;
  for (const double v : dqkv_ref) scale = std::max(scale, std::abs(v));
  compare("cudnn sdpa", "bf16", name + " out", out_ref, d_out.host(), 2e-2, 2e-2);
  compare("cudnn sdpa", "bf16", name + " stats (lse)", lse_ref, d_stats.host(), 1e-3, 1e-3);
  compare("cudnn sdpa bwd", "bf16", name + " dqkv", dqkv_ref, d_dqkv.host(), 2e-2 * scale, 3e-2);
}

/// The variants cuDNN's fused attention covers (kernels::attention_cudnn_unsupported): MHA, GQA
/// with a window, MQA not causal, a long MHA, and a d_head our flash kernels lack.
std::vector<std::pair<kernels::AttentionArgs, std::string>> cudnn_cases() {
  std::vector<std::pair<kernels::AttentionArgs, std::string>> cases;
  kernels::AttentionArgs a{2, 257, 4, 4, 64, 0.125};
  cases.emplace_back(a, "MHA T=257 dh=64");
  a = {1, 300, 8, 2, 128, 1.0 / std::sqrt(128.0)};
  a.window = 100;
  cases.emplace_back(a, "GQA 8/2 T=300 dh=128 window=100");
  a = {2, 128, 4, 1, 64, 0.5};
  a.causal = false;
  cases.emplace_back(a, "MQA non-causal dh=64");
  a = {1, 1000, 2, 2, 128, 1.0 / std::sqrt(128.0)};
  cases.emplace_back(a, "MHA T=1000 dh=128");
  a = {2, 256, 4, 2, 96, 1.0 / std::sqrt(96.0)};
  cases.emplace_back(a, "GQA 4/2 T=256 dh=96");
  return cases;
}

/// The checks above, then the rate at the flash timing's shape (B=4, H=16, T=4096, dh=128,
/// causal; the same FLOP counts). Without a loadable cuDNN: SKIPPED, not a failure.
void check_cudnn_all() {
  if (!kernels::cuda::cudnn_attention_available(&g_cudnn)) {
    std::printf("cuDNN SDPA: SKIPPED (%s)\n", g_cudnn.c_str());
    return;
  }
  g_cudnn_loaded = true;
  std::printf("cuDNN SDPA: %s\n", g_cudnn.c_str());
  for (const auto& [a, name] : cudnn_cases()) check_cudnn(a, name);
  const kernels::AttentionArgs big{4, 4096, 16, 16, 128, 1.0 / std::sqrt(128.0)};
  const int64_t width = (big.n_heads + 2 * big.n_kv_heads) * big.d_head;
  const auto qkv = random_vec<bf16>(static_cast<size_t>(big.batch * big.seq * width), 32);
  const size_t n_out = static_cast<size_t>(big.batch * big.seq * big.n_heads * big.d_head);
  Device<bf16> d_qkv(qkv), d_out(n_out), d_dout(n_out), d_dqkv(qkv.size());
  CUDA_OK(cudaMemcpy(d_dout.get(), d_qkv.get(), n_out * sizeof(bf16), cudaMemcpyDeviceToDevice));
  Device<float> d_stats(static_cast<size_t>(kernels::attention_cudnn_stats_size(big)));
  const double flops = 4.0 * 4 * 16 * 4096.0 * 4096.0 * 128 / 2;
  try {
    const double ms = time_ms(
        [&] { kernels::cuda::cudnn_attention_forward<bf16>(nullptr, big, d_qkv.get(), d_out.get(), d_stats.get()); },
        10);
    const double bwd_ms = time_ms(
        [&] {
          kernels::cuda::cudnn_attention_backward<bf16>(nullptr, big, d_qkv.get(), d_out.get(), d_stats.get(),
                                                        d_dout.get(), d_dqkv.get());
        },
        10);
    g_cudnn_tflops = flops / (ms * 1e-3) * 1e-12;
    g_cudnn_bwd_tflops = 2.5 * flops / (bwd_ms * 1e-3) * 1e-12;
    g_cudnn_ok = true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuDNN SDPA timing: %s\n", e.what());
    g_rows.push_back(
        {"cudnn sdpa", "bf16", std::string("timing B=4 H=16 T=4096 dh=128: ") + e.what(), INFINITY, 0, false});
  }
}

double g_bf16_tflops = 0, g_f32_tflops = 0;

void check_gemms() {
  using kernels::cuda::Epilogue;
  kernels::cuda::Gemm g;
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      check_gemm<float>(g, ta, tb, 257, 513, 1024);
      check_gemm<bf16>(g, ta, tb, 257, 513, 1024);
    }
  check_gemm<bf16>(g, false, true, 128, 1000, 768, Epilogue::kBias);
  check_gemm<bf16>(g, false, true, 128, 1000, 768, Epilogue::kReluBias);
  check_gemm<bf16>(g, false, true, 128, 1000, 768, Epilogue::kGeluBias);
  check_gemm<float>(g, false, false, 64, 96, 33, Epilogue::kGeluBias);
  // Misaligned views (4 and 16 bytes for float, 2 for bf16), as the model's attention takes.
  check_gemm<float>(g, false, true, 100, 96, 64, Epilogue::kNone, 1);
  check_gemm<float>(g, true, false, 64, 100, 70, Epilogue::kNone, 4);
  check_gemm<bf16>(g, false, true, 128, 130, 64, Epilogue::kNone, 1);
  g_bf16_tflops = gemm_tflops<bf16>(g, 8192);
  g_f32_tflops = gemm_tflops<float>(g, 4096);
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("cuda_check: no CUDA device; skipped\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);

  for (bool center : {false, true}) {
    check_norm<float>(center, 257, 4096);
    check_norm<float>(center, 65, 96);
    check_norm<bf16>(center, 257, 4096);
  }
  for (double cap : {0.0, 30.0}) {
    check_softmax<float>(300, 1000, kernels::SoftmaxMask{true, 700, 0}, cap);
    check_softmax<float>(64, 333, kernels::SoftmaxMask{true, 0, 17}, cap);
    check_softmax<bf16>(300, 1000, kernels::SoftmaxMask{false, 0, 0}, cap);
  }
  check_cross_entropy<float>(64, 50257, 50257);
  check_cross_entropy<float>(64, 50257, 50304);
  check_cross_entropy<bf16>(33, 1000, 1000);
  check_cross_entropy<bf16>(33, 1000, 1024);
  check_rope<float>(kernels::RopeLayout::kHalf);
  check_rope<float>(kernels::RopeLayout::kInterleaved);
  check_rope<bf16>(kernels::RopeLayout::kHalf);
  check_glu<float>(kernels::Activation::kSilu, "silu");
  for (const auto& [act, act_name] :
       {std::pair{kernels::Activation::kRelu, "relu"}, std::pair{kernels::Activation::kGelu, "gelu"},
        std::pair{kernels::Activation::kGeluTanh, "gelu_tanh"}, std::pair{kernels::Activation::kSilu, "silu"},
        std::pair{kernels::Activation::kRelu2, "relu2"}}) {
    check_activation<float>(act, act_name);
    check_activation<bf16>(act, act_name);
  }
  check_softcap<float>();
  check_softcap<bf16>();
  check_glu<float>(kernels::Activation::kGelu, "gelu");
  check_glu<bf16>(kernels::Activation::kSilu, "silu");
  check_adamw_and_elementwise<float>();
  check_adamw_and_elementwise<bf16>();

  check_runtime();
  check_captured_step<float>();
  check_captured_step<bf16>();
  check_gemms();
  check_flash_all();
  check_cudnn_all();
  const double copy = copy_bandwidth();
  bandwidth<float>();
  bandwidth<bf16>();

  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "# cuda_check on %s (%d SMs, %.0f GiB), CUDA runtime %d, driver %d\n\n", prop.name,
                prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1u << 30), runtime, driver);
  out += line;
  out +=
      "## CUDA executor vs CPU executor\n\n| kernel | dtype | output | max abs err | pass |\n|---|---|---|---|---|\n";
  int failures = 0;
  for (const auto& r : g_rows) {
    std::snprintf(line, sizeof line, "| %s | %s | %s | %.3g | %s |\n", r.kernel.c_str(), r.dtype.c_str(),
                  r.what.c_str(), r.max_err, r.pass ? "yes" : "NO");
    out += line;
    failures += r.pass ? 0 : 1;
  }
  std::snprintf(line, sizeof line,
                "\n## GEMM ceiling (cuBLASLt, median of 10, L2 flushed)\n\nbf16 8192^3: %.0f TFLOP/s; float "
                "4096^3 (no TF32): %.1f TFLOP/s\n\nflash attention, bf16, B=4 H=16 T=4096 dh=128 causal: forward "
                "%.0f TFLOP/s, backward %.0f TFLOP/s (2.5x the forward's FLOPs)\n",
                g_bf16_tflops, g_f32_tflops, g_flash_tflops, g_flash_bwd_tflops);
  out += line;
  if (g_cudnn_ok)
    std::snprintf(line, sizeof line,
                  "\ncuDNN SDPA (%s), bf16, B=4 H=16 T=4096 dh=128 causal: forward %.0f TFLOP/s, backward %.0f "
                  "TFLOP/s (ours, flash: forward %.0f, backward %.0f)\n",
                  g_cudnn.c_str(), g_cudnn_tflops, g_cudnn_bwd_tflops, g_flash_tflops, g_flash_bwd_tflops);
  else
    std::snprintf(line, sizeof line, "\ncuDNN SDPA: %s (%s)\n", g_cudnn_loaded ? "FAILED, see the table" : "SKIPPED",
                  g_cudnn.c_str());
  out += line;
  std::snprintf(line, sizeof line,
                "\n## Bandwidth (median of 20, L2 flushed; copy = cudaMemcpy D2D 1 GiB, read + write: %.0f GB/s)\n\n"
                "| kernel | dtype | shape | median ms | GB/s | %% of copy |\n|---|---|---|---|---|---|\n",
                copy);
  out += line;
  for (const auto& t : g_timings) {
    std::snprintf(line, sizeof line, "| %s | %s | %s | %.4f | %.0f | %.0f%% |\n", t.kernel.c_str(), t.dtype.c_str(),
                  t.shape.c_str(), t.ms, t.gbps, 100 * t.gbps / copy);
    out += line;
  }
  std::snprintf(line, sizeof line, "\n%d of %zu comparisons failed\n", failures, g_rows.size());
  out += line;
  std::fputs(out.c_str(), stdout);
  if (argc > 2) {  // the timings as JSON, for scripts/torch_baseline.py's side-by-side table
    if (FILE* f = std::fopen(argv[2], "w")) {
      std::fprintf(f,
                   "{\"device\": \"%s\", \"copy_gbps\": %.1f, \"bf16_gemm_tflops\": %.1f, "
                   "\"flash_forward_tflops\": %.1f, \"flash_backward_tflops\": %.1f, ",
                   prop.name, copy, g_bf16_tflops, g_flash_tflops, g_flash_bwd_tflops);
      if (g_cudnn_ok)
        std::fprintf(f, "\"cudnn_forward_tflops\": %.1f, \"cudnn_backward_tflops\": %.1f, \"rows\": [", g_cudnn_tflops,
                     g_cudnn_bwd_tflops);
      else
        std::fputs("\"cudnn_forward_tflops\": null, \"cudnn_backward_tflops\": null, \"rows\": [", f);
      for (size_t i = 0; i < g_timings.size(); ++i)
        std::fprintf(f, "%s{\"kernel\": \"%s\", \"dtype\": \"%s\", \"shape\": \"%s\", \"ms\": %.5f, \"gbps\": %.1f}",
                     i ? ", " : "", g_timings[i].kernel.c_str(), g_timings[i].dtype.c_str(), g_timings[i].shape.c_str(),
                     g_timings[i].ms, g_timings[i].gbps);
      std::fputs("]}\n", f);
      std::fclose(f);
    }
  }
  if (argc > 1) {
    if (FILE* f = std::fopen(argv[1], "w")) {
      std::fputs(out.c_str(), f);
      std::fclose(f);
    }
  }
  return failures == 0 ? 0 : 1;
}
