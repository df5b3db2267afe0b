#include "experiment/resolve.h"

#include <algorithm>

#include "bench/interfaces.h"
#include "experiment/diagnostics.h"
#include "experiment/messages.h"
#include "experiment/schema.h"
#include "plugins/registry.h"

namespace bench {

namespace {

// Params::resolve, reporting every mistake of `given`: it stops at the first, so after a mistake
// each key is checked alone (a parameter's checks read only its own value).
Params resolve_params(const std::vector<ParamSpec>& specs, const Value& given, const std::string& context,
                      const SourceLoc& owner_loc) {
  try {
    return Params::resolve(specs, given, context, owner_loc);
  } catch (const ConfigError& first) {
    if (!given.is_table()) throw;
    Diagnostics diags;
    for (const auto& [k, v] : given.as_table()) {
      if (k == "type") continue;
      Value one = Value::table({}, given.loc);
      one[k] = v;
      diags.check([&] { (void)Params::resolve(specs, one, context, owner_loc); });
    }
    diags.add(first);
    diags.throw_if_any();
    throw;
  }
}

SlotChoice resolve_slot(Slot slot, const Value& t, const Registry& registry, const std::string& what) {
  const Value* type = t.find("type");
  SlotChoice c;
  c.loc = t.loc;
  if (type == nullptr && registry.default_component(slot) == nullptr) {
    const auto names = registry.names(slot);
    throw ConfigError(t.loc, what + " names no " + std::string(slot_name(slot)) +
                                 " and no loaded plugin declares a default one" +
                                 (names.empty() ? "" : "; available: " + join_names(names)));
  }
  const std::string name = type ? type->as_string() : registry.default_component(slot)->name;
  c.info = registry.find(slot, name);
  if (c.info == nullptr) throw unknown_component(slot, name, registry, type ? type->loc : t.loc);
  c.params = resolve_params(c.info->params, t, std::string(slot_name(slot)) + " '" + name + "' (" + what + ")",
                            type ? type->loc : t.loc);
  return c;
}

}  // namespace

ResolvedCase resolve_case(const Case& c, const Registry& registry, const RunnerSections& runners) {
  ResolvedCase rc;
  const Value& cfg = c.config;
  rc.seed = cfg.find("seed")->as_int();
  const RunnerSection* section = schema::find_runner(runners, c.runner);
  if (section == nullptr) throw Error("case " + std::to_string(c.ordinal) + ": no runner '" + c.runner + "'");

  // The case's independent parts each report their mistakes: [model]'s own keys, each slot's
  // component, [data] and the runner's section. A check that reads a part with a mistake is
  // skipped (it would only repeat it).
  Diagnostics diags;
  const Value& model = *cfg.find("model");
  Value harness_keys = Value::table({}, model.loc);
  std::vector<std::string> allowed;
  for (const auto& s : schema::model_params()) allowed.push_back(s.name);
  for (const auto& [k, s] : schema::model_slots()) allowed.push_back(k);
  for (const auto& [k, v] : model.as_table()) {
    if (schema::model_slot(k)) continue;
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      diags.add(unknown_model_key(k, allowed, model, registry, v.loc));
      continue;
    }
    harness_keys[k] = v;
  }
  Params mp;
  const bool model_ok =
      diags.check([&] { mp = resolve_params(schema::model_params(), harness_keys, "[model]", model.loc); });
  ModelSpec& spec = rc.model;
  for (const auto& entry : schema::model_slots())  // (key, slot)
    diags.check([&] {
      spec.slots[static_cast<size_t>(entry.second)] =
          resolve_slot(entry.second, *model.find(entry.first), registry, "model." + entry.first);
    });
  const bool data_ok =
      diags.check([&] { rc.data = resolve_slot(Slot::kDataset, *cfg.find("data"), registry, "[data]"); });
  const Value* runner = cfg.find(c.runner);
  const bool runner_ok =
      diags.check([&] { rc.runner = resolve_params(section->params, *runner, "[" + c.runner + "]", runner->loc); });

  ModelDims& d = spec.dims;
  const bool dims_ok = model_ok && diags.check([&] {
    for (const auto& s : schema::model_params()) d.where[s.name] = mp.where(s.name);
    d.d_model = mp.integer("d_model");
    d.n_layers = mp.integer("n_layers");
    d.n_heads = mp.integer("n_heads");
    d.n_kv_heads = mp.integer("n_kv_heads") == 0 ? d.n_heads : mp.integer("n_kv_heads");
    d.seq_len = mp.integer("seq_len");
    d.batch_size = mp.integer("batch_size");
    d.init_std = mp.number("init_std");
    d.train_seq_len = d.seq_len;
    d.dropout_embedding = mp.number("dropout_embedding");
    d.dropout_attention = mp.number("dropout_attention");
    d.dropout_residual = mp.number("dropout_residual");
    d.tie_embeddings = mp.boolean("tie_embeddings");
    spec.dtype = *parse_dtype(mp.string("dtype"));
    spec.final_norm = mp.string("final_norm");
    spec.weight_names = mp.string("weight_names");
    if (mp.integer("d_head") > 0) {
      d.d_head = mp.integer("d_head");
    } else {
      if (d.d_model % d.n_heads != 0)
        throw ConfigError(mp.where(mp.given("n_heads") ? "n_heads" : "d_model"),
                          "d_model (" + std::to_string(d.d_model) + ") is not divisible by n_heads (" +
                              std::to_string(d.n_heads) + "); change one, or set d_head explicitly");
      d.d_head = d.d_model / d.n_heads;
    }
    if (d.n_kv_heads > d.n_heads || d.n_heads % d.n_kv_heads != 0)
      throw ConfigError(mp.where(mp.given("n_kv_heads") ? "n_kv_heads" : "n_heads"),
                        "n_heads (" + std::to_string(d.n_heads) + ") is not a multiple of n_kv_heads (" +
                            std::to_string(d.n_kv_heads) + ")");
  });

  // Vocabulary: the dataset's unless the model asks for more.
  if (dims_ok && data_ok) {
    std::unique_ptr<Component> ds = registry.create(*rc.data.info, rc.data.params);
    auto* dataset = dynamic_cast<Dataset*>(ds.get());
    if (dataset == nullptr)
      throw Error("plugin " + registry.origin(rc.data.info) + ": dataset '" + rc.data.info->name +
                  "' does not implement bench::Dataset");
    diags.check([&] {
      const int64_t data_vocab = dataset->vocab_size();
      d.vocab_size = mp.integer("vocab_size") == 0 ? data_vocab : mp.integer("vocab_size");
      if (d.vocab_size < data_vocab)
        throw ConfigError(mp.where("vocab_size"), "vocab_size (" + std::to_string(d.vocab_size) +
                                                      ") is smaller than the dataset's vocabulary (" +
                                                      std::to_string(data_vocab) + ")");
      // The dataset checks itself against the complete dimensions (validate_case does it again).
      try {
        ds->validate(d);
      } catch (const ConfigError&) {
        throw;
      } catch (const std::exception& e) {
        throw Error("plugin " + registry.origin(rc.data.info) + ": dataset '" + rc.data.info->name +
                    "': validate threw: " + e.what());
      }
    });
  }
  if (runner_ok && section->resolve) diags.check([&] { section->resolve(rc.runner, spec); });
  diags.throw_if_any();
  return rc;
}

void validate_case(const ResolvedCase& rc, const Registry& registry) {
  for (Slot s : all_slots()) {
    const SlotChoice& choice = s == Slot::kDataset ? rc.data : rc.model.slot(s);
    std::unique_ptr<Component> c = registry.create(*choice.info, choice.params);
    try {
      c->validate(rc.model.dims);
    } catch (const ConfigError&) {
      throw;
    } catch (const std::exception& e) {
      throw Error("plugin " + registry.origin(choice.info) + ": " + std::string(slot_name(s)) + " '" +
                  choice.info->name + "': validate threw: " + e.what());
    }
  }
}

Value resolved_value(const ResolvedCase& rc) {
  Value root = Value::table();
  const ModelDims& d = rc.model.dims;
  Value& m = root["model"];
  m["vocab_size"] = Value::integer(d.vocab_size);
  m["d_model"] = Value::integer(d.d_model);
  m["n_layers"] = Value::integer(d.n_layers);
  m["n_heads"] = Value::integer(d.n_heads);
  m["n_kv_heads"] = Value::integer(d.n_kv_heads);
  m["d_head"] = Value::integer(d.d_head);
  m["seq_len"] = Value::integer(d.seq_len);
  m["batch_size"] = Value::integer(d.batch_size);
  m["dtype"] = Value::string(std::string(dtype_name(rc.model.dtype)));
  m["init_std"] = Value::number(d.init_std);
  m["tie_embeddings"] = Value::boolean(d.tie_embeddings);
  m["final_norm"] = Value::string(rc.model.final_norm);
  if (rc.model.weight_names != "llama") m["weight_names"] = Value::string(rc.model.weight_names);
  for (const auto& [key, slot] : schema::model_slots()) {
    const SlotChoice& c = rc.model.slot(slot);
    Value t = c.params.values();
    Value out = Value::table();
    out["type"] = Value::string(c.info->name);
    for (const auto& [k, v] : t.as_table()) out[k] = v;
    m[key] = std::move(out);
  }
  Value data = Value::table();
  data["type"] = Value::string(rc.data.info->name);
  for (const auto& [k, v] : rc.data.params.values().as_table()) data[k] = v;
  root["data"] = std::move(data);
  root["runner"] = rc.runner.values();
  root["seed"] = Value::integer(rc.seed);
  return root;
}

std::string resolved_json(const ResolvedCase& rc) { return resolved_value(rc).json(); }

}  // namespace bench
