// defines: bench::SlotChoice, ModelSpec — everything needed to build a model, in the model's own
// terms (the experiment layer produces it from a case: experiment/resolve.h)
#pragma once

#include <array>
#include <string>
#include <vector>

#include "bench/component.h"
#include "bench/params.h"

namespace bench {

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
  /// Tensor names and layouts of checkpoints: "llama" (default), "olmo2", "phi3", "gpt_neox" or
  /// "falcon" (docs/weights.md).
  std::string weight_names = "llama";
  std::array<SlotChoice, kSlotCount> slots;
  /// Parameter groups AdamW decays (ParamGroup names).
  std::vector<std::string> decay_groups = {"matrix", "embedding"};
  /// Where the model's tensors live and its kernels run: kCpu (host memory), kCuda (GPU
  /// memory, CUDA launchers), kGuarded (the CPU executor on guarded memory: tests) or kEmulated
  /// (host memory, the emulated-block executor composing as the device: launch counts). Set from
  /// the run's device, not from the experiment's model table.
  tile::Backend backend = tile::Backend::kCpu;
  const SlotChoice& slot(Slot s) const { return slots[static_cast<size_t>(s)]; }
};

}  // namespace bench
