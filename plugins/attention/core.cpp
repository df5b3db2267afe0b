#include "core.h"

#include <stdexcept>

#include "kernels/elementwise.h"

namespace bench::attention {

namespace {
std::vector<CoreInfo>& registry() {
  static std::vector<CoreInfo> cores;  // filled at load, before any model is built
  return cores;
}
}  // namespace

AttentionCore::~AttentionCore() = default;

double AttentionCore::entropy_sum(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv,
                                  Tensor& scratch) {
  const int64_t rows = args.batch * args.n_heads * args.seq;
  return dispatch_float(qkv.dtype(), [&]<class T>() {
    using A = tile::acc_t<T>;
    auto* per_row = static_cast<A*>(scratch.raw());
    kernels::attention_entropy<T>(ctx.exec, args, qkv.data<T>(), per_row);
    return kernels::sum_of<A>(ctx.exec, kernels::SumOf::kValues, per_row, rows);
  });
}

bool register_core(const CoreInfo& info) {
  if (find_core(info.name) != nullptr) throw std::logic_error("attention core \"" + info.name + "\" registered twice");
  registry().push_back(info);
  return true;
}

const CoreInfo* find_core(const std::string& name) {
  for (const CoreInfo& c : registry())
    if (c.name == name) return &c;
  return nullptr;
}

std::vector<std::string> core_names() {
  std::vector<std::string> names;
  for (const CoreInfo& c : registry()) names.push_back(c.name);
  return names;
}

}  // namespace bench::attention
