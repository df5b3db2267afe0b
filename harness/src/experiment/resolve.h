// defines: bench::SlotChoice, ModelSpec, ResolvedCase, resolve_case, validate_case
//
// A Case holds merged TOML values; resolving it checks every key and type against the
// harness's schemas and the chosen components' declared parameters, and yields typed settings.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "bench/component.h"
#include "bench/params.h"
#include "experiment/experiment.h"

namespace bench {

class Registry;
struct ComponentInfo;

/// The component chosen for a slot and its checked parameters.
struct SlotChoice {
  const ComponentInfo* info = nullptr;
  Params params;
  SourceLoc loc;  ///< where the slot was configured
};

/// Everything needed to build a model.
struct ModelSpec {
  ModelDims dims;
  DType dtype = DType::kFloat32;
  std::string final_norm = "auto";  ///< "auto", "on" or "off"
  std::array<SlotChoice, kSlotCount> slots;
  /// Parameter groups AdamW decays (ParamGroup names).
  std::vector<std::string> decay_groups = {"matrix", "embedding"};
  /// Where the model's tensors live and its kernels run: kCpu (host memory), kCuda (GPU
  /// memory, CUDA launchers) or kGuarded (the CPU executor on guarded memory: tests). Set from
  /// the run's device, not from the experiment's model table.
  tile::Backend backend = tile::Backend::kCpu;
  const SlotChoice& slot(Slot s) const { return slots[static_cast<size_t>(s)]; }
};

/// A case with typed, checked settings.
struct ResolvedCase {
  ModelSpec model;
  SlotChoice data;
  Params runner;  ///< the runner section's settings
  int64_t seed = 0;
};

/// Check and type a case. Throws ConfigError at the offending key.
ResolvedCase resolve_case(const Case& c, const Registry& registry);

/// Construct every component of the case once, without allocating, and let each check itself
/// against the model's dimensions (Component::validate). Throws ConfigError or Error.
void validate_case(const ResolvedCase& rc, const Registry& registry);

/// The resolved configuration as JSON text, for storage with the case.
std::string resolved_json(const ResolvedCase& rc);
/// resolved_json without the runner's peak learning rate: cases with equal keys differ only in
/// `lr` and form one variant's learning-rate grid (for `lr_sensitivity`).
std::string lr_group_key(const ResolvedCase& rc);

}  // namespace bench
