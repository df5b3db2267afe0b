// The part of tests/cuda/cuda_check.cu for the bf16 flash forward and backward on wgmma
// (kernels/cuda/flash_attention_wgmma_kernels.cuh, flash_attention_wgmma_backward_kernels.cuh,
// sm_90a): their outputs against the float64 references for the variants of the mma.sync
// kernels, and their rates at the issue's shape beside the mma.sync kernels'. Written without a
// GPU (compiled for sm_90a, checked by the CPU emulator): these rows are their first run on one. Where it cannot run
// (not compute capability 9.0), every row is skipped with the reason. Included by cuda_check.cu only, after its
// helpers.
#pragma once

namespace {

/// A variant of flash_attention_wgmma_forward as the rows run it: its name in the rows, whether
/// warp-specialized, whether with TMA loads, the key tile asked for (AttentionArgs::
/// flash_forward_key_tile: 0 the launcher's choice, 128 warp-specialized, 64 in step).
struct WgmmaForwardVariant {
  const char* name;
  bool ws, tma;
  int key_tile;
};
constexpr WgmmaForwardVariant kWgmmaForwardVariants[] = {{"wgmma", false, false, 0},
                                                         {"wgmma_ws", true, false, 0},
                                                         {"wgmma_ws_tma", true, true, 0},
                                                         {"wgmma_ws_keys64", true, false, 64},
                                                         {"wgmma_ws_tma_keys64", true, true, 64}};

/// "wgmma/<case>/forward": out (bf16 tolerances of the mma.sync forward: 2e-2), row max and lse
/// (1e-3: float softmax statistics; lse from bf16 scores) against float64, on NaN-poisoned outputs;
/// "wgmma_ws/<case>/forward" the same for the warp-specialized forward (a producer warpgroup,
/// mbarriers, the consumers' ping-pong), "wgmma_ws_tma/<case>/forward" for it with TMA loads
/// (the producer's boxes into 128-byte swizzled tiles; the tensor map encoded by the driver), both
/// at their launched key tiles (128), and "wgmma_ws_keys64/..." and
/// "wgmma_ws_tma_keys64/..." for both at key tiles of 64 (kWgmmaForwardVariants).
/// "wgmma/<case>/backward": dqkv against float64 (2e-2 of the largest |dqkv|, 3e-2 relative) on
/// NaN-poisoned gradients; "wgmma_tma/<case>/backward" the same with Q and dO by TMA
/// (AttentionArgs::flash_backward_tma), "wgmma_ws/<case>/backward" warp-specialized
/// (AttentionArgs::flash_backward_ws: a producer warpgroup's TMA loads, the consumers at 240
/// registers; every case, the dropout one at d 128 too).
void wgmma_checks(test::CheckTable& t) {
  std::vector<std::pair<kernels::AttentionArgs, std::string>> cases;
  kernels::AttentionArgs a{2, 257, 4, 4, 64, 0.125};
  cases.emplace_back(a, "MHA T=257 dh=64");
  a = {1, 300, 8, 2, 128, 1.0 / std::sqrt(128.0)};
  a.window = 100;
  cases.emplace_back(a, "GQA 8/2 T=300 dh=128 window=100");
  a = {2, 129, 4, 1, 64, 0.125};
  a.causal = false;
  a.softcap = 30;
  cases.emplace_back(a, "MQA non-causal T=129 dh=64 softcap=30");
  a = {2, 200, 4, 2, 128, 1.0 / std::sqrt(128.0)};
  a.dropout = 0.1;
  a.dropout_seed = 5;
  cases.emplace_back(a, "GQA 4/2 T=200 dh=128 dropout=0.1");
  a = {1, 190, 2, 1, 64, -0.125};
  cases.emplace_back(a, "MQA T=190 dh=64 negative scale");
  a = {1, 1000, 2, 2, 128, 1.0 / std::sqrt(128.0)};
  cases.emplace_back(a, "MHA T=1000 dh=128");
  for (const auto& [case_args, name] : cases) {
    for (const WgmmaForwardVariant& variant : kWgmmaForwardVariants)
      t.run(std::string(variant.name) + "/" + name + "/forward", [&, base = case_args, variant] {
        kernels::AttentionArgs args = base;
        args.flash_forward_key_tile = variant.key_tile;
        if (!g_setup.cuda) return cuda_only();
        if (const std::string why = kernels::cuda::flash_attention_wgmma_refusal(args); !why.empty())
          return CheckResult::skipped(why);
        const int64_t width = (args.n_heads + 2 * args.n_kv_heads) * args.d_head;
        const auto qkv = random_vec<bf16>(static_cast<size_t>(args.batch * args.seq * width), 47);
        std::vector<double> qkv64, out_ref, max_ref;
        for (const bf16 v : qkv) qkv64.push_back(to_double(v));
        kernels::attention_forward_reference(args, qkv64, out_ref, &max_ref);
        const std::vector<double> lse_ref = kernels::attention_lse_reference(args, qkv64);
        Buf<bf16> in(qkv), out(std::vector<bf16>(out_ref.size(), tile::float_to_bf16(NAN)));
        Buf<float> row_max(std::vector<float>(max_ref.size(), NAN)), lse(std::vector<float>(lse_ref.size(), NAN));
        CUDA_OK(kernels::cuda::flash_attention_wgmma_forward(static_cast<cudaStream_t>(g_setup.exec().stream), args,
                                                             in.get(), out.get(), row_max.get(), lse.get(), variant.ws,
                                                             variant.tma));
        CheckResult r = compare(out_ref, out.host(), 2e-2, 2e-2);
        if (r.result != "PASS") return CheckResult::fail("out: " + r.detail);
        if (const CheckResult m = compare(max_ref, row_max.host(), 1e-3, 1e-3); m.result != "PASS")
          return CheckResult::fail("row max: " + m.detail);
        // Both log-sum-exps are of the undropped probabilities (dropout scales P V only).
        if (const CheckResult l = compare(lse_ref, lse.host(), 1e-3, 1e-3); l.result != "PASS")
          return CheckResult::fail("lse: " + l.detail);
        return r;
      });
    for (const int load : {0, 1, 2})  // cp.async, TMA, warp-specialized (by TMA)
      t.run(std::string(load == 2   ? "wgmma_ws/"
                        : load == 1 ? "wgmma_tma/"
                                    : "wgmma/") +
                name + "/backward",
            [&, base = case_args, load] {
              kernels::AttentionArgs args = base;
              args.flash_backward_tma = load == 1;
              args.flash_backward_ws = load == 2;
              if (!g_setup.cuda) return cuda_only();
              if (const std::string why = kernels::cuda::flash_attention_wgmma_backward_refusal(args); !why.empty())
                return CheckResult::skipped(why);
              const auto stream = static_cast<cudaStream_t>(g_setup.exec().stream);
              const int64_t width = (args.n_heads + 2 * args.n_kv_heads) * args.d_head;
              const size_t n_out = static_cast<size_t>(args.batch * args.seq * args.n_heads * args.d_head);
              const auto qkv = random_vec<bf16>(static_cast<size_t>(args.batch * args.seq * width), 48);
              const auto dout = random_vec<bf16>(n_out, 49);
              std::vector<double> qkv64, dout64, ref;
              for (const bf16 v : qkv) qkv64.push_back(to_double(v));
              for (const bf16 v : dout) dout64.push_back(to_double(v));
              kernels::attention_backward_reference(args, qkv64, dout64, ref);
              Buf<bf16> in(qkv), d_o(dout), out(n_out), dqkv(std::vector<bf16>(qkv.size(), tile::float_to_bf16(NAN)));
              Buf<float> lse(static_cast<size_t>(args.batch * args.n_heads * args.seq));
              Buf<char> work(kernels::cuda::flash_attention_backward_workspace(args));
              CUDA_OK(kernels::cuda::flash_attention_forward(stream, args, in.get(), out.get(), nullptr, lse.get()));
              CUDA_OK(kernels::cuda::flash_attention_wgmma_backward(stream, args, in.get(), out.get(), d_o.get(),
                                                                    lse.get(), dqkv.get(), work.get()));
              double scale = 0;
              for (const double v : ref) scale = std::max(scale, std::abs(v));
              return compare(ref, dqkv.host(), 2e-2 * scale, 3e-2);
            });
  }
}

/// What the forward rate rows of one AttentionArgs share, made by the first of them that runs
/// (none, where --only skips them all): random qkv (seed 32) and the mma.sync forward's output
/// at the same args (with dropout, the same keep mask: kernels/dropout.h), each row's reference.
struct ForwardRateInputs {
  explicit ForwardRateInputs(const kernels::AttentionArgs& a)
      : n_out(static_cast<size_t>(a.batch * a.seq * a.n_heads * a.d_head)),
        qkv(random_vec<bf16>(static_cast<size_t>(a.batch * a.seq * (a.n_heads + 2 * a.n_kv_heads) * a.d_head), 32)),
        out(n_out),
        lse(static_cast<size_t>(a.batch * a.n_heads * a.seq)) {
    Buf<bf16> ref_out(n_out);
    CUDA_OK(kernels::cuda::flash_attention_forward(static_cast<cudaStream_t>(g_setup.exec().stream), a, qkv.get(),
                                                   ref_out.get(), nullptr, lse.get()));
    ref = ref_out.host();
  }
  size_t n_out;
  Buf<bf16> qkv, out;
  Buf<float> lse;
  std::vector<bf16> ref;
};

/// "attention/flash wgmma<variant> forward" (+ " keys 64", + `suffix`): TFLOP/s of `variant` at
/// `args` (the issue's shape), and how far its output is from the mma.sync forward's there (the
/// float64 reference is too slow at this size): within 2e-2 + 2e-2 |mma.sync's| an element, the
/// float64 rows' tolerance (a bf16 output of 4..8 is 0.031 from its neighbours). `inputs`: the
/// rows' shared ForwardRateInputs at `args`, made here if it is not yet.
void forward_rate_row(test::CheckTable& t, const WgmmaForwardVariant& variant, kernels::AttentionArgs args,
                      double flops, const std::string& suffix, std::unique_ptr<ForwardRateInputs>& inputs) {
  args.flash_forward_key_tile = variant.key_tile;
  const int kn = kernels::cuda::flash_attention_wgmma_key_tile(args, variant.ws);
  const std::string name = std::string("attention/flash wgmma") + (variant.ws ? " ws" : "") +
                           (variant.tma ? " tma" : "") + " forward" + (variant.key_tile == 64 ? " keys 64" : "") +
                           suffix;
  t.run(name, [&, args, variant, kn] {
    if (!g_setup.cuda) return cuda_only();
    if (const std::string why = kernels::cuda::flash_attention_wgmma_refusal(args); !why.empty())
      return CheckResult::skipped(why);
    const auto stream = static_cast<cudaStream_t>(g_setup.exec().stream);
    if (!inputs) inputs = std::make_unique<ForwardRateInputs>(args);
    ForwardRateInputs& in = *inputs;
    const Times ms = time_ms(
        [&] {
          CUDA_OK(kernels::cuda::flash_attention_wgmma_forward(stream, args, in.qkv.get(), in.out.get(), nullptr,
                                                               in.lse.get(), variant.ws, variant.tma));
        },
        10);
    const CheckResult gap = compare(in.ref, in.out.host(), 2e-2, 2e-2);
    if (gap.result != "PASS") return CheckResult::fail("output against the mma.sync forward's: " + gap.detail);
    return CheckResult::info(flops / (ms.median * 1e-3) * 1e-12, "TFLOP/s",
                             fmt("%.3f ms (%.3f..%.3f); ", ms.median, ms.min, ms.max) + rate_shape(args) +
                                 fmt(", key tiles of %.0f; |out - mma.sync's| <= %.3g", kn, gap.value));
  });
}

/// "<name>": TFLOP/s of the wgmma backward at `args` (the issue's shape), after the mma.sync
/// forward, and how far its dqkv is from the mma.sync backward's there. `buffers`: the rows' shared
/// BackwardBuffers (backward_buffers).
void backward_rate_row(test::CheckTable& t, const std::string& name, const kernels::AttentionArgs& args, double flops,
                       std::unique_ptr<BackwardBuffers>& buffers) {
  t.run(name, [&] {
    if (!g_setup.cuda) return cuda_only();
    if (const std::string why = kernels::cuda::flash_attention_wgmma_backward_refusal(args); !why.empty())
      return CheckResult::skipped(why);
    const auto stream = static_cast<cudaStream_t>(g_setup.exec().stream);
    BackwardBuffers& buf = backward_buffers(buffers, args);
    auto &qkv = buf.qkv, &out = buf.out, &dout = buf.dout, &dqkv = buf.dqkv, &ref = buf.ref;
    auto& lse = buf.lse;
    auto& work = buf.work;
    CUDA_OK(kernels::cuda::flash_attention_forward(stream, args, qkv.get(), out.get(), nullptr, lse.get()));
    CUDA_OK(kernels::cuda::flash_attention_backward(stream, args, qkv.get(), out.get(), dout.get(), lse.get(),
                                                    ref.get(), work.get()));
    const Times ms = time_ms(
        [&] {
          CUDA_OK(kernels::cuda::flash_attention_wgmma_backward(stream, args, qkv.get(), out.get(), dout.get(),
                                                                lse.get(), dqkv.get(), work.get()));
        },
        10);
    // dQ sums atomics in another order, dK and dV come from other tensor-core instructions: bf16
    // gradients of this size agree to a few units of their last place, measured against the largest.
    const auto [worst, largest] = bf16_gap(dqkv.host(), ref.host());
    if (!(worst <= 2e-2 * largest))
      return CheckResult::fail(
          fmt("dqkv differs from the mma.sync backward's by up to %.3g (largest |dqkv| %.3g)", worst, largest));
    return CheckResult::info(2.5 * flops / (ms.median * 1e-3) * 1e-12, "TFLOP/s",
                             fmt("%.3f ms (%.3f..%.3f); ", ms.median, ms.min, ms.max) + rate_shape(args) +
                                 fmt("; |dqkv - mma.sync's| <= %.3g", worst));
  });
}

/// "attention/flash wgmma forward", "... wgmma ws forward" (the warp-specialized forward), "... wgmma
/// ws tma forward" (it with TMA loads), both at key tiles of 128 (the launcher's choice), "... wgmma
/// ws forward keys 64" and "... wgmma ws tma forward keys 64" (both at 64: the
/// key tile as a launch-time choice, AttentionArgs::flash_forward_key_tile), and "... wgmma
/// backward" (and "... wgmma backward heaviest first", "... wgmma backward bulk dq", "... wgmma
/// backward tma", "... wgmma backward ws", backward_option_row): TFLOP/s at B=4 H=16 T=4096 dh=128
/// causal (the issue's shape; "attention/flash forward" and "... backward" are the mma.sync kernels at the same shape).
/// Then all again with dropout 0.1 (with_dropout: "... dropout 0.1", dropout_suffix): the same FLOP count
/// (dropout's hashes are not products), so each rate reads against its row without dropout.
void wgmma_rates(test::CheckTable& t) {
  const kernels::AttentionArgs big{4, 4096, 16, 16, 128, 1.0 / std::sqrt(128.0)};
  const double flops = 4.0 * 4 * 16 * 4096.0 * 4096.0 * 128 / 2;
  std::unique_ptr<BackwardBuffers> buffers;  // the nine backward rows', made by the first that runs
  for (const kernels::AttentionArgs& args : {big, with_dropout(big)}) {
    std::unique_ptr<ForwardRateInputs> inputs;
    for (const WgmmaForwardVariant& variant : kWgmmaForwardVariants)
      forward_rate_row(t, variant, args, flops, dropout_suffix(args), inputs);
    inputs.reset();
    // The backward's five products against the forward's two: 2.5x the FLOPs ("attention/flash
    // backward" is the mma.sync backward at the same shape). Each runs after the mma.sync forward.
    backward_rate_row(t, "attention/flash wgmma backward" + dropout_suffix(args), args, flops, buffers);
    const std::string refusal = g_setup.cuda ? kernels::cuda::flash_attention_wgmma_backward_refusal(args) : "";
    heaviest_first_row(t, "attention/flash wgmma backward", args, flops, kernels::cuda::flash_attention_wgmma_backward,
                       refusal, buffers);
    backward_option_row(t, "attention/flash wgmma backward", " bulk dq",
                        &kernels::AttentionArgs::flash_backward_bulk_dq,
                        "dQ by cp.reduce.async.bulk of staged rows, not per-thread red.global.add", args, flops,
                        kernels::cuda::flash_attention_wgmma_backward, refusal, buffers);
    backward_option_row(t, "attention/flash wgmma backward", " tma", &kernels::AttentionArgs::flash_backward_tma,
                        "Q and dO by TMA (cp.async.bulk.tensor under an mbarrier), not cp.async", args, flops,
                        kernels::cuda::flash_attention_wgmma_backward, refusal, buffers);
    kernels::AttentionArgs ws = args;
    ws.flash_backward_ws = true;
    backward_option_row(t, "attention/flash wgmma backward", " ws", &kernels::AttentionArgs::flash_backward_ws,
                        "warp-specialized: a producer warpgroup's TMA loads of Q and dO, consumers at 240 registers",
                        args, flops, kernels::cuda::flash_attention_wgmma_backward,
                        g_setup.cuda ? kernels::cuda::flash_attention_wgmma_backward_refusal(ws) : "", buffers);
  }
}

}  // namespace
