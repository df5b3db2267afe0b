// The part of tests/cuda/cuda_check.cu for the float32 flash attention
// (kernels/cuda/flash_attention_f32_kernels.cuh): forward and backward against the float64
// references on outputs poisoned with NaN, the backward's determinism (two runs, the same bits),
// and the rates at norms.toml's size and at the bf16 kernels' size. Included by cuda_check.cu
// only, after its helpers.
#pragma once

namespace {

/// The float32 flash kernels against float64: "flash32/<case>/forward" (out, row max, lse),
/// "flash32/<case>/backward" (all of dqkv), "flash32/deterministic". Tolerances are float32's:
/// the kernels compute in float32 throughout, the SFU's ex2.approx (about 2^-22 relative) the
/// only approximation; the CPU emulator of the same source sees at most 6e-7 (out) and 2.6e-6
/// (dqkv) of (1 + |ref|).
void flash32_checks(test::CheckTable& t) {
  std::vector<std::pair<kernels::AttentionArgs, std::string>> cases;
  kernels::AttentionArgs a{16, 256, 4, 4, 64, 0.125};
  cases.emplace_back(a, "norms B=16 H=4 T=256 dh=64");
  a = {1, 300, 8, 2, 128, 1.0 / std::sqrt(128.0)};
  a.window = 100;
  cases.emplace_back(a, "GQA 8/2 T=300 dh=128 window=100");
  a = {2, 129, 4, 1, 64, 0.125};
  a.causal = false;
  a.softcap = 30;
  cases.emplace_back(a, "MQA non-causal T=129 dh=64 softcap=30");
  a = {2, 200, 4, 2, 64, 0.125};
  a.dropout = 0.1;
  a.dropout_seed = 5;
  cases.emplace_back(a, "GQA 4/2 T=200 dh=64 dropout=0.1");
  a = {1, 190, 2, 2, 128, 1.0 / std::sqrt(128.0)};
  a.causal = false;
  a.window = 50;
  cases.emplace_back(a, "MHA non-causal T=190 dh=128 window=50");
  const auto stream = [] { return static_cast<cudaStream_t>(g_setup.exec().stream); };
  for (const auto& [args, name] : cases) {
    struct State {
      std::vector<double> qkv64, dout64;
      std::unique_ptr<Buf<float>> qkv, dout, out, lse, dqkv;
      std::unique_ptr<Buf<char>> work;
      bool forward_ran = false;
    } s;
    t.run("flash32/" + name + "/forward", [&, args = args] {
      if (!g_setup.cuda) return cuda_only();
      const int64_t width = (args.n_heads + 2 * args.n_kv_heads) * args.d_head;
      const auto qkv = random_vec<float>(static_cast<size_t>(args.batch * args.seq * width), 41);
      const auto dout = random_vec<float>(static_cast<size_t>(args.batch * args.seq * args.n_heads * args.d_head), 42);
      s.qkv64.assign(qkv.begin(), qkv.end());
      s.dout64.assign(dout.begin(), dout.end());
      std::vector<double> out_ref, max_ref;
      kernels::attention_forward_reference(args, s.qkv64, out_ref, &max_ref);
      const std::vector<double> lse_ref = kernels::attention_lse_reference(args, s.qkv64);
      s.qkv = std::make_unique<Buf<float>>(qkv);
      s.dout = std::make_unique<Buf<float>>(dout);
      s.out = std::make_unique<Buf<float>>(out_ref.size());
      s.lse = std::make_unique<Buf<float>>(lse_ref.size());
      s.work = std::make_unique<Buf<char>>(kernels::cuda::flash_attention_f32_backward_workspace(args));
      s.dqkv = std::make_unique<Buf<float>>(qkv.size());
      Buf<float> row_max(max_ref.size());
      CUDA_OK(kernels::cuda::flash_attention_f32_forward(stream(), args, s.qkv->get(), s.out->get(), row_max.get(),
                                                         s.lse->get()));
      s.forward_ran = true;
      CheckResult r = compare(out_ref, s.out->host(), 1e-5, 1e-5);
      if (r.result != "PASS") return CheckResult::fail("out: " + r.detail);
      if (const CheckResult m = compare(max_ref, row_max.host(), 1e-5, 1e-5); m.result != "PASS")
        return CheckResult::fail("row max: " + m.detail);
      if (const CheckResult l = compare(lse_ref, s.lse->host(), 1e-5, 1e-5); l.result != "PASS")
        return CheckResult::fail("lse: " + l.detail);
      return r;
    });
    t.run("flash32/" + name + "/backward", [&, args = args] {
      if (!g_setup.cuda) return cuda_only();
      if (!s.forward_ran) return CheckResult::skipped("its forward did not run");
      std::vector<double> ref;
      kernels::attention_backward_reference(args, s.qkv64, s.dout64, ref);
      CUDA_OK(kernels::cuda::flash_attention_f32_backward(stream(), args, s.qkv->get(), s.out->get(), s.dout->get(),
                                                          s.lse->get(), s.dqkv->get(), s.work->get()));
      return compare(ref, s.dqkv->host(), 2e-5, 2e-5);
    });
  }
  t.run("flash32/deterministic", [&] {
    if (!g_setup.cuda) return cuda_only();
    const kernels::AttentionArgs d{4, 256, 4, 2, 64, 0.125};
    const int64_t width = (d.n_heads + 2 * d.n_kv_heads) * d.d_head;
    const size_t n_out = static_cast<size_t>(d.batch * d.seq * d.n_heads * d.d_head);
    Buf<float> qkv(random_vec<float>(static_cast<size_t>(d.batch * d.seq * width), 43)), out(n_out),
        dout(random_vec<float>(n_out, 44)), lse(static_cast<size_t>(d.batch * d.n_heads * d.seq)),
        first(static_cast<size_t>(d.batch * d.seq * width)), second(first.size());
    Buf<char> work(kernels::cuda::flash_attention_f32_backward_workspace(d));
    CUDA_OK(kernels::cuda::flash_attention_f32_forward(stream(), d, qkv.get(), out.get(), nullptr, lse.get()));
    CUDA_OK(kernels::cuda::flash_attention_f32_backward(stream(), d, qkv.get(), out.get(), dout.get(), lse.get(),
                                                        first.get(), work.get()));
    CUDA_OK(kernels::cuda::flash_attention_f32_backward(stream(), d, qkv.get(), out.get(), dout.get(), lse.get(),
                                                        second.get(), work.get()));
    const std::vector<float> a1 = first.host(), a2 = second.host();
    return std::memcmp(a1.data(), a2.data(), a1.size() * sizeof(float)) == 0
               ? CheckResult::pass("dqkv the same bits on a second run")
               : CheckResult::fail("dqkv differs between two runs");
  });
}

/// TFLOP/s of the float32 flash kernels: at norms.toml's size (the train step's attention, the
/// 2 ms target's largest part) and at the bf16 kernels' B=4 H=16 T=4096 dh=128 (causal both).
void flash32_rates(test::CheckTable& t) {
  struct Shape {
    const char* name;
    kernels::AttentionArgs args;
  };
  const Shape shapes[] = {{"norms", {16, 256, 4, 4, 64, 0.125}},
                          {"big", {4, 4096, 16, 16, 128, 1.0 / std::sqrt(128.0)}}};
  for (const Shape& sh : shapes) {
    const std::string fwd = std::string("attention/flash f32 forward/") + sh.name,
                      bwd = std::string("attention/flash f32 backward/") + sh.name;
    if (!g_setup.cuda) {
      t.run(fwd, [] { return cuda_only(); });
      t.run(bwd, [] { return cuda_only(); });
      continue;
    }
    const kernels::AttentionArgs& a = sh.args;
    const auto stream = static_cast<cudaStream_t>(g_setup.exec().stream);
    const double flops = 4.0 * static_cast<double>(a.batch * a.n_heads) * static_cast<double>(a.seq * a.seq) *
                         static_cast<double>(a.d_head) / 2;
    const int64_t width = (a.n_heads + 2 * a.n_kv_heads) * a.d_head;
    const size_t n_out = static_cast<size_t>(a.batch * a.seq * a.n_heads * a.d_head);
    Buf<float> qkv(random_vec<float>(static_cast<size_t>(a.batch * a.seq * width), 45)), out(n_out),
        dout(random_vec<float>(n_out, 46)), dqkv(static_cast<size_t>(a.batch * a.seq * width)),
        lse(static_cast<size_t>(a.batch * a.n_heads * a.seq));
    Buf<char> work(kernels::cuda::flash_attention_f32_backward_workspace(a));
    const std::string shape =
        fmt("B=%.0f H=%.0f T=%.0f dh=%.0f causal", static_cast<double>(a.batch), static_cast<double>(a.n_heads),
            static_cast<double>(a.seq), static_cast<double>(a.d_head));
    const auto rate = [&](double f, const Times& ms) {
      return CheckResult::info(f / (ms.median * 1e-3) * 1e-12, "TFLOP/s",
                               fmt("%.3f ms (%.3f..%.3f); ", ms.median, ms.min, ms.max) + shape);
    };
    const auto forward = [&] {
      CUDA_OK(kernels::cuda::flash_attention_f32_forward(stream, a, qkv.get(), out.get(), nullptr, lse.get()));
    };
    t.run(fwd, [&] { return rate(flops, time_ms(forward, 10)); });
    t.run(bwd, [&] {
      forward();
      return rate(2.5 * flops,
                  time_ms(
                      [&] {
                        CUDA_OK(kernels::cuda::flash_attention_f32_backward(stream, a, qkv.get(), out.get(), dout.get(),
                                                                            lse.get(), dqkv.get(), work.get()));
                      },
                      10));
    });
  }
}

}  // namespace
