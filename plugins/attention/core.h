// defines: bench::attention::AttentionCore, CoreQuery, CoreInfo, register_core, find_core,
//          core_names, BENCH_ATTENTION_CORE — the attention itself, softmax(q k^T) v on the fused
//          qkv rows, behind the causal attention's frame (causal.cpp: projections, QK-norm,
//          rotation, probes, cost)
//
// A core is one class in one file of this plugin (core_materializing.cpp, core_flash.cpp,
// core_cudnn.cpp, core_tiled.cpp, core_fused.cpp), registered under its name by BENCH_ATTENTION_CORE at load:
// the frame's `core` key names it, and `core = "auto"` takes the first of kAutoOrder that runs
// the layer's variant on the target and prefers it (docs/variants/attention.md, "Cores").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "kernels/attention.h"

namespace bench::attention {

/// Where and what a core would run: the target, the model's dtype, the layer's variant (its
/// training dropout rate included; `scale` set).
struct CoreQuery {
  tile::Backend backend = tile::Backend::kCpu;
  DType dtype = DType::kFloat32;
  kernels::AttentionArgs args{};
};

/// The attention of one layer, from the rotated qkv rows [B T, (H + 2 Hkv) d_head] to the heads'
/// outputs [B T, H d_head], and back: kernels/attention.h's contract. The frame hands it the
/// layer's arguments with the step's dropout rate and seed; the core keeps what its backward
/// needs (probabilities, a log-sum-exp) in buffers of its own, made at setup.
class AttentionCore {
 public:
  virtual ~AttentionCore();
  /// Allocate the core's state for `args` (the layer's variant; the training dropout rate) on
  /// ctx's target in ctx's dtype.
  virtual void setup(SetupContext& ctx, const kernels::AttentionArgs& args) = 0;
  /// out = attention(qkv); row_max (may be null: no probe) receives each query row's largest
  /// logit [B, H, T] in the compute type (float for bf16).
  virtual void forward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& out,
                       void* row_max) = 0;
  /// The sum over the B H T query rows of the entropy -sum_j p_j ln p_j of their probabilities
  /// (the forward's), in nats. `scratch` holds B H T values of the compute type. By default
  /// recomputed from qkv (kernels::attention_entropy); a core that keeps the probabilities sums
  /// them instead.
  virtual double entropy_sum(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& scratch);
  /// dqkv (all of it) from dout and the forward's qkv and out; `args` as in the forward.
  virtual void backward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, const Tensor& out,
                        const Tensor& dout, Tensor& dqkv) = 0;
  /// Whether the B H T^2 probabilities are written and read back (the frame's declared bytes).
  virtual bool keeps_probabilities() const { return false; }
};

/// A registered core: its name (the `core` key's value), a line for `bench list`, and what it
/// answers before it is made.
struct CoreInfo {
  std::string name;
  std::string doc;
  /// Why the core cannot run `q` ("" when it can), e.g. "it runs on CUDA only".
  std::string (*unsupported)(const CoreQuery& q);
  /// Whether `core = "auto"` takes it where it runs (the tiled core: only past a size).
  bool (*preferred)(const CoreQuery& q);
  /// What the core cannot run, known from the layer's variant alone ("" when it can; null: it
  /// runs every variant): what `bench validate` reports at the key, before any target is known.
  std::string (*variant_unsupported)(const kernels::AttentionArgs& args);
  std::unique_ptr<AttentionCore> (*make)();
};

/// Adds a core (at load, from its file); a second core of one name is a std::logic_error.
bool register_core(const CoreInfo& info);
/// The core named `name`, or null.
const CoreInfo* find_core(const std::string& name);
/// Every registered core's name, in registration order (for messages).
std::vector<std::string> core_names();

/// What `core = "auto"` tries, in order: the first that runs the variant and prefers it. The
/// fused core prefers only a device in float32/float64 (bf16 on CUDA keeps cuDNN and flash first;
/// the CPU keeps tiled past a size, else materializing). The materializing core runs everything,
/// so the choice always ends.
inline constexpr const char* kAutoOrder[] = {"cudnn", "flash", "tiled", "fused", "materializing"};

}  // namespace bench::attention

/// Registers a core class in its own file, inside namespace bench::attention:
/// BENCH_ATTENTION_CORE(MaterializingCore, "materializing", "doc", unsupported_fn, preferred_fn,
/// variant_fn or nullptr).
#define BENCH_ATTENTION_CORE(Class, name, doc, unsupported, preferred, variant_unsupported)          \
  namespace {                                                                                        \
  const bool bench_core_registered_##Class =                                                         \
      register_core({name, doc, unsupported, preferred, variant_unsupported,                         \
                     []() -> std::unique_ptr<AttentionCore> { return std::make_unique<Class>(); }}); \
  }
