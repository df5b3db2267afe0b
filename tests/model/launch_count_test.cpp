// The device's kernel launches of a norms.toml-shaped train step (forward, backward, AdamW),
// counted without a GPU: the model runs on the emulated device (tile::Backend::kEmulated, the
// emulated-block executor composing every launcher as CUDA does), and a LaunchObserver counts the
// outermost launches, as the profile's calls column does (tile/profile.h). The count is pinned to
// a closed formula in layers, batch and heads at several shapes, so that every change to it is
// seen; issue 35 turns the formula into a budget (at most ~30 launches per layer and a fixed few,
// independent of batch and heads).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "kernels/tile/profile.h"
#include "model/model.h"
#include "support/toml_case.h"

namespace bench {
namespace {

/// The outermost launches of the calling thread while it exists, by kernel name.
class LaunchCounter final : public tile::LaunchObserver {
 public:
  LaunchCounter() : previous_(tile::observe_launches(this)) {}
  ~LaunchCounter() override { tile::observe_launches(previous_); }
  LaunchCounter(const LaunchCounter&) = delete;
  LaunchCounter& operator=(const LaunchCounter&) = delete;

  void begin(const tile::Exec&, const char*) override {}
  void end(const tile::Exec&, const char* name, const tile::Traffic&) override {
    ++by_name[name];
    ++total;
  }

  std::map<std::string, int64_t> by_name;
  int64_t total = 0;

 private:
  tile::LaunchObserver* previous_;
};

/// THE FORMULA: the kernel launches of one train step (zero_grad, forward, backward, AdamW with
/// clipping) of experiments/norms.toml's first case (post-norm LayerNorm, RoPE, causal
/// materializing attention, SwiGLU, float32) on the device, in layers L, batch B and heads H.
/// The materializing attention launches one GEMM per (batch, head) pair and product: that is the
/// L * B * H term, which the batched products of issue 35 remove.
int64_t norms_step_launches(int64_t layers, int64_t batch, int64_t heads) {
  // Per layer and (batch, head) pair: the attention's products, forward S = Q K^T and O = P V,
  // backward dP = dO V^T, dV = P^T dO, dS K and dS^T Q (6 GEMMs).
  const int64_t per_pair = 6;
  // Per layer, once: TO BE MEASURED
  const int64_t per_layer = 0;
  // Once per step: TO BE MEASURED
  const int64_t fixed = 0;
  return layers * (per_layer + batch * heads * per_pair) + fixed;
}

/// experiments/norms.toml with its [model] table's shape replaced (small widths, so that the
/// emulated executor, which runs every program lane by lane, is quick).
std::string norms_shaped(int64_t layers, int64_t batch, int64_t heads) {
  std::ifstream in(std::string(BENCH_SOURCE_DIR) + "/experiments/norms.toml");
  std::stringstream text;
  text << in.rdbuf();
  const std::map<std::string, std::string> shape = {{"d_model", std::to_string(8 * heads)},
                                                    {"n_layers", std::to_string(layers)},
                                                    {"n_heads", std::to_string(heads)},
                                                    {"seq_len", "8"},
                                                    {"batch_size", std::to_string(batch)}};
  std::string out, line;
  int replaced = 0;
  while (std::getline(text, line)) {
    for (const auto& [key, value] : shape)
      if (line.rfind(key + " = ", 0) == 0) {
        line = key + " = " + value;
        ++replaced;
      }
    out += line + "\n";
  }
  EXPECT_EQ(replaced, 5) << "experiments/norms.toml's [model] table lost a shape key";
  return out;
}

/// The launches of one train step of norms.toml's first case at this shape on the emulated
/// device, after a first step (which may set up what later steps reuse, as the profile's warm-up
/// does).
std::pair<int64_t, std::map<std::string, int64_t>> count_step(int64_t layers, int64_t batch, int64_t heads) {
  // "cuda": no [cuda] table, so the file's [cpu] overrides (which would replace the shape) stay out.
  ResolvedCase rc = test::resolve(test::cases_of(norms_shaped(layers, batch, heads), "cuda", "norms.toml").at(0));
  EXPECT_EQ(rc.model.dims.n_layers, layers);
  EXPECT_EQ(rc.model.dims.batch_size, batch);
  EXPECT_EQ(rc.model.dims.n_heads, heads);
  rc.model.backend = tile::Backend::kEmulated;
  const test::Batch b = test::batch_of(rc, 0);
  Model m(rc.model, test::builtin_registry(), 1);
  RunContext ctx;
  ctx.probes = false;  // as the throughput runner times and profiles a step
  ctx.training = true;
  OptimizerStep opt;
  opt.lr = 1e-3;
  opt.decay_lr = opt.lr;
  opt.weight_decay = 0.1;
  opt.grad_clip = 1.0;
  const auto step = [&] {
    m.zero_grad();
    (void)m.forward(b.in.data(), b.tg.data(), ctx);
    m.backward(ctx);
    (void)m.optimizer_step(opt, ctx);
  };
  step();
  EXPECT_EQ(ctx.exec.backend, tile::Backend::kEmulated) << "the model must bind the emulated executor";
  LaunchCounter counter;
  step();
  return {counter.total, counter.by_name};
}

TEST(LaunchCount, NormsTrainStepOnTheEmulatedDeviceFollowsItsFormula) {
  // (layers, batch, heads): each of the three varies against the first, so that no other
  // formula linear in L and L * B * H fits all four.
  const int64_t shapes[][3] = {{1, 1, 1}, {2, 1, 1}, {1, 3, 1}, {1, 1, 2}, {3, 2, 4}};
  for (const auto& s : shapes) {
    const auto [total, by_name] = count_step(s[0], s[1], s[2]);
    std::string breakdown;
    for (const auto& [name, n] : by_name) breakdown += "  " + std::to_string(n) + "  " + name + "\n";
    EXPECT_EQ(total, norms_step_launches(s[0], s[1], s[2]))
        << "layers " << s[0] << ", batch " << s[1] << ", heads " << s[2] << "; the launches by kernel:\n"
        << breakdown;
  }
}

}  // namespace
}  // namespace bench
