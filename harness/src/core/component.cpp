#include "bench/component.h"

#include <cmath>

#include "bench/interfaces.h"
#include "bench/plugin.h"
#include "bench/residual_norm.h"

namespace bench {

std::string_view slot_name(Slot s) {
  switch (s) {
    case Slot::kEmbedding:
      return "embedding";
    case Slot::kPosition:
      return "position";
    case Slot::kBlock:
      return "block";
    case Slot::kNormPosition:
      return "norm_position";
    case Slot::kNorm:
      return "norm";
    case Slot::kAttention:
      return "attention";
    case Slot::kFfn:
      return "ffn";
    case Slot::kHead:
      return "head";
    case Slot::kDataset:
      return "dataset";
  }
  return "unknown";
}

const std::vector<Slot>& all_slots() {
  static const std::vector<Slot> slots = {Slot::kEmbedding,    Slot::kPosition, Slot::kBlock,
                                          Slot::kNormPosition, Slot::kNorm,     Slot::kAttention,
                                          Slot::kFfn,          Slot::kHead,     Slot::kDataset};
  return slots;
}

std::string_view param_group_name(ParamGroup g) {
  switch (g) {
    case ParamGroup::kMatrix:
      return "matrix";
    case ParamGroup::kEmbedding:
      return "embedding";
    case ParamGroup::kGain:
      return "gain";
    case ParamGroup::kBias:
      return "bias";
    case ParamGroup::kOther:
      return "other";
  }
  return "other";
}

SourceLoc ModelDims::loc(std::string_view key) const {
  auto it = where.find(key);
  return it == where.end() ? SourceLoc{} : it->second;
}

Cost& Cost::operator+=(const Cost& o) {
  flops_forward += o.flops_forward;
  flops_backward += o.flops_backward;
  bytes_forward += o.bytes_forward;
  bytes_backward += o.bytes_backward;
  return *this;
}

void RunContext::probe_max(std::string_view name, double v) {
  auto it = probes_.find(name);
  if (it == probes_.end()) {
    probes_.emplace(std::string(name), Acc{v, 1, true});
  } else if (!(it->second.value >= v)) {  // NaN propagates
    it->second.value = v;
  }
}

void RunContext::probe_mean(std::string_view name, double v, double w) {
  auto it = probes_.find(name);
  if (it == probes_.end()) {
    probes_.emplace(std::string(name), Acc{v * w, w, false});
  } else {
    it->second.value += v * w;
    it->second.weight += w;
  }
}

std::map<std::string, double, std::less<>> RunContext::probe_values() const {
  std::map<std::string, double, std::less<>> out;
  for (const auto& [k, a] : probes_) out[k] = a.is_max ? a.value : (a.weight > 0 ? a.value / a.weight : NAN);
  return out;
}

void RunContext::clear_probes() { probes_.clear(); }

// Out-of-line destructors anchor the interfaces' vtables and type_info in libbench, so that
// dynamic_cast works across plugin boundaries.
SetupContext::~SetupContext() = default;
Component::~Component() = default;
void Component::validate(const ModelDims&) const {}
void Component::setup(SetupContext&) {}
Cost Component::cost() const { return {}; }
Sublayer::~Sublayer() = default;
Residual::~Residual() = default;
Position::~Position() = default;
ResidualNorm::~ResidualNorm() = default;
void Position::embed_forward(Tensor&, RunContext&) {}
void Position::embed_backward(const Tensor&, RunContext&) {}
void Position::rotate_forward(const QkView&, RunContext&) {}
void Position::rotate_backward(const QkView&, RunContext&) {}
Embedding::~Embedding() = default;
Head::~Head() = default;
Dataset::~Dataset() = default;
Registrar::~Registrar() = default;

}  // namespace bench
