// The device's kernel launches of a norms.toml-shaped train step (forward, backward, AdamW),
// counted without a GPU: the model runs on the emulated device (tile::Backend::kEmulated, the
// emulated-block executor composing every launcher as CUDA does), and a LaunchObserver counts the
// outermost launches, as the profile's calls column does (tile/profile.h). The count is pinned to
// a closed formula in layers, batch and heads at several shapes, so that every change to it is
// seen; tests/model/launch_budget_test.cpp holds the budget (independent of batch and heads).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "model/model.h"
#include "support/toml_case.h"
#include "support/train_step_launches.h"

namespace bench {
namespace launch_count_test {
namespace {

/// THE FORMULA: the kernel launches of one train step (zero_grad, forward, backward, AdamW with
/// clipping) of experiments/norms.toml's first case (post-norm LayerNorm, RoPE, causal
/// attention, SwiGLU, float32) on the device, in layers L, batch B and heads H. It does not depend
/// on B and H: the attention core that `core = "auto"` takes on a device in float32, the fused one
/// (plugins/attention/core_fused.cpp), runs every (batch, head) pair in each of its launches. At
/// norms.toml's size (L 4, B 16, H 4) it is 4 x 26 + 11 = 115, where the H200's profile of
/// f904473 counted 2,707 (4 x (34 + 64 x 10) + 11: ten launches per (batch, head) pair),
/// 6f9598b's composition 195 (4 x 46 + 11: RoPE on q and k apart, each norm gradient summed in
/// two stages, and the residual adds of the forward launched apart) and ba95147's 155 (4 x 36 +
/// 11: the materializing core's 12 batched launches a layer).
/// tests/model/launch_budget_test.cpp holds the budget.
int64_t norms_step_launches(int64_t layers, int64_t /*batch*/, int64_t /*heads*/) {
  // Per layer, the attention core's (kernels/attention_fused.h): forward, one program per query
  // row (1); backward, one program per query row and one per key row in one launch (1).
  const int64_t attention = 2;
  // Per layer, the rest: 4 linear layers (QKV, output projection, SwiGLU's gate-up and down) x 3
  // GEMMs (forward NT; backward NN and TN) = 12; RoPE on q and k together (their heads are
  // adjacent in the qkv rows), forward and backward, 2; SwiGLU forward and backward, 2; 2
  // LayerNorms forward 2 and backward 2, each backward's weight and bias gradients summed over
  // its row groups by one more launch (kernels/norm.cpp, gradient_sums) 2; the 2 residual adds
  // of the backward (dx += ds after the sublayer's backward) 2, those of the forward being done by
  // the norm's launch on a device (s = x + f(x) written by it: bench/residual_norm.h).
  const int64_t per_layer = attention + 12 + 2 + 2 + 2 + 2 + 2 + 2;
  // Once per step: the embedding forward and backward, 2; the head's 3 GEMMs and the
  // cross-entropy (forward and backward in one), 4, and its loss's scale before it and its sums
  // after it, where the targets are (kernels/probes.h: target_scale, loss_sums), 2; AdamW: the
  // squared norms (SumTerms, SumPartials), the clip and bias-correction scalars (AdamWScalars)
  // and the update over the two parameter groups (decayed, not decayed), 5.
  const int64_t fixed = 2 + 4 + 2 + 5;
  return layers * per_layer + fixed;
}

/// experiments/norms.toml with its [model] table's shape replaced (small widths, so that the
/// emulated executor, which runs every program lane by lane, is quick; 72 tokens a sequence,
/// more than 64 a step as norms.toml's steps have, though the count no longer depends on that:
/// a norm's gradients take one launch at any size).
std::string norms_shaped(int64_t layers, int64_t batch, int64_t heads) {
  std::ifstream in(std::string(BENCH_SOURCE_DIR) + "/experiments/norms.toml");
  std::stringstream text;
  text << in.rdbuf();
  const std::map<std::string, std::string> shape = {{"d_model", std::to_string(8 * heads)},
                                                    {"n_layers", std::to_string(layers)},
                                                    {"n_heads", std::to_string(heads)},
                                                    {"seq_len", "72"},
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
test::LaunchCounter::Counts count_step(int64_t layers, int64_t batch, int64_t heads) {
  // "cuda": no [cuda] table, so the file's [cpu] overrides (which would replace the shape) stay out.
  const ResolvedCase rc = test::resolve(test::cases_of(norms_shaped(layers, batch, heads), "cuda", "norms.toml").at(0));
  EXPECT_EQ(rc.model.dims.n_layers, layers);
  EXPECT_EQ(rc.model.dims.batch_size, batch);
  EXPECT_EQ(rc.model.dims.n_heads, heads);
  return test::emulated_train_step_launches(rc);
}

TEST(LaunchCount, NormsTrainStepOnTheEmulatedDeviceFollowsItsFormula) {
  // (layers, batch, heads): each of the three varies against the first, so that no other
  // formula linear in L and L * B * H fits them all; batch x heads at least 2, so that the
  // attention's device workspace holds whole 72-token sequences (below).
  const int64_t shapes[][3] = {{1, 1, 2}, {2, 1, 2}, {1, 3, 2}, {1, 1, 3}, {3, 2, 4}};
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
}  // namespace launch_count_test
}  // namespace bench
