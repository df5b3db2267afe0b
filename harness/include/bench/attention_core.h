// defines: bench::AttentionCore, AttentionCoreQuery, AttentionCoreInfo, find_attention_core,
//          attention_core_names, attention_core_origin, publish_attention_core,
//          BENCH_ATTENTION_CORE — the attention itself, softmax(q k^T) v on the fused qkv rows, as
//          a plugin API: the causal attention (plugins/attention/causal.cpp) is a frame around a
//          core chosen by its `core` key, and any plugin may add a core in one file
//
// A core is one class deriving from AttentionCore and one BENCH_ATTENTION_CORE line, in any
// file of any plugin: the line records the core in that plugin's own list at load, BENCH_PLUGIN
// hands the list to the loader with the plugin's components (after the ABI check), and the
// loader, once its names are checked, publishes each core in the process's table here, where
// the frame finds it by name when a model is validated or built (docs/variants/attention.md,
// "Cores"). Core names are one namespace for the whole process: a second plugin file that
// registers a name already taken is refused at load, naming both files.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/component.h"
#include "bench/dtype.h"
#include "kernels/attention.h"

namespace bench {

/// Where and what a core would run: the target, the model's dtype, the layer's variant (its
/// training dropout rate included; `scale` set).
struct AttentionCoreQuery {
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
  /// entropy_sum without the trip to the host, for a captured step (a CUDA graph): the same sum,
  /// bit for bit as entropy_sum gives it on that target, into *result in the model's memory;
  /// `partial` holds kernels::sum_squares_partials(B H T^2) doubles there (at least one). By
  /// default recomputed from qkv as entropy_sum does; a core that overrides entropy_sum overrides
  /// this too.
  virtual void entropy_sum_into(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, Tensor& scratch,
                                double* partial, double* result);
  /// dqkv (all of it) from dout and the forward's qkv and out; `args` as in the forward.
  virtual void backward(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv, const Tensor& out,
                        const Tensor& dout, Tensor& dqkv) = 0;
  /// Whether the B H T^2 probabilities are written and read back (the frame's declared bytes).
  virtual bool keeps_probabilities() const { return false; }
  /// Whether the core's kernels draw dropout from kernels::dropout_seed_of(args.dropout_seed,
  /// args.dropout_step_at), reading the step from device memory when dropout_step_at is set (a
  /// captured step). A core that does not says no: a captured step with dropout then refuses
  /// it (the frame throws, and the stability runner runs the step uncaptured, saying why).
  virtual bool reads_dropout_step() const { return false; }
};

/// A registered core: its name (the `core` key's value), a line for `bench list cores`, and what
/// it answers before it is made.
struct AttentionCoreInfo {
  std::string name;
  std::string doc;
  /// Why the core cannot run `q` ("" when it can), e.g. "it runs on CUDA only".
  std::string (*unsupported)(const AttentionCoreQuery& q);
  /// Whether `core = "auto"` takes it where it runs (the tiled core: only past a size). Only the
  /// cores of the frame's own list are tried by "auto"; another core runs where it is named.
  bool (*preferred)(const AttentionCoreQuery& q);
  /// What the core cannot run, known from the layer's variant alone ("" when it can; null: it
  /// runs every variant): what `bench validate` reports at the key, before any target is known.
  std::string (*variant_unsupported)(const kernels::AttentionArgs& args);
  std::unique_ptr<AttentionCore> (*make)();
};

/// The core named `name` that a loaded plugin registered, or null.
const AttentionCoreInfo* find_attention_core(std::string_view name);
/// Every registered core's name, in the order the plugins were loaded (for messages).
std::vector<std::string> attention_core_names();
/// The plugin file that registered core `name`, or "" when none did.
std::string attention_core_origin(std::string_view name);
/// Adds `info`, registered by the plugin file `origin`, to the process's table: what the plugin
/// loader calls once it has checked the plugin. Returns "" when added, or when `origin` already
/// added this name (the same file loaded by another registry of the process: nothing changes),
/// else why not (the name is taken by another file, or is empty, "auto" or "ours").
std::string publish_attention_core(const AttentionCoreInfo& info, const std::string& origin);

namespace detail {
/// The cores that BENCH_ATTENTION_CORE recorded in this shared library. Hidden, so that every
/// plugin has a list of its own; BENCH_PLUGIN hands it to the loader's Registrar.
__attribute__((visibility("hidden"))) inline std::vector<AttentionCoreInfo>& plugin_attention_cores() {
  static std::vector<AttentionCoreInfo> cores;
  return cores;
}
/// Records a core in this plugin's list (at load: plugin code only, nothing of the harness runs
/// before the loader has checked the ABI tag).
inline bool record_attention_core(AttentionCoreInfo info) {
  plugin_attention_cores().push_back(std::move(info));
  return true;
}
}  // namespace detail

}  // namespace bench

/// Registers a core class in its own file (any namespace, any plugin):
/// BENCH_ATTENTION_CORE(MaterializingCore, "materializing", "doc", unsupported_fn, preferred_fn,
/// variant_fn or nullptr). The plugin's BENCH_PLUGIN registers it with the plugin's components.
#define BENCH_ATTENTION_CORE(Class, name, doc, unsupported, preferred, variant_unsupported)     \
  namespace {                                                                                   \
  const bool bench_core_registered_##Class = ::bench::detail::record_attention_core(            \
      {name, doc, unsupported, preferred, variant_unsupported,                                  \
       []() -> std::unique_ptr<::bench::AttentionCore> { return std::make_unique<Class>(); }}); \
  }
