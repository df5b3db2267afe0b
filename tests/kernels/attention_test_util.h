// defines: the shared pieces of the attention kernel tests (attention_test.cpp,
//          attention_properties_test.cpp, attention_fused_test.cpp, attention_tiled_test.cpp):
//          make_args, the buffer sizes of a configuration, run, the forward (and backward) on one
//          target with poisoned outputs; expect_step_read_from_memory (a captured step's dropout);
//          time_ms for the DISABLED_ timings
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "attention.h"
#include "kernel_test_util.h"

namespace bench::kernels::test_attention {

using namespace testing;  // NOLINT: the kernel test helpers

inline AttentionArgs make_args(int64_t b, int64_t t, int64_t h, int64_t hkv, int64_t dh, double softcap = 0,
                               int64_t window = 0, bool causal = true, double dropout = 0) {
  AttentionArgs a{b, t, h, hkv, dh, 1.0 / std::sqrt(static_cast<double>(dh))};
  a.softcap = softcap;
  a.window = window;
  a.causal = causal;
  a.dropout = dropout;
  a.dropout_seed = 0x5eed;
  return a;
}

inline int64_t qkv_size(const AttentionArgs& a) { return a.batch * a.seq * (a.n_heads + 2 * a.n_kv_heads) * a.d_head; }
inline int64_t out_size(const AttentionArgs& a) { return a.batch * a.seq * a.n_heads * a.d_head; }

/// Forward and backward of one configuration in storage type T.
template <class T>
struct AttentionRun {
  std::vector<T> out, probs, dqkv;
  std::vector<acc_t<T>> row_max;
};

/// The forward (and, with dout, the backward) on target t, every buffer in its memory, the
/// outputs poisoned; the results copied back.
template <class T>
AttentionRun<T> run(const Target& t, const AttentionArgs& a, const std::vector<T>& qkv, const std::vector<T>* dout) {
  const T poison = tile::from_acc<T>(77);
  Dev<T> gqkv(t, qkv), out(t, std::vector<T>(static_cast<size_t>(out_size(a)), poison));
  Dev<T> probs(t, std::vector<T>(static_cast<size_t>(attention_probs_size(a)), poison));
  Dev<T> ws(t, std::vector<T>(static_cast<size_t>(attention_workspace_size<T>(t.exec(), a)), poison));
  Dev<acc_t<T>> row_max(t, std::vector<acc_t<T>>(static_cast<size_t>(a.batch * a.n_heads * a.seq), acc_t<T>(0)));
  const Exec exec = t.exec();
  attention_forward<T>(exec, a, gqkv.get(), out.get(), probs.get(), row_max.get(), ws.get());
  AttentionRun<T> r;
  if (dout != nullptr) {
    Dev<T> gdout(t, *dout), dqkv(t, std::vector<T>(qkv.size(), poison));
    attention_backward<T>(exec, a, gqkv.get(), out.get(), probs.get(), gdout.get(), dqkv.get(), ws.get());
    r.dqkv = dqkv.host();
  }
  r.out = out.host();
  r.probs = probs.host();
  r.row_max = row_max.host();
  return r;
}

/// The dropout of a captured step: `run(a)` for steps 0, 1 and 6 of dropout site `site`, once
/// with the step's seed given (dropout_seed) and once with the site's seed and the step read
/// from t's memory (dropout_step_at, as a replay reads it); `same(got, want)` checks the two, and
/// each later step's out must differ from step 0's (a mask of its own).
template <class Run, class Same>
void expect_step_read_from_memory(const Target& t, AttentionArgs a, uint64_t case_seed, int64_t site, Run&& run,
                                  Same&& same) {
  decltype(run(a).out) first;
  for (const int64_t step : {0, 1, 6}) {
    SCOPED_TRACE(step);
    a.dropout_seed = dropout_seed(case_seed, step, site);
    a.dropout_step_at = nullptr;
    const auto want = run(a);
    const Dev<int64_t> at(t, std::vector<int64_t>{step});
    a.dropout_seed = dropout_launch_seed(case_seed, step, site, at.get());
    a.dropout_step_at = at.get();
    const auto got = run(a);
    same(got, want);
    if (step == 0) {
      first = got.out;
    } else {
      EXPECT_NE(got.out, first);
    }
  }
}

/// Median and best wall time in ms of `reps` calls of f after one warm-up call.
template <class F>
std::pair<double, double> time_ms(int reps, F&& f) {
  f();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

}  // namespace bench::kernels::test_attention
