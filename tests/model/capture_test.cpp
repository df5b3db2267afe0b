// A train step under the rules of CUDA-graph capture, checked without a GPU: on the guarded
// device (the CPU executor on memory that faults on host access) with a kernels::CaptureScope,
// which makes every copy between the host and the device, every synchronize and every allocation
// throw. A "replay" here is the step run again under those rules: it must need nothing from the
// host (tokens, loss, grad norm, step count, clip factor all stay in the model's memory) and
// give bitwise the parameters of the same steps run the ordinary way.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/interfaces.h"
#include "kernels/memory.h"
#include "model/model.h"
#include "support/toml_case.h"

namespace bench {
namespace capture_test {
namespace {

using test::Batch;
using test::batch_of;

// GQA with QK-norm (strided copies within the device), dropout (masks from the seed and step),
// grad clipping that acts (a norm above 0.05) and weight decay.
std::string experiment(const std::string& dtype) {
  return "[model]\nd_model = 32\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nseq_len = 16\nbatch_size = 2\n"
         "dtype = \"" +
         dtype +
         "\"\ndropout_attention = 0.1\ndropout_residual = 0.1\n"
         "attention = { type = \"causal\", qk_norm = \"rmsnorm\" }\n"
         "[data]\ntype = \"synthetic\"\nreference_tokens = 2048\n[stability]\n";
}

OptimizerStep clipped() {
  OptimizerStep opt;
  opt.lr = 1e-2;
  opt.decay_lr = opt.lr;
  opt.weight_decay = 0.1;
  opt.grad_clip = 0.05;
  return opt;
}

/// Four clipped() steps, the learning rate ramping 1e-2 / 4, 2e-2 / 4, ... 1e-2.
std::vector<OptimizerStep> ramp() {
  std::vector<OptimizerStep> schedule;
  for (int k = 0; k < 4; ++k) {
    OptimizerStep opt = clipped();
    opt.lr = 1e-2 * (k + 1) / 4;
    schedule.push_back(opt);
  }
  return schedule;
}

/// Batches 0 to 3 of the case, one per step of ramp().
std::vector<Batch> four_batches(const ResolvedCase& rc) {
  std::vector<Batch> batches;
  for (int k = 0; k < 4; ++k) batches.push_back(batch_of(rc, k));
  return batches;
}

void train_step(Model& m, const Batch& b, const OptimizerStep& opt, RunContext& ctx, double* loss, double* norm) {
  ctx.training = true;
  m.zero_grad();
  *loss = m.forward(b.in.data(), b.tg.data(), ctx).loss;
  m.backward(ctx);
  *norm = m.optimizer_step(opt, ctx);
}

class CapturedStep : public ::testing::TestWithParam<std::string> {};

TEST_P(CapturedStep, ReplaysMatchUncapturedStepsBitwise) {
  ResolvedCase rc = test::resolve_first(experiment(GetParam()));
  rc.model.backend = tile::Backend::kGuarded;
  const Batch b = batch_of(rc, 0);
  const OptimizerStep opt = clipped();
  Model plain(rc.model, test::builtin_registry(), 4), captured(rc.model, test::builtin_registry(), 4);
  ASSERT_EQ(plain.memory(), kernels::Memory::kGuarded);
  RunContext c1, c2;
  c1.seed = c2.seed = 4;
  c1.probes = c2.probes = false;  // as the throughput runner times them
  double loss = 0, norm = 0;
  std::vector<double> norms;
  for (int s = 0; s < 4; ++s) {
    train_step(plain, b, opt, c1, &loss, &norm);
    norms.push_back(norm);
  }
  EXPECT_GT(norms[0], opt.grad_clip) << "the clip must act for the test to cover it";

  train_step(captured, b, opt, c2, &loss, &norm);  // uncaptured: stages the tokens
  EXPECT_EQ(norm, norms[0]);
  c2.capturing = true;
  {
    const kernels::CaptureScope scope;
    for (int replay = 0; replay < 3; ++replay) {
      train_step(captured, b, opt, c2, &loss, &norm);
      EXPECT_TRUE(std::isnan(loss)) << "a captured step reads no loss back";
      EXPECT_TRUE(std::isnan(norm)) << "nor the grad norm";
    }
  }
  c2.capturing = false;
  EXPECT_EQ(plain.parameter_values(), captured.parameter_values());
  // The next ordinary step continues the same run: the step count went on during the replays.
  train_step(plain, b, opt, c1, &loss, &norm);
  const double expected = loss, expected_norm = norm;
  train_step(captured, b, opt, c2, &loss, &norm);
  EXPECT_EQ(loss, expected);
  EXPECT_EQ(norm, expected_norm);
  EXPECT_EQ(plain.parameter_values(), captured.parameter_values());
}

// A replayed step follows a schedule: its learning rate and decay are read from the model's
// memory (Model::stage_optimizer, written outside the capture), not taken from the settings the
// step was captured with. The "replays" below are handed the first step's settings on purpose;
// staged with each step's own (a warm-up, and an independent decay that is not lr * wd), they
// give bitwise the parameters of ordinary steps with those settings. Without the staging they
// would not (the control).
TEST_P(CapturedStep, ReplaysFollowTheStagedLearningRateAndDecay) {
  ResolvedCase rc = test::resolve_first(experiment(GetParam()));
  rc.model.backend = tile::Backend::kGuarded;
  const Batch b = batch_of(rc, 0);
  std::vector<OptimizerStep> schedule = ramp();
  for (OptimizerStep& opt : schedule) opt.decay_lr = opt.lr / 1e-2;  // independent decay: wd * lr / peak
  Model plain(rc.model, test::builtin_registry(), 4), captured(rc.model, test::builtin_registry(), 4),
      unstaged(rc.model, test::builtin_registry(), 4);
  RunContext c1, c2, c3;
  c1.seed = c2.seed = c3.seed = 4;
  c1.probes = c2.probes = c3.probes = false;
  double loss = 0, norm = 0;
  for (const OptimizerStep& opt : schedule) train_step(plain, b, opt, c1, &loss, &norm);
  train_step(captured, b, schedule[0], c2, &loss, &norm);  // uncaptured: stages the tokens
  train_step(unstaged, b, schedule[0], c3, &loss, &norm);
  for (size_t k = 1; k < schedule.size(); ++k) {
    captured.stage_optimizer(schedule[k]);  // outside the capture: a copy from the host
    for (auto [m, c] : {std::pair<Model*, RunContext*>{&captured, &c2}, {&unstaged, &c3}}) {
      c->capturing = true;
      const kernels::CaptureScope scope;
      train_step(*m, b, schedule[0], *c, &loss, &norm);
      c->capturing = false;
    }
  }
  EXPECT_EQ(plain.parameter_values(), captured.parameter_values());
  EXPECT_NE(plain.parameter_values(), unstaged.parameter_values()) << "the schedule must matter for the test";
}

// A replay reads nothing back, yet the stability loop needs each step's loss, grad norm and
// probes, on a new batch each time: the head and the attention reduce them into device slots
// that the model gathers into one block (Model::read_replay, one read after the replay), and
// what changes with the batch is staged before the replay (Model::stage_batch: the tokens, the
// token embedding's buckets; the loss's 1 / valid targets is computed from the targets on the
// device). The "replays" below are handed the first batch and the first step's settings on
// purpose, as a graph's frozen arguments would be; staged, they give bitwise the loss, grad
// norm, probes and parameters of ordinary steps on each batch (one with ignored targets).
// Without the batch's staging they would not (the control).
TEST_P(CapturedStep, ReplaysOnNewBatchesLeaveTheirLossNormAndProbesForTheHost) {
  ResolvedCase rc = test::resolve_first(experiment(GetParam()));
  rc.model.backend = tile::Backend::kGuarded;
  std::vector<Batch> batches = four_batches(rc);
  const std::vector<OptimizerStep> schedule = ramp();
  for (size_t i = 0; i < batches[2].tg.size(); i += 3) batches[2].tg[i] = -1;  // ignored targets: another scale
  Model plain(rc.model, test::builtin_registry(), 4), captured(rc.model, test::builtin_registry(), 4),
      unstaged(rc.model, test::builtin_registry(), 4);
  RunContext c1, c2, c3;
  c1.seed = c2.seed = c3.seed = 4;
  std::vector<double> losses, norms, z_losses;
  std::vector<std::map<std::string, double, std::less<>>> probes;
  double loss = 0, norm = 0;
  for (size_t k = 0; k < batches.size(); ++k) {
    c1.clear_probes();
    train_step(plain, batches[k], schedule[k], c1, &loss, &norm);
    losses.push_back(loss);
    norms.push_back(norm);
    probes.push_back(c1.probe_values());
  }
  EXPECT_EQ(probes[1].count("max_attn_logit/1"), 1U);
  EXPECT_EQ(probes[1].count("logit_mean"), 1U);
  train_step(captured, batches[0], schedule[0], c2, &loss, &norm);  // uncaptured
  train_step(unstaged, batches[0], schedule[0], c3, &loss, &norm);
  for (size_t k = 1; k < batches.size(); ++k) {
    SCOPED_TRACE(k);
    captured.stage_batch(batches[k].in.data(), batches[k].tg.data());  // outside the capture
    for (auto [m, c] : {std::pair<Model*, RunContext*>{&captured, &c2}, {&unstaged, &c3}}) {
      m->stage_optimizer(schedule[k]);
      c->capturing = true;
      {
        const kernels::CaptureScope scope;
        train_step(*m, batches[0], schedule[0], *c, &loss, &norm);
      }
      c->capturing = false;
      EXPECT_TRUE(std::isnan(loss));
    }
    c2.clear_probes();
    const ReplayReadout r = captured.read_replay(c2);
    EXPECT_EQ(r.info.loss, losses[k]);
    EXPECT_EQ(r.grad_norm, norms[k]);
    EXPECT_EQ(c2.probe_values(), probes[k]);
  }
  EXPECT_EQ(plain.parameter_values(), captured.parameter_values());
  EXPECT_NE(plain.parameter_values(), unstaged.parameter_values()) << "the batch must matter for the test";
}

// A logging step is captured too: its layer probes (attention entropy, residual RMS per block, max
// logit per layer) and the layer series' sums (per block the gradient's squares before the update
// and the update's after it, the parameter norm) are reduced into the model's memory and read
// with the loss in the one read after the replay, with the layout the capture recorded. Replays
// handed the first batch and settings, staged with each step's, give bitwise what the same steps
// give run the ordinary way, read back piece by piece (as the stability runner's uncaptured
// logging step reads them).
struct LoggedStep {
  double loss = NAN, norm = NAN;
  std::map<std::string, double, std::less<>> probes;
  LayerSums sums;
};

LoggedStep logging_step(Model& m, const Batch& b, const OptimizerStep& opt, RunContext& ctx) {
  LoggedStep out;
  ctx.training = true;
  ctx.probes = true;
  ctx.layer_probes = true;
  ctx.clear_probes();
  m.zero_grad();
  out.loss = m.forward(b.in.data(), b.tg.data(), ctx).loss;
  m.backward(ctx);
  if (ctx.capturing) {
    m.squares_by_layer_into(LayerQuantity::kGradient, ctx);
    m.snapshot_parameters();
    out.norm = m.optimizer_step(opt, ctx);
    m.squares_by_layer_into(LayerQuantity::kUpdate, ctx);
    m.parameter_norm_into(ctx);
    return out;
  }
  out.sums.gradient = m.squares_by_layer(LayerQuantity::kGradient);
  m.snapshot_parameters();
  out.norm = m.optimizer_step(opt, ctx);
  out.sums.update = m.squares_by_layer(LayerQuantity::kUpdate);
  out.sums.param_norm = m.parameter_norm(ctx);
  out.probes = ctx.probe_values();
  return out;
}

TEST_P(CapturedStep, LoggingReplaysLeaveTheLayerProbesAndSeriesSumsForTheHost) {
  ResolvedCase rc = test::resolve_first(experiment(GetParam()));
  rc.model.backend = tile::Backend::kGuarded;
  const std::vector<Batch> batches = four_batches(rc);
  const std::vector<OptimizerStep> schedule = ramp();
  Model plain(rc.model, test::builtin_registry(), 4), captured(rc.model, test::builtin_registry(), 4);
  RunContext c1, c2;
  c1.seed = c2.seed = 4;
  std::vector<LoggedStep> want;
  for (size_t k = 0; k < batches.size(); ++k) want.push_back(logging_step(plain, batches[k], schedule[k], c1));
  for (const char* probe : {"attn_entropy/1", "block_rms/1", "embed_rms", "max_attn_logit/0", "logit_mean"})
    EXPECT_EQ(want[1].probes.count(probe), 1U) << probe;
  ASSERT_EQ(want[1].sums.gradient.size(), 2U);
  EXPECT_GT(want[1].sums.update[1].sum_squares, 0.0) << "the update must move the parameters for the test";

  (void)logging_step(captured, batches[0], schedule[0], c2);  // uncaptured: the snapshot's buffer
  for (size_t k = 1; k < batches.size(); ++k) {
    SCOPED_TRACE(k);
    captured.stage_batch(batches[k].in.data(), batches[k].tg.data());  // outside the capture
    captured.stage_optimizer(schedule[k]);
    c2.capturing = true;
    {
      const kernels::CaptureScope scope;
      const LoggedStep replay = logging_step(captured, batches[0], schedule[0], c2);
      EXPECT_TRUE(std::isnan(replay.loss) && std::isnan(replay.norm)) << "a captured step reads nothing back";
    }
    c2.capturing = false;
    const ReplayLayout layout = captured.replay_layout();
    c2.clear_probes();
    const ReplayReadout r = captured.read_replay(c2, layout);
    EXPECT_EQ(r.info.loss, want[k].loss);
    EXPECT_EQ(r.grad_norm, want[k].norm);
    EXPECT_EQ(c2.probe_values(), want[k].probes);
    ASSERT_TRUE(r.has_sums);
    ASSERT_EQ(r.sums.gradient.size(), want[k].sums.gradient.size());
    for (size_t i = 0; i < r.sums.gradient.size(); ++i) {
      EXPECT_EQ(r.sums.gradient[i].sum_squares, want[k].sums.gradient[i].sum_squares) << "layer " << i;
      EXPECT_EQ(r.sums.gradient[i].count, want[k].sums.gradient[i].count) << "layer " << i;
      EXPECT_EQ(r.sums.update[i].sum_squares, want[k].sums.update[i].sum_squares) << "layer " << i;
      EXPECT_EQ(r.sums.update[i].count, want[k].sums.update[i].count) << "layer " << i;
    }
    EXPECT_EQ(r.sums.param_norm, want[k].sums.param_norm);
  }
  EXPECT_EQ(plain.parameter_values(), captured.parameter_values());
  // The plain step's layout, captured after the logging one, reads no layer sums: each graph
  // reads its own.
  captured.stage_batch(batches[0].in.data(), batches[0].tg.data());
  c2.capturing = true;
  {
    const kernels::CaptureScope scope;
    double loss = 0, norm = 0;
    c2.layer_probes = false;
    train_step(captured, batches[0], schedule[0], c2, &loss, &norm);
  }
  c2.capturing = false;
  const ReplayReadout r = captured.read_replay(c2, captured.replay_layout());
  EXPECT_FALSE(r.has_sums);
}

// Dropout in a replay draws the masks of the replay's own step: the step number is read from the
// model's memory (Model::stage_step, written outside the capture; RunContext::step_at), not
// taken from the captured step. Replays captured at step 0, staged with steps 1 to 3, give bitwise
// the parameters of ordinary steps 0 to 3 (embedding, attention and residual dropout); staged
// with step 0 each time they do not (the control).
TEST_P(CapturedStep, DropoutReplaysDrawTheStagedStepsMasks) {
  ResolvedCase rc = test::resolve_first(experiment(GetParam()));
  rc.model.dims.dropout_embedding = 0.1;
  rc.model.backend = tile::Backend::kGuarded;
  const Batch b = batch_of(rc, 0);
  const OptimizerStep opt = clipped();
  Model plain(rc.model, test::builtin_registry(), 4), captured(rc.model, test::builtin_registry(), 4),
      unstaged(rc.model, test::builtin_registry(), 4);
  RunContext c1, c2, c3;
  c1.seed = c2.seed = c3.seed = 4;
  c1.probes = c2.probes = c3.probes = false;
  double loss = 0, norm = 0;
  for (int s = 0; s < 4; ++s) {
    c1.step = s;
    train_step(plain, b, opt, c1, &loss, &norm);
  }
  train_step(captured, b, opt, c2, &loss, &norm);  // step 0, uncaptured
  train_step(unstaged, b, opt, c3, &loss, &norm);
  for (int s = 1; s < 4; ++s) {
    captured.stage_step(s);  // outside the capture
    unstaged.stage_step(0);
    for (auto [m, c] : {std::pair<Model*, RunContext*>{&captured, &c2}, {&unstaged, &c3}}) {
      c->capturing = true;
      const kernels::CaptureScope scope;
      train_step(*m, b, opt, *c, &loss, &norm);  // as captured at step 0
      c->capturing = false;
    }
  }
  EXPECT_EQ(plain.parameter_values(), captured.parameter_values());
  EXPECT_NE(plain.parameter_values(), unstaged.parameter_values()) << "the step must matter for the test";
}

INSTANTIATE_TEST_SUITE_P(Model, CapturedStep, ::testing::Values("float32", "bfloat16"),
                         [](const auto& tp) { return tp.param; });

// What a capture forbids says what it is: a forward that copies its tokens in (an uncaptured
// one). A captured forward with the step's probes on reads nothing back: they stay on the device.
TEST(CapturedStep, AReadBackDuringCaptureNamesItself) {
  ResolvedCase rc = test::resolve_first(experiment("float32"));
  rc.model.backend = tile::Backend::kGuarded;
  const Batch b = batch_of(rc, 0);
  Model m(rc.model, test::builtin_registry(), 4);
  RunContext ctx;
  ctx.training = false;
  (void)m.forward(b.in.data(), b.tg.data(), ctx);
  const kernels::CaptureScope scope;
  try {
    (void)m.forward(b.in.data(), b.tg.data(), ctx);  // not capturing: the tokens are copied in
    FAIL() << "expected a read-back to throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("copy_bytes between the host and a device while a step is captured"),
              std::string::npos)
        << e.what();
  }
  ctx.capturing = true;
  ctx.probes = true;
  EXPECT_NO_THROW((void)m.forward(b.in.data(), b.tg.data(), ctx));
}

TEST(CaptureScope, ForbidsWhatCaptureForbidsAndNests) {
  void* d = kernels::device_allocate(kernels::Memory::kGuarded, 64);
  void* e = kernels::device_allocate(kernels::Memory::kGuarded, 64);
  char host[64] = {};
  {
    const kernels::CaptureScope outer;
    {
      const kernels::CaptureScope inner;
      EXPECT_TRUE(kernels::CaptureScope::active());
    }
    EXPECT_TRUE(kernels::CaptureScope::active());
    EXPECT_THROW(kernels::copy_bytes(host, d, 64), std::logic_error);
    EXPECT_THROW(kernels::copy_bytes(d, host, 64), std::logic_error);
    EXPECT_THROW(kernels::device_allocate(kernels::Memory::kGuarded, 64), std::logic_error);
    EXPECT_THROW(kernels::synchronize(tile::Exec{tile::Backend::kCuda}), std::logic_error);
    EXPECT_NO_THROW(kernels::copy_bytes(e, d, 64));  // within the device: an async copy
    EXPECT_NO_THROW(kernels::zero_bytes(d, 64));
  }
  EXPECT_FALSE(kernels::CaptureScope::active());
  EXPECT_NO_THROW(kernels::copy_bytes(host, d, 64));
  kernels::device_free(d);
  kernels::device_free(e);
}

}  // namespace
}  // namespace capture_test
}  // namespace bench
