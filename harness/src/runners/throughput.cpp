// Throughput runner: Google Benchmark is the timing engine (warm-up, iteration count, repetitions);
// we keep every repetition's time and derive median, spread, tokens/s and FLOP rates from the
// components' declared FLOPs. Timing a mode stops on a noise criterion, as nvbench's does: further
// rounds of repetitions until their relative spread is at most `max_noise` or `max_time` is spent.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>

#include "bench/interfaces.h"
#include "kernels/device_runtime.h"
#include "kernels/memory.h"
#include "model/model.h"
#include "plugins/registry.h"
#include "runners/gemm_ceiling.h"
#include "runners/machine_state.h"
#include "runners/profile.h"
#include "runners/runner.h"
#include "runners/stats.h"
#include "runners/step_graph.h"

namespace bench {

namespace {

// Collects the per-repetition runs; prints nothing (stdout carries only results).
class CollectingReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;
      if (r.error_occurred) {
        error = r.error_message;
        continue;
      }
      ms.push_back(r.GetAdjustedRealTime());  // unit set to milliseconds
      iterations = r.iterations;
    }
  }
  std::vector<double> ms;
  int64_t iterations = 0;
  std::string error;
};

#if BENCH_HAVE_CUDA
struct GpuTiming {
  explicit GpuTiming(void* stream) : flusher(kernels::cuda::current_device()), timer(stream) {}
  kernels::cuda::L2Flusher flusher;
  kernels::cuda::EventTimer timer;
};
#else
struct GpuTiming {};
#endif

/// The settings of [throughput].
const std::vector<ParamSpec>& throughput_params() {
  static const std::vector<ParamSpec> specs = {
      ParamSpec::strings("modes", {"forward", "forward_backward", "train_step"},
                         {"forward", "forward_backward", "train_step"}, "what to time"),
      ParamSpec::integer("repetitions", 5, "timed repetitions (median and spread over these)").at_least(1),
      // Google Benchmark requires a positive minimum time (it aborts on 0): a millisecond is the least.
      ParamSpec::number("min_time", 0.2, "seconds each repetition runs at least (>= 0.001)").at_least(0.001),
      ParamSpec::number("max_noise", 0.02,
                        "target relative spread of the repetitions (1.4826 MAD / median): further rounds of "
                        "`repetitions` until it is reached or max_time is spent; a mode that ends above it is noisy")
          .at_least(0),
      ParamSpec::number("max_time", 10.0,
                        "seconds a mode's timing may take before it stops above max_noise (0: the first round only)")
          .at_least(0),
      ParamSpec::number("max_busy", 0.1,
                        "share of the cores' time other processes or the hypervisor may take during a mode's "
                        "timing before it is marked noisy (0..1)")
          .at_least(0),
      ParamSpec::number("warmup_time", 0.1, "seconds of untimed warm-up before the repetitions").at_least(0),
      ParamSpec::number("lr", 1e-3, "learning rate used by the timed train steps").at_least(0),
      ParamSpec::boolean("profile", true,
                         "after each mode's timing, profile its step per kernel in separate, untimed steps "
                         "(docs/results.md, \"The profile\")"),
      ParamSpec::integer("profile_steps", 5, "steps the profile measures (each row: the median over them)").at_least(1),
      ParamSpec::boolean("cuda_graph", true,
                         "on CUDA, capture each mode's step into a CUDA graph once and time its replays "
                         "(no launch overhead); a step that cannot be captured is timed uncaptured, with "
                         "graph_fallback/MODE = 1, unless cuda_graph = true is given (then the case fails); "
                         "emulated on the guarded device; ignored on the CPU"),
  };
  return specs;
}

}  // namespace

namespace {

/// The value at each repetition of a mode, `f(ms)` of each repetition's time (the median when the
/// samples were not kept), skipping times that are not positive.
template <class F>
std::vector<double> each_repetition(const Timing& t, F f) {
  std::vector<double> v;
  for (double ms : t.samples_ms.empty() ? std::vector<double>{t.median_ms} : t.samples_ms)
    if (ms > 0) f(v, ms);
  return v;
}

std::optional<double> known(double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); }

/// The per-mode figures of a throughput case: `bench results`' columns, in order; those with
/// per_repetition are `bench compare`'s throughput metrics.
const std::vector<ModeMetric>& throughput_mode_metrics() {
  static const std::vector<ModeMetric> metrics = {
      {"median_ms", "median ms", "", Better::kLower, true, true, [](const Timing& t) { return known(t.median_ms); },
       [](const Timing& t) { return each_repetition(t, [](auto& v, double ms) { v.push_back(ms); }); }, false},
      {"mad_ms", "± MAD ms", "", Better::kNeither, false, false, [](const Timing& t) { return known(t.mad_ms); },
       nullptr, false},
      {"noise_percent", "noise %", "{:.1f}", Better::kNeither, false, false,
       [](const Timing& t) { return known(t.noise * 100.0); }, nullptr, false},
      {"tokens_per_s", "tokens/s", "", Better::kHigher, true, true,
       [](const Timing& t) { return known(t.tokens_per_s); },
       [](const Timing& t) {
         const double tokens_per_iter = t.tokens_per_s * t.median_ms / 1000.0;
         return each_repetition(t, [&](auto& v, double ms) { v.push_back(tokens_per_iter * 1000.0 / ms); });
       },
       false},
      {"gflops_per_s", "GFLOP/s", "", Better::kHigher, true, false,
       [](const Timing& t) { return known(t.gflops_per_s); },
       [](const Timing& t) {
         return each_repetition(t, [&](auto& v, double ms) { v.push_back(t.flops_per_iter / (ms * 1e6)); });
       },
       false},
      {"mfu_percent", "MFU %", "{:.1f}", Better::kHigher, true, false,
       [](const Timing& t) { return t.mfu ? std::optional<double>(*t.mfu * 100.0) : std::nullopt; },
       [](const Timing& t) {
         return each_repetition(t, [&](auto& v, double ms) {
           if (t.mfu && *t.mfu > 0) v.push_back(t.flops_per_iter / (ms * 1e6) / (t.gflops_per_s / *t.mfu) * 100.0);
         });
       },
       false},
      {"peak_mb", "peak MB", "{:.1f}", Better::kLower, false, false,
       [](const Timing& t) {
         return t.peak_bytes ? std::optional<double>(static_cast<double>(*t.peak_bytes) / 1048576.0) : std::nullopt;
       },
       [](const Timing& t) {
         return t.peak_bytes ? std::vector<double>{static_cast<double>(*t.peak_bytes) / 1048576.0}
                             : std::vector<double>{};
       },
       true},
  };
  return metrics;
}

/// The per-case figures of a throughput case (a name ending in '/' is followed by the mode).
const std::vector<MetricSpec>& throughput_metrics() {
  static const std::vector<MetricSpec> specs = {
      MetricSpec("gemm_ceiling_gflops", "GFLOP/s"),
      MetricSpec("gemm_ceiling_calls"),
      MetricSpec("cuda_graph"),
      MetricSpec("roof_gbps", "GB/s").plotted_in("roofline"),
      MetricSpec("roof_gflops", "GFLOP/s").plotted_in("roofline"),
      MetricSpec("graph_nodes/"),
      MetricSpec("graph_fallback/"),
      MetricSpec("loss_after_graph/", "nats"),
      MetricSpec("profile_step_ms/", "ms").plotted_in("profile-time"),
      MetricSpec("mfu_model_gemms/"),
      MetricSpec("initial_loss", "nats"),
      MetricSpec("model_bytes", "bytes"),
  };
  return specs;
}

}  // namespace

/// Times the configured modes of one model with its real data (docs/design.md, "How throughput is
/// measured").
class ThroughputRunner final : public Runner {
 public:
  std::string_view name() const override { return "throughput"; }
  const std::vector<ParamSpec>& params() const override { return throughput_params(); }
  CaseResult run(const Case& c, const ResolvedCase& rc, RunnerEnv& env) const override;
  ResultsTable table() const override { return {.timings = true, .steps = false}; }
  const std::vector<MetricSpec>& metrics() const override { return throughput_metrics(); }
  const std::vector<ModeMetric>& mode_metrics() const override { return throughput_mode_metrics(); }
  /// Why a mode is marked noisy, with the machine's state around its timing.
  std::string mode_note(const Timing& t) const override {
    if (!t.noisy) return "";
    const auto percent = [](double fraction) {
      return std::isnan(fraction) ? std::string("unknown") : fmt::format("{:.1f} %", fraction * 100.0);
    };
    const std::string cores = t.cores > 0 ? fmt::format("its {} cores", t.cores) : std::string("its cores");
    const bool quiet_enough = t.noise <= t.max_noise;  // noisy because the machine was busy (false for NaN)
    return fmt::format(
        "noisy: noise {} {} the target {} after {} repetitions; load average {}, other processes kept {} of {} "
        "busy, steal {}",
        percent(t.noise), quiet_enough ? "within" : "above", percent(t.max_noise), t.samples_ms.size(),
        std::isnan(t.load_avg) ? std::string("unknown") : fmt::format("{:.2f}", t.load_avg), percent(t.other_busy),
        cores, percent(t.steal));
  }
  std::string summary(const CaseResult& r) const override {
    std::string s;
    for (const Timing& t : r.timings)
      if (t.mode == "train_step") s += ", train step " + std::to_string(t.median_ms).substr(0, 6) + " ms";
    for (const Timing& t : r.timings)
      if (t.noisy) s += fmt::format(", {} noisy ({:.1f} % > {:g} %)", t.mode, t.noise * 100, t.max_noise * 100);
    return s;
  }
};

namespace {

/// A mode's timings as the rounds left them, and the machine's state over them.
struct Rounds {
  CollectingReporter reporter;
  MachineState machine;
};

/// One throughput case: the model and its batch, the GEMM ceiling, and each mode's capture,
/// timing, check and profile, in that order.
class ThroughputCase {
 public:
  ThroughputCase(const ResolvedCase& rc, RunnerEnv& env);
  CaseResult run();

 private:
  /// The first step outside the timing: checks that the configuration runs at all.
  LossInfo first_step();
  /// The MFU's second denominator: the GEMMs one forward and backward of this model makes,
  /// recorded outside the timing and timed back to back on its device (runners/gemm_ceiling.h).
  void measure_gemm_ceiling();
  /// Capture, time, check and profile `mode`; its Timing goes to the row.
  void run_mode(const std::string& mode);
  /// What one step of `mode` enqueues; `flops` gets its declared work.
  std::function<void()> enqueue_of(const std::string& mode, double& flops);
  /// Rounds until the noise rule says stop (runners/stats.h: noise_step), with the machine's
  /// state sampled over all of them.
  void time_mode(const std::string& mode, const std::function<void()>& step, Rounds& rounds);
  /// One round: `reps` repetitions; the first warms up and lets Google Benchmark choose the
  /// iterations per repetition, later rounds reuse that count without a warm-up.
  void time_round(const std::string& mode, const std::function<void()>& step, int reps, int64_t iterations,
                  CollectingReporter& reporter);
  /// The replays must have done the step's work: a broken capture shows as a loss that is not
  /// finite (or as a CUDA error in this synchronizing forward).
  void check_replays(const std::string& mode);
  /// The row's Timing of `mode` from its rounds.
  Timing timing_of(const std::string& mode, double flops, const Rounds& rounds);
  bool stopped() const { return env_.stop && env_.stop->load(); }

  const ResolvedCase& rc_;
  const Params& s_;
  RunnerEnv& env_;
  const ModelDims& d_;
  CaseResult row_;
  Model model_;
  std::unique_ptr<Dataset> dataset_;
  std::vector<int32_t> inputs_, targets_;
  RunContext ctx_;
  OptimizerStep opt_;
  Cost cost_;
  GemmCeiling ceiling_;
  std::unique_ptr<GpuTiming> gpu_;
  bool use_graph_ = false;
};

ThroughputCase::ThroughputCase(const ResolvedCase& rc, RunnerEnv& env)
    : rc_(rc),
      s_(rc.runner),
      env_(env),
      d_(rc.model.dims),
      model_(rc.model, env.registry, static_cast<uint64_t>(rc.seed)),
      dataset_(create_dataset(rc, env)),
      inputs_(static_cast<size_t>(d_.tokens())),
      targets_(inputs_.size()) {
  dataset_->batch(Split::kTrain, 0, d_.batch_size, d_.seq_len, inputs_.data(), targets_.data());
  ctx_.probes = false;
  ctx_.seed = static_cast<uint64_t>(rc.seed);
  opt_.lr = s_.number("lr");
  opt_.decay_lr = opt_.lr;
  opt_.weight_decay = 0.1;
  opt_.grad_clip = 1.0;
  cost_ = model_.cost();
}

CaseResult ThroughputCase::run() {
  row_.n_params = model_.n_params();
  row_.n_params_embedding = model_.n_params_embedding();
  row_.flops_per_token = (cost_.flops_forward + cost_.flops_backward) / static_cast<double>(d_.tokens());
  const LossInfo first = first_step();
  measure_gemm_ceiling();
  // On a GPU: CUDA events around each step and an L2 flush before it (kernels/device_runtime.h).
#if BENCH_HAVE_CUDA
  if (ctx_.exec.backend == tile::Backend::kCuda) gpu_ = std::make_unique<GpuTiming>(ctx_.exec.stream);
#endif
  // With cuda_graph on a GPU, each mode's step is captured once (after an uncaptured run that
  // stages the tokens and makes every cuBLASLt plan) and the timed step replays the graph; on the
  // guarded device the replays are emulated (runners/step_graph.h).
  use_graph_ = s_.boolean("cuda_graph") && graphs_possible(ctx_.exec);
  row_.metrics.push_back({"cuda_graph", use_graph_ ? 1.0 : 0.0, ""});
  // The profile's ceilings: the device's measured copy bandwidth and GEMM rate (the ridge point
  // is their ratio).
  if (s_.boolean("profile")) {
    row_.metrics.push_back({"roof_gbps", env_.device.copy_gbps, "GB/s"});
    row_.metrics.push_back({"roof_gflops", env_.device.peak_for(dtype_name(rc_.model.dtype)), "GFLOP/s"});
  }
  for (const std::string& mode : s_.strings("modes")) {
    if (stopped()) {
      row_.status = "interrupted";
      break;
    }
    run_mode(mode);
  }
  row_.metrics.push_back({"initial_loss", first.loss, "nats"});
  row_.metrics.push_back({"model_bytes", static_cast<double>(model_.bytes()), "bytes"});
  return std::move(row_);
}

LossInfo ThroughputCase::first_step() {
  model_.zero_grad();
  const LossInfo first = model_.forward(inputs_.data(), targets_.data(), ctx_);
  if (!std::isfinite(first.loss)) throw Error("the initial loss is not finite");
  return first;
}

void ThroughputCase::measure_gemm_ceiling() {
  std::vector<kernels::GemmCall> gemm_calls;
  {
    kernels::GemmRecorder recorder;
    ctx_.training = true;
    model_.zero_grad();
    model_.forward(inputs_.data(), targets_.data(), ctx_);
    model_.backward(ctx_);
    kernels::synchronize(ctx_.exec);
    gemm_calls = recorder.calls();
  }
  if (!gemm_calls.empty()) ceiling_ = time_gemm_calls(gemm_calls, model_.memory(), 5);
  if (ceiling_.gflops_per_s > 0) {
    row_.metrics.push_back({"gemm_ceiling_gflops", ceiling_.gflops_per_s, "GFLOP/s"});
    row_.metrics.push_back({"gemm_ceiling_calls", static_cast<double>(ceiling_.calls), ""});
  }
}

void ThroughputCase::run_mode(const std::string& mode) {
  double flops = 0;
  std::function<void()> enqueue = enqueue_of(mode, flops);
  // A step ends when the device is done.
  std::function<void()> step = [&] {
    enqueue();
    kernels::synchronize(ctx_.exec);
  };
  std::unique_ptr<StepReplay> graph;
  if (use_graph_) {
    env_.progress.update(env_.prefix + " · capturing " + mode, true);
    step();  // uncaptured: stages the tokens, makes the plans and workspaces the capture reuses
    CapturedStep captured = capture_step(ctx_, enqueue);
    graph = std::move(captured.replay);
    if (graph) {
      row_.metrics.push_back({"graph_nodes/" + mode, static_cast<double>(graph->nodes()), ""});
      step = [&] {
        graph->launch();
        kernels::synchronize(ctx_.exec);
      };
    } else if (s_.given("cuda_graph")) {
      throw Error("cuda_graph, mode " + mode + ": " + captured.why_not);
    } else {
      // The default asks for graphs where the step allows them: this one is timed uncaptured.
      row_.metrics.push_back({"graph_fallback/" + mode, 1.0, ""});
      const std::string note = mode + " not captured into a CUDA graph, timed uncaptured: " + captured.why_not;
      row_.notes += (row_.notes.empty() ? "" : "\n") + note;  // stored with the case (cases.notes)
      env_.progress.note(env_.prefix + " · " + note);
    }
  }
  Rounds rounds;
  time_mode(mode, step, rounds);
  if (graph) check_replays(mode);
  // The profile, in its own untimed steps after the timing (never graph replays: a replay has
  // no launches to observe).
  if (s_.boolean("profile") && !stopped()) {
    env_.progress.update(env_.prefix + " · profiling " + mode, true);
    StepProfile p = profile_step(ctx_.exec, mode, enqueue, static_cast<int>(s_.integer("profile_steps")));
    row_.metrics.push_back({"profile_step_ms/" + mode, p.step_ms, "ms"});
    for (ProfileRow& r : p.rows) row_.profile.push_back(std::move(r));
  }
  row_.timings.push_back(timing_of(mode, flops, rounds));
}

std::function<void()> ThroughputCase::enqueue_of(const std::string& mode, double& flops) {
  flops = cost_.flops_forward;
  if (mode == "forward") {
    return [this] {
      ctx_.training = false;
      benchmark::DoNotOptimize(model_.forward(inputs_.data(), targets_.data(), ctx_));
    };
  }
  flops += cost_.flops_backward;
  const bool update = mode == "train_step";
  return [this, update] {
    ctx_.training = true;
    model_.zero_grad();
    model_.forward(inputs_.data(), targets_.data(), ctx_);
    model_.backward(ctx_);
    if (update) model_.optimizer_step(opt_, ctx_);
  };
}

void ThroughputCase::time_mode(const std::string& mode, const std::function<void()>& step, Rounds& rounds) {
  env_.progress.update(env_.prefix + " · timing " + mode, true);
  CollectingReporter& reporter = rounds.reporter;
  const auto reps = static_cast<int>(s_.integer("repetitions"));
  const double max_noise = s_.number("max_noise"), max_time = s_.number("max_time");
  const MachineSampler sampler;
  const auto started = std::chrono::steady_clock::now();
  time_round(mode, step, reps, 0, reporter);
  const int64_t iterations = reporter.iterations;
  for (;;) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // The next round times reps x iterations steps of about the median so far.
    const double next_round_s = reps * static_cast<double>(iterations) * summarize(reporter.ms).median * 1e-3;
    const NoiseStep next = noise_step(reporter.ms, max_noise, elapsed, next_round_s, max_time);
    if (next != NoiseStep::kContinue || stopped()) break;
    env_.progress.update(
        env_.prefix + " · timing " + mode +
            fmt::format(" (noise {:.1f} %, {} repetitions)", relative_noise(reporter.ms) * 100, reporter.ms.size()),
        true);
    time_round(mode, step, reps, iterations, reporter);
  }
  rounds.machine = sampler.stop();
}

void ThroughputCase::time_round(const std::string& mode, const std::function<void()>& step, int reps,
                                int64_t iterations, CollectingReporter& reporter) {
  benchmark::ClearRegisteredBenchmarks();
  auto* bm = benchmark::RegisterBenchmark(mode.c_str(), [&](benchmark::State& st) {
#if BENCH_HAVE_CUDA
    if (gpu_) {
      // Each step from a cold L2 (flushed outside the timing), timed by CUDA events around it.
      for (auto _ : st) {
        st.PauseTiming();
        gpu_->flusher.flush(ctx_.exec.stream);
        st.ResumeTiming();
        gpu_->timer.start();
        step();
        st.SetIterationTime(gpu_->timer.stop_ms() * 1e-3);
      }
      return;
    }
#endif
    for (auto _ : st) step();
  });
  bm->Repetitions(reps)->Unit(benchmark::kMillisecond);
  if (iterations > 0) {
    bm->Iterations(iterations);  // no warm-up: Google Benchmark has none with a fixed count
  } else {
    bm->MinTime(s_.number("min_time"))->MinWarmUpTime(s_.number("warmup_time"));
  }
  if (gpu_) {
    bm->UseManualTime();
  } else {
    bm->UseRealTime();
  }
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();
  if (!reporter.error.empty()) throw Error("timing " + mode + ": " + reporter.error);
  if (reporter.ms.empty()) throw Error("timing " + mode + " produced no measurement");
}

void ThroughputCase::check_replays(const std::string& mode) {
  ctx_.training = false;
  const LossInfo after = model_.forward(inputs_.data(), targets_.data(), ctx_);
  if (!std::isfinite(after.loss))
    throw Error("cuda_graph, mode " + mode + ": the loss after the graph's replays is not finite (" +
                std::to_string(after.loss) + ")");
  row_.metrics.push_back({"loss_after_graph/" + mode, after.loss, "nats"});
}

Timing ThroughputCase::timing_of(const std::string& mode, double flops, const Rounds& rounds) {
  const CollectingReporter& reporter = rounds.reporter;
  const MachineState& machine = rounds.machine;
  const double max_noise = s_.number("max_noise");
  const Summary sum = summarize(reporter.ms);
  Timing t;
  t.mode = mode;
  t.repetitions = static_cast<int64_t>(reporter.ms.size());
  t.iterations = reporter.iterations;
  t.median_ms = sum.median;
  t.mean_ms = sum.mean;
  t.min_ms = sum.min;
  t.max_ms = sum.max;
  t.stddev_ms = sum.stddev;
  t.mad_ms = sum.mad;
  t.tokens_per_s = static_cast<double>(d_.tokens()) / (sum.median * 1e-3);
  t.flops_per_iter = flops;
  t.gflops_per_s = flops / (sum.median * 1e-3) * 1e-9;
  const double peak = env_.device.peak_for(dtype_name(rc_.model.dtype));
  if (peak > 0) t.mfu = t.gflops_per_s / peak;
  if (ceiling_.gflops_per_s > 0)
    row_.metrics.push_back({"mfu_model_gemms/" + mode, t.gflops_per_s / ceiling_.gflops_per_s, ""});
  t.peak_bytes = static_cast<int64_t>(model_.bytes());
  t.samples_ms = reporter.ms;
  t.noise = relative_noise(reporter.ms);
  t.max_noise = max_noise;
  t.noisy = !(t.noise <= max_noise) || machine_busy(machine.other_busy, machine.steal, s_.number("max_busy"));
  t.load_avg = machine.load_avg;
  t.steal = machine.steal;
  t.other_busy = machine.other_busy;
  t.cores = machine.cores;
  return t;
}

}  // namespace

CaseResult ThroughputRunner::run(const Case& c, const ResolvedCase& rc, RunnerEnv& env) const {
  (void)c;
  return ThroughputCase(rc, env).run();
}

const Runner& throughput_runner() {
  static const ThroughputRunner runner;
  return runner;
}

}  // namespace bench
