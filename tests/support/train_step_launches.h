// defines: bench::test::emulated_train_step_launches — the kernel launches of one train step of
// a case on the emulated device (the device's composition, counted without a GPU).
#pragma once

#include <gtest/gtest.h>

#include "model/model.h"
#include "support/launch_counter.h"
#include "support/toml_case.h"

namespace bench::test {

/// The launches of one train step of `rc` on the emulated device as the throughput runner times
/// and profiles it (no probes: zero_grad, forward, backward, AdamW with clipping), after one
/// uncounted step (which may set up what later steps reuse, as the profile's warm-up does).
inline LaunchCounter::Counts emulated_train_step_launches(ResolvedCase rc) {
  rc.model.backend = tile::Backend::kEmulated;
  const Batch b = batch_of(rc, 0);
  Model m(rc.model, builtin_registry(), 1);
  RunContext ctx;
  ctx.probes = false;
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

}  // namespace bench::test
