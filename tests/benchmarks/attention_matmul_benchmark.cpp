// The CPU attention's two products, S = scale Q K^T and O = P V, two ways (issue 35, item 1):
//   tasks:  today's composition (kernels/attention.cpp): one task per (batch, head, block of 64
//           queries) over tile::parallel_for, each a single-threaded kernels::gemm (dnnl_sgemm)
//           on the keys the block can see (the causal skip), straight from the fused qkv rows;
//   matmul: one oneDNN matmul primitive per product for all (batch, head) pairs, batch dims and
//           strides over the qkv rows in place (no copies), on the full T x T square;
//   matmul_blocks: the causal skip with oneDNN's batching: per block of 64 queries, one matmul
//           for all (batch, head) pairs on the keys the block can see.
// Google Benchmark, real time, repetitions with median, spread (min, max, stddev) and the
// achieved rate on the FLOPs each way actually executes. Each way is checked against the tasks
// (the visible part of S, and O from the same P) before it is timed. Not a test: run it by hand,
//   build/bin/attention_matmul_benchmark --benchmark_repetitions=15
// (docs/attention-cores.md, "CPU attention": the figures and the decision).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/tile/parallel.h"

namespace {

using dnnl::memory;

constexpr int64_t kQueryBlock = 64;  // kernels/attention.cpp's kAttentionQueryBlock

struct Shape {
  int64_t batch, heads, seq, d_head;
  int64_t width() const { return 3 * heads * d_head; }  // MHA: q, k, v heads per row
};

/// Inputs and outputs of one shape: qkv rows [B T, 3 H dh], S and P [B, H, T, T], O [B T, H dh].
struct Buffers {
  explicit Buffers(const Shape& s)
      : qkv(static_cast<size_t>(s.batch * s.seq * s.width())),
        scores(static_cast<size_t>(s.batch * s.heads * s.seq * s.seq)),
        probs(scores.size()),
        out(static_cast<size_t>(s.batch * s.seq * s.heads * s.d_head)) {
    std::mt19937 gen(7);
    std::normal_distribution<float> normal(0.0F, 1.0F);
    for (float& x : qkv) x = normal(gen);
    // Probabilities of a causal softmax: row t spreads over keys 0..t, zero after (as stored).
    for (int64_t r = 0; r < s.batch * s.heads * s.seq; ++r) {
      const int64_t t = r % s.seq;
      for (int64_t j = 0; j < s.seq; ++j)
        probs[static_cast<size_t>(r * s.seq + j)] = j <= t ? 1.0F / static_cast<float>(t + 1) : 0.0F;
    }
  }
  std::vector<float> qkv, scores, probs, out;
};

// --- today's tasks ----------------------------------------------------------------------------

void tasks_qk(const Shape& s, Buffers& b, float scale) {
  const int64_t blocks = (s.seq + kQueryBlock - 1) / kQueryBlock, w = s.width();
  bench::tile::parallel_for(s.batch * s.heads * blocks, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t qb = task % blocks, bh = task / blocks, n = bh / s.heads, h = bh % s.heads;
      const int64_t q0 = qb * kQueryBlock, q1 = std::min(s.seq, q0 + kQueryBlock), hi = q1;  // causal: keys [0, q1)
      const float* q = b.qkv.data() + (n * s.seq + q0) * w + h * s.d_head;
      const float* k = b.qkv.data() + n * s.seq * w + (s.heads + h) * s.d_head;
      bench::kernels::gemm<float>(false, true, q1 - q0, hi, s.d_head, scale, q, w, k, w, 0.0F,
                                  b.scores.data() + (bh * s.seq + q0) * s.seq, s.seq);
    }
  });
}

void tasks_pv(const Shape& s, Buffers& b) {
  const int64_t blocks = (s.seq + kQueryBlock - 1) / kQueryBlock, w = s.width(), ld_out = s.heads * s.d_head;
  bench::tile::parallel_for(s.batch * s.heads * blocks, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t qb = task % blocks, bh = task / blocks, n = bh / s.heads, h = bh % s.heads;
      const int64_t q0 = qb * kQueryBlock, q1 = std::min(s.seq, q0 + kQueryBlock), hi = q1;
      const float* v = b.qkv.data() + n * s.seq * w + (2 * s.heads + h) * s.d_head;
      bench::kernels::gemm<float>(false, false, q1 - q0, s.d_head, hi, 1.0F, b.probs.data() + (bh * s.seq + q0) * s.seq,
                                  s.seq, v, w, 0.0F, b.out.data() + (n * s.seq + q0) * ld_out + h * s.d_head, ld_out);
    }
  });
}

/// 2 FLOPs per multiply-add of the products the tasks execute (the causal skip's blocks).
double tasks_flops(const Shape& s) {
  double keys = 0;
  for (int64_t q0 = 0; q0 < s.seq; q0 += kQueryBlock) {
    const int64_t q1 = std::min(s.seq, q0 + kQueryBlock);
    keys += static_cast<double>((q1 - q0) * q1);
  }
  return 2.0 * static_cast<double>(s.batch * s.heads * s.d_head) * keys;
}

// --- oneDNN's batched matmul --------------------------------------------------------------------

/// The two primitives for one shape, with their memory objects over the buffers (no copies).
struct Batched {
  Batched(const Shape& s, Buffers& b, float scale) : engine(dnnl::engine::kind::cpu, 0), stream(engine) {
    const memory::dim B = s.batch, H = s.heads, T = s.seq, D = s.d_head, W = s.width();
    const auto f32 = memory::data_type::f32;
    // Q [B, H, T, dh] and K^T [B, H, dh, T] read in place from the qkv rows; S [B, H, T, T] dense.
    const memory::desc q_md({B, H, T, D}, f32, {T * W, D, W, 1});
    const memory::desc kt_md({B, H, D, T}, f32, {T * W, D, 1, W});
    const memory::desc s_md({B, H, T, T}, f32, {H * T * T, T * T, T, 1});
    // P [B, H, T, T] dense, V [B, H, T, dh] in place, O [B, H, T, dh] into the rows of out.
    const memory::desc v_md({B, H, T, D}, f32, {T * W, D, W, 1});
    const memory::desc o_md({B, H, T, D}, f32, {T * H * D, D, H * D, 1});
    dnnl::primitive_attr scaled;
    scaled.set_output_scales(0, {scale});
    const dnnl::matmul::primitive_desc qk_pd(dnnl::matmul::desc(q_md, kt_md, s_md), scaled, engine);
    const dnnl::matmul::primitive_desc pv_pd(dnnl::matmul::desc(s_md, v_md, o_md), engine);
    qk_impl = qk_pd.impl_info_str();
    pv_impl = pv_pd.impl_info_str();
    qk = dnnl::matmul(qk_pd);
    pv = dnnl::matmul(pv_pd);
    float* qkv = b.qkv.data();
    q_mem = memory(q_md, engine, qkv);
    k_mem = memory(kt_md, engine, qkv + s.heads * s.d_head);
    v_mem = memory(v_md, engine, qkv + 2 * s.heads * s.d_head);
    s_mem = memory(s_md, engine, b.scores.data());
    p_mem = memory(s_md, engine, b.probs.data());
    o_mem = memory(o_md, engine, b.out.data());
  }
  void run_qk() {
    qk.execute(stream, {{DNNL_ARG_SRC, q_mem}, {DNNL_ARG_WEIGHTS, k_mem}, {DNNL_ARG_DST, s_mem}});
    stream.wait();
  }
  void run_pv() {
    pv.execute(stream, {{DNNL_ARG_SRC, p_mem}, {DNNL_ARG_WEIGHTS, v_mem}, {DNNL_ARG_DST, o_mem}});
    stream.wait();
  }
  dnnl::engine engine;
  dnnl::stream stream;
  dnnl::matmul qk, pv;
  memory q_mem, k_mem, v_mem, s_mem, p_mem, o_mem;
  std::string qk_impl, pv_impl;
};

/// The causal skip with oneDNN's batching: per block of 64 queries, one matmul per product for
/// all (batch, head) pairs on the keys the block can see (T / 64 primitives per product).
struct BlockBatched {
  BlockBatched(const Shape& s, Buffers& b, float scale) : engine(dnnl::engine::kind::cpu, 0), stream(engine) {
    const memory::dim B = s.batch, H = s.heads, T = s.seq, D = s.d_head, W = s.width();
    const auto f32 = memory::data_type::f32;
    dnnl::primitive_attr scaled;
    scaled.set_output_scales(0, {scale});
    float* qkv = b.qkv.data();
    for (memory::dim q0 = 0; q0 < T; q0 += kQueryBlock) {
      const memory::dim q1 = std::min<memory::dim>(T, q0 + kQueryBlock), rows = q1 - q0;
      const memory::desc q_md({B, H, rows, D}, f32, {T * W, D, W, 1});
      const memory::desc kt_md({B, H, D, q1}, f32, {T * W, D, 1, W});
      const memory::desc s_md({B, H, rows, q1}, f32, {H * T * T, T * T, T, 1});
      const memory::desc v_md({B, H, q1, D}, f32, {T * W, D, W, 1});
      const memory::desc o_md({B, H, rows, D}, f32, {T * H * D, D, H * D, 1});
      Block blk;
      blk.qk = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(q_md, kt_md, s_md), scaled, engine));
      blk.pv = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(s_md, v_md, o_md), engine));
      blk.q = memory(q_md, engine, qkv + q0 * W);
      blk.k = memory(kt_md, engine, qkv + H * D);
      blk.v = memory(v_md, engine, qkv + 2 * H * D);
      blk.s = memory(s_md, engine, b.scores.data() + q0 * T);
      blk.p = memory(s_md, engine, b.probs.data() + q0 * T);
      blk.o = memory(o_md, engine, b.out.data() + q0 * H * D);
      blocks.push_back(blk);
    }
  }
  void run_qk() {
    for (Block& blk : blocks)
      blk.qk.execute(stream, {{DNNL_ARG_SRC, blk.q}, {DNNL_ARG_WEIGHTS, blk.k}, {DNNL_ARG_DST, blk.s}});
    stream.wait();
  }
  void run_pv() {
    for (Block& blk : blocks)
      blk.pv.execute(stream, {{DNNL_ARG_SRC, blk.p}, {DNNL_ARG_WEIGHTS, blk.v}, {DNNL_ARG_DST, blk.o}});
    stream.wait();
  }
  struct Block {
    dnnl::matmul qk, pv;
    memory q, k, v, s, p, o;
  };
  dnnl::engine engine;
  dnnl::stream stream;
  std::vector<Block> blocks;
};

double full_flops(const Shape& s) { return 2.0 * static_cast<double>(s.batch * s.heads * s.seq * s.seq * s.d_head); }

// --- validation: both ways compute the same products ---------------------------------------------

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b, const std::vector<bool>& where) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (where.empty() || where[i])
      worst =
          std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / (1e-3 + std::abs(static_cast<double>(b[i]))));
  return worst;
}

void validate(const Shape& s, float scale) {
  Buffers x(s), y(s), z(s);
  Batched batched(s, y, scale);
  BlockBatched blocked(s, z, scale);
  tasks_qk(s, x, scale);
  batched.run_qk();
  blocked.run_qk();
  std::vector<bool> visible(x.scores.size());
  for (size_t i = 0; i < visible.size(); ++i)
    visible[i] = static_cast<int64_t>(i % s.seq) <= static_cast<int64_t>(i / s.seq) % s.seq;
  tasks_pv(s, x);
  batched.run_pv();
  blocked.run_pv();
  const double ds = std::max(max_rel_diff(x.scores, y.scores, visible), max_rel_diff(x.scores, z.scores, visible));
  const double dout = std::max(max_rel_diff(x.out, y.out, {}), max_rel_diff(x.out, z.out, {}));
  std::printf("B=%lld H=%lld T=%lld dh=%lld: max relative difference S %.2e, O %.2e; oneDNN QK^T: %s, PV: %s\n",
              static_cast<long long>(s.batch), static_cast<long long>(s.heads), static_cast<long long>(s.seq),
              static_cast<long long>(s.d_head), ds, dout, batched.qk_impl.c_str(), batched.pv_impl.c_str());
  if (ds > 1e-4 || dout > 1e-4) throw std::runtime_error("the ways disagree: not timing them");
}

/// The ways, each product.
enum class Way { kQkTasks, kQkMatmul, kQkMatmulBlocks, kPvTasks, kPvMatmul, kPvMatmulBlocks };

void run(Way way, const Shape& s, Buffers& b, Batched& batched, BlockBatched& blocked, float scale) {
  switch (way) {
    case Way::kQkTasks:
      return tasks_qk(s, b, scale);
    case Way::kQkMatmul:
      return batched.run_qk();
    case Way::kQkMatmulBlocks:
      return blocked.run_qk();
    case Way::kPvTasks:
      return tasks_pv(s, b);
    case Way::kPvMatmul:
      return batched.run_pv();
    case Way::kPvMatmulBlocks:
      return blocked.run_pv();
  }
}

void register_shape(const Shape& s) {
  const float scale = 1.0F / std::sqrt(static_cast<float>(s.d_head));
  validate(s, scale);
  const std::string name = "B" + std::to_string(s.batch) + "_H" + std::to_string(s.heads) + "_T" +
                           std::to_string(s.seq) + "_dh" + std::to_string(s.d_head);
  const std::vector<std::pair<std::string, Way>> ways = {
      {"qk_tasks", Way::kQkTasks}, {"qk_matmul", Way::kQkMatmul}, {"qk_matmul_blocks", Way::kQkMatmulBlocks},
      {"pv_tasks", Way::kPvTasks}, {"pv_matmul", Way::kPvMatmul}, {"pv_matmul_blocks", Way::kPvMatmulBlocks}};
  for (const auto& [what, way] : ways) {
    // The rate on the products each way executes: the full square for the one-primitive matmul.
    const double flops = way == Way::kQkMatmul || way == Way::kPvMatmul ? full_flops(s) : tasks_flops(s);
    benchmark::RegisterBenchmark((what + "/" + name).c_str(),
                                 [s, way = way, flops, scale](benchmark::State& st) {
                                   Buffers b(s);
                                   Batched batched(s, b, scale);
                                   BlockBatched blocked(s, b, scale);
                                   for (auto _ : st) run(way, s, b, batched, blocked, scale);
                                   st.counters["GFLOP/s"] =
                                       benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
                                 })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond)
        ->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); })
        ->ComputeStatistics("max", [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::tile::set_num_threads(0);  // the default team: one thread per usable CPU
  std::printf("threads: %d\n", bench::tile::num_threads());
  // norms.toml's CPU sizes ([cpu]: d_model 64, 4 heads, T 64, batch 16), its full sizes (d_model
  // 256, T 256), and a larger one.
  for (const Shape& s : {Shape{16, 4, 64, 16}, Shape{16, 4, 256, 64}, Shape{8, 8, 512, 64}}) register_shape(s);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
