// The part of tests/cuda/cuda_check.cu that only a CUDA device has: its facts and sticky errors,
// the runtime pieces (caching allocator, event timing, L2 flush, a captured optimizer step),
// cuBLASLt's epilogues and misaligned views, cuDNN's SDPA against float64, and the attention rates
// (our flash kernels and cuDNN's). Included by cuda_check.cu only, after its helpers.
#pragma once

namespace {

CheckResult device_facts() {
  if (!g_setup.cuda) {
    return CheckResult::info(static_cast<double>(tile::num_threads()), "threads",
                             std::string("CPU executor; GEMM: ") + kernels::gemm_backend());
  }
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string cudnn;
  kernels::cuda::cudnn_attention_available(&cudnn);
  return CheckResult::info(
      static_cast<double>(prop.multiProcessorCount), "SMs",
      std::string(prop.name) +
          fmt(", %.0f GiB, runtime %.0f, driver %.0f; ", static_cast<double>(prop.totalGlobalMem) / (1u << 30),
              static_cast<double>(runtime), static_cast<double>(driver)) +
          cudnn);
}

/// The caching allocator on cudaMalloc reaches the driver only in the first of 20 identical
/// steps; event timing and the L2 flush work; the optimizer step (sum of squares, adamw_scalars,
/// adamw_update) captured into a StepGraph and replayed three times equals three CPU steps.
template <class T>
CheckResult captured_step();

void runtime_checks(test::CheckTable& t) {
  t.run("runtime/caching allocator", [] {
    if (!g_setup.cuda) return cuda_only();
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
    const double extra = static_cast<double>(alloc.stats().backend_allocs - first);
    return extra == 0 ? CheckResult{"PASS", extra, "cudaMalloc calls after step 1", ""}
                      : CheckResult::fail(fmt("%.0f cudaMalloc calls after the first of 20 identical steps", extra));
  });
  t.run("runtime/event timer and L2 flush", [] {
    if (!g_setup.cuda) return cuda_only();
    kernels::cuda::EventTimer timer;
    kernels::cuda::L2Flusher flusher(0);
    timer.start();
    flusher.flush();
    const double ms = timer.stop_ms();
    const double gbps = static_cast<double>(flusher.bytes()) / (ms * 1e-3) * 1e-9;
    return ms > 0 && gbps < 20000 ? CheckResult{"PASS", gbps, "GB/s written", "event-timed memset of the flush"}
                                  : CheckResult::fail(fmt("%.3f ms, %.0f GB/s: not a plausible memset", ms, gbps));
  });
  t.run("runtime/captured step/float", [] { return g_setup.cuda ? captured_step<float>() : cuda_only(); });
  t.run("runtime/captured step/bf16", [] { return g_setup.cuda ? captured_step<bf16>() : cuda_only(); });
}

template <class T>
CheckResult captured_step() {
  using A = acc_t<T>;
  const int64_t n = 300'007;
  const int64_t parts = kernels::sum_squares_partials(n);
  auto p = random_vec<T>(n, 21), g = random_vec<T>(n, 22);  // |g| ~ sqrt(n): the clip at 1 acts
  std::vector<A> m(n, 0.0f), v(n, 0.0f), master(n);
  for (int64_t i = 0; i < n; ++i) master[static_cast<size_t>(i)] = static_cast<A>(to_double(p[static_cast<size_t>(i)]));
  A* const cpu_master = std::is_same_v<T, bf16> ? master.data() : nullptr;
  std::vector<double> state(kernels::kAdamStateSize, 0.0), partial(static_cast<size_t>(parts));
  const auto step_of = [](const double* st) { return kernels::AdamWStep{1e-3, 0.9, 0.95, 1e-8, 1e-4, 0, 1.0, st}; };
  Buf<T> gp(p), gg(g);
  Buf<A> gm(m), gv(v), gmaster(master);
  Buf<double> gstate(std::vector<double>(kernels::kAdamStateSize, 0.0)), gpartial(static_cast<size_t>(parts));
  A* const dev_master = std::is_same_v<T, bf16> ? gmaster.get() : nullptr;
  for (int replay = 0; replay < 3; ++replay) {
    kernels::sum_of_into<T>(tile::Exec{}, kernels::SumOf::kSquares, g.data(), n, partial.data(),
                            state.data() + kernels::kAdamSumSquares);
    kernels::adamw_scalars(tile::Exec{}, state.data(), 0.9, 0.95, 1.0);
    kernels::adamw_update<T>(tile::Exec{}, p.data(), g.data(), m.data(), v.data(), n, step_of(state.data()),
                             cpu_master);
  }
  const tile::Exec exec = g_setup.exec();
  kernels::cuda::StepGraph graph(exec.stream);
  auto enqueue = [&] {
    kernels::sum_of_into<T>(exec, kernels::SumOf::kSquares, gg.get(), n, gpartial.get(),
                            gstate.get() + kernels::kAdamSumSquares);
    kernels::adamw_scalars(exec, gstate.get(), 0.9, 0.95, 1.0);
    kernels::adamw_update<T>(exec, gp.get(), gg.get(), gm.get(), gv.get(), n, step_of(gstate.get()), dev_master);
  };
  graph.capture(enqueue);
  if (graph.nodes() != 4)
    return CheckResult::fail(fmt("%.0f graph nodes, expected 4", static_cast<double>(graph.nodes())));
  for (int replay = 0; replay < 3; ++replay) graph.launch();
  kernels::synchronize(exec);
  const std::vector<double> got = gstate.host();
  if (got[kernels::kAdamStep] != 3.0)
    return CheckResult::fail(fmt("step count %.0f after 3 replays", got[kernels::kAdamStep]));
  if (std::abs(got[kernels::kAdamGradScale] - state[kernels::kAdamGradScale]) > 1e-9 * state[kernels::kAdamGradScale])
    return CheckResult::fail(
        fmt("clip factor %.9g vs %.9g", got[kernels::kAdamGradScale], state[kernels::kAdamGradScale]));
  CheckResult r = compare(p, gp.host(), 1e-6, std::is_same_v<T, bf16> ? 1.6e-2 : 2e-5);
  if (r.result != "PASS") return CheckResult::fail("parameters: " + r.detail);
  if constexpr (std::is_same_v<T, bf16>) {
    r = compare(master, gmaster.host(), 1e-7, 1e-5);
    if (r.result != "PASS") return CheckResult::fail("master weights: " + r.detail);
  }
  return CheckResult{"PASS", 4, "graph nodes", "3 replays = 3 CPU steps: step count, clip factor, parameters"};
}

/// cuBLASLt through kernels::cuda::Gemm (its epilogues, and A, B, C at offsets less aligned than
/// its default assumption) against a float64 product of the same stored inputs.
template <class T>
CheckResult check_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                       kernels::cuda::Epilogue epi = kernels::cuda::Epilogue::kNone, int64_t offset = 0) {
  using kernels::cuda::Epilogue;
  static kernels::cuda::Gemm g;
  const int64_t lda = ta ? m : k, ldb = tb ? k : n, ldc = n;
  const auto a = random_vec<T>(static_cast<size_t>(m * k), 11), b = random_vec<T>(static_cast<size_t>(k * n), 12);
  const auto bias = random_vec<T>(static_cast<size_t>(n), 13), c0 = random_vec<T>(static_cast<size_t>(m * n), 14);
  auto shifted = [&](const std::vector<T>& v) {
    std::vector<T> s(static_cast<size_t>(offset), from_float<T>(0.f));
    s.insert(s.end(), v.begin(), v.end());
    return s;
  };
  Buf<T> da(shifted(a)), db(shifted(b)), dbias(bias), dc(shifted(c0));
  const float alpha = 0.5f, beta = 0.25f;
  g.run<T>(ta, tb, m, n, k, alpha, da.get() + offset, lda, db.get() + offset, ldb, beta, dc.get() + offset, ldc,
           static_cast<cudaStream_t>(g_setup.exec().stream), epi, epi == Epilogue::kNone ? nullptr : dbias.get());
  std::vector<double> ref(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += to_double(ta ? a[p * lda + i] : a[i * lda + p]) * to_double(tb ? b[j * ldb + p] : b[p * ldb + j]);
      double r = alpha * sum + beta * to_double(c0[i * ldc + j]);
      if (epi != Epilogue::kNone) r += to_double(bias[j]);
      if (epi == Epilogue::kReluBias) r = std::max(r, 0.0);
      if (epi == Epilogue::kGeluBias) r = 0.5 * r * (1 + std::tanh(0.7978845608028654 * (r + 0.044715 * r * r * r)));
      ref[i * n + j] = r;
    }
  std::vector<T> got = dc.host();
  got.erase(got.begin(), got.begin() + offset);
  return std::is_same_v<T, float> ? compare(ref, got, 1e-3, 1e-4) : compare(ref, got, 2e-2, 8e-3);
}

void gemm_checks(test::CheckTable& t) {
  using kernels::cuda::Epilogue;
  struct Case {
    const char* name;
    std::function<CheckResult()> run;
  };
  const std::vector<Case> cases = {
      {"gemm/cublaslt/float A^T B^T 257x513x1024", [] { return check_gemm<float>(true, true, 257, 513, 1024); }},
      {"gemm/cublaslt/bf16 A B^T 257x513x1024", [] { return check_gemm<bf16>(false, true, 257, 513, 1024); }},
      {"gemm/cublaslt/bf16 +bias", [] { return check_gemm<bf16>(false, true, 128, 1000, 768, Epilogue::kBias); }},
      {"gemm/cublaslt/bf16 +bias relu",
       [] { return check_gemm<bf16>(false, true, 128, 1000, 768, Epilogue::kReluBias); }},
      {"gemm/cublaslt/bf16 +bias gelu",
       [] { return check_gemm<bf16>(false, true, 128, 1000, 768, Epilogue::kGeluBias); }},
      {"gemm/cublaslt/float +bias gelu",
       [] { return check_gemm<float>(false, false, 64, 96, 33, Epilogue::kGeluBias); }},
      {"gemm/cublaslt/float at +1 element",
       [] { return check_gemm<float>(false, true, 100, 96, 64, Epilogue::kNone, 1); }},
      {"gemm/cublaslt/float A^T at +4", [] { return check_gemm<float>(true, false, 64, 100, 70, Epilogue::kNone, 4); }},
      {"gemm/cublaslt/bf16 at +1 element",
       [] { return check_gemm<bf16>(false, true, 128, 130, 64, Epilogue::kNone, 1); }},
  };
  for (const auto& c : cases) t.run(c.name, [&] { return g_setup.cuda ? c.run() : cuda_only(); });
}

// --- cuDNN's SDPA (kernels/cuda/cudnn_attention.cu) against float64 ----------------------------

void cudnn_checks(test::CheckTable& t) {
  std::string why;
  const bool loaded = g_setup.cuda && kernels::cuda::cudnn_attention_available(&why);
  const int version = loaded ? kernels::cuda::cudnn_version() : 0;
  std::vector<std::pair<kernels::AttentionArgs, std::string>> cases;
  kernels::AttentionArgs a{2, 257, 4, 4, 64, 0.125};
  cases.emplace_back(a, "MHA T=257 dh=64");
  a = {1, 300, 8, 2, 128, 1.0 / std::sqrt(128.0)};
  a.window = 100;
  cases.emplace_back(a, "GQA 8/2 T=300 dh=128 window=100");
  a = {2, 128, 4, 1, 64, 0.5};
  a.causal = false;
  cases.emplace_back(a, "MQA non-causal T=128 dh=64");
  a = {1, 1000, 2, 2, 128, 1.0 / std::sqrt(128.0)};
  cases.emplace_back(a, "MHA T=1000 dh=128");
  a = {2, 256, 4, 2, 96, 1.0 / std::sqrt(96.0)};
  cases.emplace_back(a, "GQA 4/2 T=256 dh=96");
  for (const auto& [args, name] : cases) {
    // Shared by the forward and backward rows of a case: inputs, references, the forward's output.
    struct State {
      std::vector<double> qkv64, dout64, out_ref, dqkv_ref, lse_ref;
      std::unique_ptr<Buf<bf16>> qkv, dout, out, dqkv;
      std::unique_ptr<Buf<float>> stats;
      bool forward_ran = false;
    } s;
    t.run("cudnn/" + name + "/forward", [&, args = args] {
      if (!g_setup.cuda) return cuda_only();
      if (!loaded) return CheckResult::skipped(why);
      const int64_t width = (args.n_heads + 2 * args.n_kv_heads) * args.d_head;
      const auto qkv = random_vec<bf16>(static_cast<size_t>(args.batch * args.seq * width), 37);
      const auto dout = random_vec<bf16>(static_cast<size_t>(args.batch * args.seq * args.n_heads * args.d_head), 38);
      for (const bf16 v : qkv) s.qkv64.push_back(to_double(v));
      for (const bf16 v : dout) s.dout64.push_back(to_double(v));
      kernels::attention_forward_reference(args, s.qkv64, s.out_ref, nullptr);
      s.lse_ref = kernels::attention_lse_reference(args, s.qkv64);
      s.qkv = std::make_unique<Buf<bf16>>(qkv);
      s.dout = std::make_unique<Buf<bf16>>(dout);
      s.out = std::make_unique<Buf<bf16>>(s.out_ref.size());
      s.dqkv = std::make_unique<Buf<bf16>>(qkv.size());
      s.stats = std::make_unique<Buf<float>>(s.lse_ref.size());
      kernels::cuda::cudnn_attention_forward<bf16>(static_cast<kernels::cuda::Stream>(g_setup.exec().stream), args,
                                                   s.qkv->get(), s.out->get(), s.stats->get());
      s.forward_ran = true;
      CheckResult r = compare(s.out_ref, s.out->host(), 2e-2, 2e-2);
      if (r.result != "PASS") return CheckResult::fail("out: " + r.detail);
      r = compare(s.lse_ref, s.stats->host(), 1e-3, 1e-3);
      return r.result == "PASS" ? r : CheckResult::fail("stats (lse): " + r.detail);
    });
    t.run("cudnn/" + name + "/backward", [&, args = args] {
      if (!g_setup.cuda) return cuda_only();
      if (!loaded) return CheckResult::skipped(why);
      if (version < 91600 && args.seq % 128 != 0)
        return CheckResult::skipped(fmt("cuDNN %.0f's backward needs T a multiple of 128 before 9.16; T = %.0f",
                                        static_cast<double>(version), static_cast<double>(args.seq)));
      if (!s.forward_ran) return CheckResult::skipped("its forward did not run");
      kernels::attention_backward_reference(args, s.qkv64, s.dout64, s.dqkv_ref);
      kernels::cuda::cudnn_attention_backward<bf16>(static_cast<kernels::cuda::Stream>(g_setup.exec().stream), args,
                                                    s.qkv->get(), s.out->get(), s.stats->get(), s.dout->get(),
                                                    s.dqkv->get());
      double scale = 0;
      for (const double v : s.dqkv_ref) scale = std::max(scale, std::abs(v));
      return compare(s.dqkv_ref, s.dqkv->host(), 2e-2 * scale, 3e-2);
    });
  }
}

// --- attention rates ----------------------------------------------------------------------------

/// The issue's shape with dropout 0.1 (seed 5): the args of every rate row's dropout twin.
kernels::AttentionArgs with_dropout(kernels::AttentionArgs a) {
  a.dropout = 0.1;
  a.dropout_seed = 5;
  return a;
}

/// The tail of a rate row's name at `a`: " dropout 0.1" with dropout, else nothing (the twin of
/// each row without dropout, the same FLOP count: dropout's hashes are not products, so each
/// rate reads against its row without dropout).
std::string dropout_suffix(const kernels::AttentionArgs& a) {
  return a.dropout > 0 ? fmt(" dropout %.2g", a.dropout) : std::string();
}

/// The shape every rate row names: "B=4 H=16 T=4096 dh=128 causal", and the dropout rate where
/// there is one.
std::string rate_shape(const kernels::AttentionArgs& a) {
  return "B=4 H=16 T=4096 dh=128 causal" + (a.dropout > 0 ? fmt(", dropout %.2g", a.dropout) : std::string());
}

/// A bf16 flash backward: flash_attention_backward (mma.sync) or flash_attention_wgmma_backward.
using FlashBackward = cudaError_t (*)(cudaStream_t, const kernels::AttentionArgs&, const bf16*, const bf16*,
                                      const bf16*, const float*, bf16*, void*);

/// How far two bf16 gradients are apart: the largest |a - b| (infinite where either is NaN) and
/// the largest |b|, the scale the attention backward rows measure it against.
struct Gap {
  double worst = 0, largest = 0;
};
inline Gap bf16_gap(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  Gap g;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(to_double(a[i]) - to_double(b[i]));
    g.worst = std::isnan(d) ? INFINITY : std::max(g.worst, d);
    g.largest = std::max(g.largest, std::abs(to_double(b[i])));
  }
  return g;
}

/// The buffers of a bf16 attention backward rate row at `a`: random qkv (seed 32) and dout (33),
/// out and lse for the forward to fill, dqkv and ref for two backwards, the workspace.
struct BackwardBuffers {
  explicit BackwardBuffers(const kernels::AttentionArgs& a)
      : n_out(static_cast<size_t>(a.batch * a.seq * a.n_heads * a.d_head)),
        n_in(static_cast<size_t>(a.batch * a.seq * (a.n_heads + 2 * a.n_kv_heads) * a.d_head)),
        qkv(random_vec<bf16>(n_in, 32)),
        out(n_out),
        dout(random_vec<bf16>(n_out, 33)),
        dqkv(n_in),
        ref(n_in),
        lse(static_cast<size_t>(a.batch * a.n_heads * a.seq)),
        work(kernels::cuda::flash_attention_backward_workspace(a)) {}
  size_t n_out, n_in;
  Buf<bf16> qkv, out, dout, dqkv, ref;
  Buf<float> lse;
  Buf<char> work;
};

/// `buffers`, made at `a` unless they are already of a's shape: the backward rate rows of one
/// shape share one draw of qkv and dout (134 M host normals at the issue's shape, about 2 s), as
/// the forward rows share ForwardRateInputs. Each row runs its own forward and reference into them.
BackwardBuffers& backward_buffers(std::unique_ptr<BackwardBuffers>& buffers, const kernels::AttentionArgs& a) {
  const auto n_in = static_cast<size_t>(a.batch * a.seq * (a.n_heads + 2 * a.n_kv_heads) * a.d_head),
             n_out = static_cast<size_t>(a.batch * a.seq * a.n_heads * a.d_head);
  if (!buffers || buffers->n_in != n_in || buffers->n_out != n_out) buffers = std::make_unique<BackwardBuffers>(a);
  return *buffers;
}

/// "<name><suffix>" (+ dropout_suffix(big)): `backward` at `big` (the issue's shape, causal, with
/// or without dropout) with the launch option `option` of AttentionArgs set
/// (flash_backward_heaviest_first: the main kernel's blocks heaviest first across heads;
/// flash_backward_bulk_dq: the wgmma backward's dQ by bulk reductions), its TFLOP/s beside the row
/// `name` (+ the same dropout suffix: the same backward without the option; `what` says what the
/// option does), and how far its dqkv is from that row's: each block computes the same, but
/// dQ's float additions come in another order, so not bit-equal; within the wgmma backward row's
/// tolerance (2e-2 of the largest |dqkv|). `refusal`: why `backward` cannot run here, or "".
/// `buffers`: the rows' shared BackwardBuffers (backward_buffers).
void backward_option_row(test::CheckTable& t, const std::string& name, const std::string& suffix,
                         bool kernels::AttentionArgs::*option, const std::string& what,
                         const kernels::AttentionArgs& big, double flops, FlashBackward backward,
                         const std::string& refusal, std::unique_ptr<BackwardBuffers>& buffers) {
  t.run(name + suffix + dropout_suffix(big), [&] {
    if (!g_setup.cuda) return cuda_only();
    if (!refusal.empty()) return CheckResult::skipped(refusal);
    const auto stream = static_cast<cudaStream_t>(g_setup.exec().stream);
    BackwardBuffers& buf = backward_buffers(buffers, big);
    auto &qkv = buf.qkv, &out = buf.out, &dout = buf.dout, &dqkv = buf.dqkv, &ref = buf.ref;
    auto& lse = buf.lse;
    auto& work = buf.work;
    kernels::AttentionArgs with = big;
    with.*option = true;
    CUDA_OK(kernels::cuda::flash_attention_forward(stream, big, qkv.get(), out.get(), nullptr, lse.get()));
    CUDA_OK(backward(stream, big, qkv.get(), out.get(), dout.get(), lse.get(), ref.get(), work.get()));
    const Times ms = time_ms(
        [&] { CUDA_OK(backward(stream, with, qkv.get(), out.get(), dout.get(), lse.get(), dqkv.get(), work.get())); },
        10);
    const auto [worst, largest] = bf16_gap(dqkv.host(), ref.host());
    if (!(worst <= 2e-2 * largest))
      return CheckResult::fail(
          fmt("dqkv differs from the row without it by up to %.3g (largest |dqkv| %.3g)", worst, largest));
    return CheckResult::info(2.5 * flops / (ms.median * 1e-3) * 1e-12, "TFLOP/s",
                             fmt("%.3f ms (%.3f..%.3f); ", ms.median, ms.min, ms.max) + rate_shape(big) + ", " + what +
                                 fmt(" (without: the row above); |dqkv - its| <= %.3g", worst));
  });
}

/// "<name> heaviest first" (backward_option_row).
void heaviest_first_row(test::CheckTable& t, const std::string& name, const kernels::AttentionArgs& big, double flops,
                        FlashBackward backward, const std::string& refusal, std::unique_ptr<BackwardBuffers>& buffers) {
  backward_option_row(t, name, " heaviest first", &kernels::AttentionArgs::flash_backward_heaviest_first,
                      "blocks heaviest first across heads", big, flops, backward, refusal, buffers);
}

/// B=4, H=16, T=4096, dh=128, causal: half of the 4 B H T^2 dh FLOPs of a full product forward;
/// the backward's five products against the forward's two: 2.5x. The mma.sync rows ("attention/flash
/// forward", "... backward", "... backward heaviest first"), cuDNN's, then the mma.sync rows' dropout
/// twins (with_dropout: "... dropout 0.1", the same FLOP count), on the same buffers.
void attention_rates(test::CheckTable& t) {
  const kernels::AttentionArgs big{4, 4096, 16, 16, 128, 1.0 / std::sqrt(128.0)};
  const double flops = 4.0 * 4 * 16 * 4096.0 * 4096.0 * 128 / 2;
  std::unique_ptr<BackwardBuffers> buffers;  // every row's, made by the first that runs
  // TFLOP/s of `f` FLOPs in `run` (timed, after `prepare` once) at `a`, on the shared buffers.
  const auto rate = [&](const kernels::AttentionArgs& a, double f, const auto& prepare, const auto& run) {
    if (!g_setup.cuda) return cuda_only();
    const auto stream = static_cast<cudaStream_t>(g_setup.exec().stream);
    BackwardBuffers& b = backward_buffers(buffers, a);
    prepare(stream, b);
    const Times ms = time_ms([&] { run(stream, b); }, 10);
    return CheckResult::info(f / (ms.median * 1e-3) * 1e-12, "TFLOP/s",
                             fmt("%.3f ms (%.3f..%.3f); ", ms.median, ms.min, ms.max) + rate_shape(a));
  };
  const auto nothing = [](cudaStream_t, BackwardBuffers&) {};
  // The mma.sync forward, backward (after a forward) and backward heaviest first at `a`.
  const auto flash_rows = [&](const kernels::AttentionArgs& a) {
    const auto forward = [&](cudaStream_t stream, BackwardBuffers& b) {
      CUDA_OK(kernels::cuda::flash_attention_forward(stream, a, b.qkv.get(), b.out.get(), nullptr, b.lse.get()));
    };
    t.run("attention/flash forward" + dropout_suffix(a), [&] { return rate(a, flops, nothing, forward); });
    t.run("attention/flash backward" + dropout_suffix(a), [&] {
      return rate(a, 2.5 * flops, forward, [&](cudaStream_t stream, BackwardBuffers& b) {
        CUDA_OK(kernels::cuda::flash_attention_backward(stream, a, b.qkv.get(), b.out.get(), b.dout.get(), b.lse.get(),
                                                        b.dqkv.get(), b.work.get()));
      });
    });
    heaviest_first_row(t, "attention/flash backward", a, flops, kernels::cuda::flash_attention_backward, "", buffers);
  };
  flash_rows(big);
  // cuDNN's SDPA where it loads (kernels::cuda::cudnn_attention_available says why not).
  const auto cudnn_row = [&](const std::string& name, double f, const auto& prepare, const auto& run) {
    t.run(name, [&] {
      std::string why;
      if (g_setup.cuda && !kernels::cuda::cudnn_attention_available(&why)) return CheckResult::skipped(why);
      return rate(big, f, prepare, run);
    });
  };
  const auto cudnn_forward = [&](cudaStream_t stream, BackwardBuffers& b) {
    kernels::cuda::cudnn_attention_forward<bf16>(stream, big, b.qkv.get(), b.out.get(), b.lse.get());
  };
  cudnn_row("attention/cudnn forward", flops, nothing, cudnn_forward);
  cudnn_row("attention/cudnn backward", 2.5 * flops, cudnn_forward, [&](cudaStream_t stream, BackwardBuffers& b) {
    kernels::cuda::cudnn_attention_backward<bf16>(stream, big, b.qkv.get(), b.out.get(), b.lse.get(), b.dout.get(),
                                                  b.dqkv.get());
  });
  flash_rows(with_dropout(big));
}

}  // namespace
