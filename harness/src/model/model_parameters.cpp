// The model's parameters as a whole (model/model.h): a layer's index from a parameter's name,
// their values as doubles, the snapshot an update is measured against, the parameter norm,
// copying them from another model, and finding one by name with its float master copy.
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "bench/ops.h"
#include "model/model.h"

namespace bench {

int Model::layer_of(std::string_view name) {
  constexpr std::string_view kPrefix = "blocks.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  int layer = 0;
  size_t i = kPrefix.size();
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) layer = layer * 10 + (name[i] - '0');
  return layer;
}

std::vector<double> Model::parameter_values() const {
  std::vector<double> out(static_cast<size_t>(values_.numel()));
  std::vector<char> storage;
  const Tensor values = ops::on_host(master_.defined() ? master_ : values_, storage);
  dispatch_float(values.dtype(), [&]<class T>() {
    const T* v = values.data<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = scalar_value(v[i]);
  });
  return out;
}

void Model::snapshot_parameters() {
  const Tensor& source = master_.defined() ? master_ : values_;
  if (!snapshot_.defined()) snapshot_ = arena_.allocate(source.shape(), source.dtype());
  ops::copy(source, snapshot_);
  snapshot_valid_ = true;
}

double Model::parameter_norm(RunContext& ctx) const {
  bind(ctx);
  return std::sqrt(ops::sum_squares(ctx, values_));
}

std::vector<std::string> Model::copy_parameters_from(const Model& src) {
  std::vector<std::string> problems;
  for (const auto& p : params_) {
    const Param* s = src.find_param(p->name);
    if (s == nullptr || !(s->shape == p->shape) || s->value.dtype() != p->value.dtype()) {
      problems.push_back(p->name);
      continue;
    }
    ops::copy(s->value, p->value);
    const Tensor src_master = src.master_of(*s);
    Tensor dst_master = master_of(*p);
    if (src_master.defined() && dst_master.defined()) ops::copy(src_master, dst_master);
  }
  for (const auto& s : src.params_)
    if (find_param(s->name) == nullptr) problems.push_back(s->name);
  return problems;
}

Param* Model::find_param(std::string_view name) const {
  for (const auto& p : params_)
    if (p->name == name) return p.get();
  return nullptr;
}

Tensor Model::master_of(const Param& p) const {
  if (!master_.defined()) return {};
  const auto offset =
      static_cast<size_t>(static_cast<const char*>(p.value.raw()) - static_cast<const char*>(values_.raw())) /
      dtype_size(spec_.dtype);
  return Tensor(static_cast<float*>(master_.raw()) + offset, DType::kFloat32, p.shape);
}

}  // namespace bench
