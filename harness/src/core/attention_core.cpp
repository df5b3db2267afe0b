#include "bench/attention_core.h"

#include <deque>
#include <mutex>

#include "kernels/elementwise.h"
#include "kernels/probes.h"

namespace bench {

namespace {

struct Published {
  AttentionCoreInfo info;
  std::string origin;  // the plugin file
};

// The process's cores. A deque: the pointers find_attention_core hands out stay valid as cores
// are added; entries are never removed (plugins are never unloaded: plugins/registry.cpp).
struct Table {
  std::mutex mutex;
  std::deque<Published> cores;
};

Table& table() {
  static Table t;
  return t;
}

const Published* find_locked(Table& t, std::string_view name) {
  for (const Published& p : t.cores)
    if (p.info.name == name) return &p;
  return nullptr;
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

void AttentionCore::entropy_sum_into(RunContext& ctx, const kernels::AttentionArgs& args, const Tensor& qkv,
                                     Tensor& scratch, double* partial, double* result) {
  const int64_t rows = args.batch * args.n_heads * args.seq;
  dispatch_float(qkv.dtype(), [&]<class T>() {
    using A = tile::acc_t<T>;
    auto* per_row = static_cast<A*>(scratch.raw());
    kernels::attention_entropy<T>(ctx.exec, args, qkv.data<T>(), per_row);
    kernels::sum_of_at<A>(ctx.exec, kernels::SumOf::kValues, per_row, rows, partial, result);
  });
}

const AttentionCoreInfo* find_attention_core(std::string_view name) {
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  const Published* p = find_locked(t, name);
  return p == nullptr ? nullptr : &p->info;
}

std::vector<std::string> attention_core_names() {
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<std::string> names;
  for (const Published& p : t.cores) names.push_back(p.info.name);
  return names;
}

std::string attention_core_origin(std::string_view name) {
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  const Published* p = find_locked(t, name);
  return p == nullptr ? std::string() : p->origin;
}

std::string publish_attention_core(const AttentionCoreInfo& info, const std::string& origin) {
  // "auto" and "ours" are values of the frame's keys that choose among cores, not cores.
  if (info.name.empty()) return "an attention core has no name";
  if (info.name == "auto" || info.name == "ours")
    return "attention core name '" + info.name + "' is reserved (the frame's choice among cores)";
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  if (const Published* p = find_locked(t, info.name); p != nullptr)
    return p->origin == origin ? ""
                               : "duplicate attention core '" + info.name + "': already registered by " + p->origin;
  t.cores.push_back({info, origin});
  return "";
}

}  // namespace bench
