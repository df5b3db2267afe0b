// The launch budget of a train step on a device (issue 35): norms.toml's model shape (4 layers,
// batch 16, 4 heads; small d_model and T, which the count does not depend on) trained one step on
// the emulated device, which composes every launcher as CUDA does, launch for launch, and reports
// each outermost launch to the profile's hook (kernels/tile/profile.h). The materializing
// attention used to launch its GEMMs and softmax once per (batch, head) pair (2,707 launches a
// step on an H200, 2,707 here too: 674 per layer + 11); a step must now take at most 250, at most
// kPerLayerCeiling (30) per layer plus a fixed few, and the same number whatever the batch and
// heads.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "model/model.h"
#include "support/toml_case.h"
#include "support/train_step_launches.h"

namespace bench {
namespace launch_budget_test {
namespace {

using Counts = test::LaunchCounter::Counts;

struct Shape {
  int layers, batch, heads;
  std::string norm_position = "post", norm = "layernorm";  // norms.toml's first case
};

std::string experiment(const Shape& s) {
  // seq_len 32: at batch 4 already 128 rows, so the norms' gain gradients take their device's
  // two-stage column sum at every batch tried (kernels/norm.cpp, group_sum), as at norms.toml's
  // 4,096 rows.
  return "[model]\nd_model = 32\nseq_len = 32\nn_layers = " + std::to_string(s.layers) +
         "\nn_heads = " + std::to_string(s.heads) + "\nbatch_size = " + std::to_string(s.batch) +
         "\nnorm_position = \"" + s.norm_position + "\"\nnorm = \"" + s.norm +
         "\"\nposition = \"rope\"\nattention = \"causal\"\nffn = \"swiglu\"\n"
         "[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n";
}

/// The launches of one train step on the emulated device (test::emulated_train_step_launches).
Counts count_step(const Shape& s) { return test::emulated_train_step_launches(test::resolve_first(experiment(s))); }

std::string listing(const Counts& c) {
  std::string out;
  for (const auto& [name, n] : c.by_name) out += "  " + std::to_string(n) + "  " + name + "\n";
  return out;
}

/// Launches per layer that a train step may take: the 30, for every variant. The device
/// composition takes 26 (post, pre, output; LayerNorm or RMSNorm) and 30 (double: two norms
/// more): the attention's core 2 (the fused core that auto takes on a device in float32,
/// kernels/attention_fused.h: one program per query row forward; one launch backward, programs
/// per query row and per key row side by side), the attention's frame 8 (six projection GEMMs,
/// RoPE on q and k together forward and backward), the FFN 8 (six GEMMs, SwiGLU forward and
/// backward), per norm 3 (forward, backward, and one launch summing its gain and bias
/// gradients), and the residual adds the norms do not fold (bench/residual_norm.h): post and
/// output 2 (the backward's), pre 2 (the forward's), double none. The double norm sits at the
/// ceiling because the fused backward is one launch (its key rows recompute D = dO.O rather than
/// read it from a second launch); the materializing core took 12 a layer (36 and 40: four
/// head-major copies, six batched GEMMs, two softmax launches), and a two-launch fused backward
/// would leave the double norm at 31. This ceiling was 50 at 6f9598b and 40 at ba95147.
constexpr int kPerLayerCeiling = 30;

/// The kernels whose counts differ between a and b: "name: a vs b" lines.
std::string difference(const Counts& a, const Counts& b) {
  std::map<std::string, std::pair<int64_t, int64_t>> both;
  for (const auto& [name, n] : a.by_name) both[name].first = n;
  for (const auto& [name, n] : b.by_name) both[name].second = n;
  std::string out;
  for (const auto& [name, n] : both)
    if (n.first != n.second)
      out += "  " + name + ": " + std::to_string(n.first) + " vs " + std::to_string(n.second) + "\n";
  return out;
}

TEST(LaunchBudget, TrainStepOnTheDeviceStaysWithinTheBudget) {
  // Every variant of experiments/norms.toml (norm position x norm type).
  for (const auto& [position, norm] : {std::pair<std::string, std::string>{"post", "layernorm"},
                                       {"post", "rmsnorm"},
                                       {"pre", "layernorm"},
                                       {"pre", "rmsnorm"},
                                       {"double", "layernorm"},
                                       {"double", "rmsnorm"},
                                       {"output", "layernorm"},
                                       {"output", "rmsnorm"}}) {
    SCOPED_TRACE(position + " " + norm);
    const Counts norms_shape = count_step({4, 16, 4, position, norm});
    RecordProperty("launches_" + position + "_" + norm, static_cast<int>(norms_shape.total));
    EXPECT_LE(norms_shape.total, 250) << listing(norms_shape);
    // Independent of the batch (16 and 4) and of the heads (4 and 2; d_head changes with them).
    // The shapes below take batch 4: an emulated step's time grows with the batch, its launches
    // do not (the sanitizer pass took 60 CPU-s with the per-layer steps at batch 16 and a third
    // shape, 16 x 2, that changed both at once).
    const Counts batch4 = count_step({4, 4, 4, position, norm});
    EXPECT_EQ(batch4.total, norms_shape.total) << "batch 4:\n" << difference(batch4, norms_shape);
    const Counts heads2 = count_step({4, 4, 2, position, norm});
    EXPECT_EQ(heads2.total, batch4.total) << "batch 4, heads 2:\n" << difference(heads2, batch4);
    // Per layer, from 2 and 4 layers: at most kPerLayerCeiling, and what does not grow with the
    // layers is a few.
    const Counts two = count_step({2, 4, 4, position, norm});
    const int64_t per_layer = (batch4.total - two.total) / 2;
    const int64_t fixed = two.total - 2 * per_layer;
    EXPECT_EQ(batch4.total, fixed + 4 * per_layer);
    EXPECT_LE(per_layer, kPerLayerCeiling) << listing(norms_shape);
    EXPECT_LE(fixed, 30) << listing(two);
    std::printf("%s %s: %lld launches a step (4 layers, batch 16, 4 heads): %lld per layer + %lld\n%s",
                position.c_str(), norm.c_str(), static_cast<long long>(norms_shape.total),
                static_cast<long long>(per_layer), static_cast<long long>(fixed), listing(norms_shape).c_str());
  }
}

}  // namespace
}  // namespace launch_budget_test
}  // namespace bench
