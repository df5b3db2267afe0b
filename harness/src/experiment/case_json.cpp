#include "experiment/case_json.h"

#include <nlohmann/json.hpp>

#include "experiment/schema.h"
#include "plugins/registry.h"

namespace bench {

namespace {

using Json = nlohmann::ordered_json;

Json loc_json(const SourceLoc& l) { return Json::array({l.file, l.line, l.column, l.key}); }

SourceLoc loc_of(const Json& j) {
  return SourceLoc{j.at(0).get<std::string>(), j.at(1).get<int>(), j.at(2).get<int>(), j.at(3).get<std::string>()};
}

/// A Value with its kind: integers stay integers and floats floats (nlohmann writes a float so that
/// it reads back as the same double, and as a float).
Json value_json(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      return nullptr;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int();
    case Value::Kind::kFloat:
      return v.as_double();
    case Value::Kind::kString:
      return v.as_string();
    case Value::Kind::kArray: {
      Json a = Json::array();
      for (const Value& e : v.as_array()) a.push_back(value_json(e));
      return a;
    }
    case Value::Kind::kTable: {
      Json t = Json::object();
      for (const auto& [k, e] : v.as_table()) t[k] = value_json(e);
      return t;
    }
  }
  return nullptr;
}

Value value_of(const Json& j, const SourceLoc& loc) {
  if (j.is_null()) return {};
  if (j.is_boolean()) return Value::boolean(j.get<bool>(), loc);
  if (j.is_number_integer()) return Value::integer(j.get<int64_t>(), loc);
  if (j.is_number_float()) return Value::number(j.get<double>(), loc);
  if (j.is_string()) return Value::string(j.get<std::string>(), loc);
  if (j.is_array()) {
    Value::Array a;
    for (const Json& e : j) a.push_back(value_of(e, loc));
    return Value::array(std::move(a), loc);
  }
  Value::Table t;
  for (const auto& [k, e] : j.items()) t.emplace_back(k, value_of(e, loc));
  return Value::table(std::move(t), loc);
}

/// The parameters as given (with their places) and the owner's place; defaults are not written:
/// Params::resolve supplies them again.
Json params_json(const Params& p, const SourceLoc& owner) {
  Json given = Json::object();
  SourceLoc owner_loc = owner;
  for (const auto& [name, v] : p.values().as_table()) {
    if (p.given(name))
      given[name] = Json{{"value", value_json(v)}, {"at", loc_json(v.loc)}};
    else
      owner_loc = p.where(name);  // a default's place is its owner's
  }
  return Json{{"owner", loc_json(owner_loc)}, {"given", given}};
}

Params params_of(const Json& j, const std::vector<ParamSpec>& specs, const std::string& context) {
  Value given = Value::table();
  for (const auto& [name, e] : j.at("given").items()) given[name] = value_of(e.at("value"), loc_of(e.at("at")));
  return Params::resolve(specs, given, context, loc_of(j.at("owner")));
}

Json slot_json(const SlotChoice& s) {
  return Json{{"component", s.info->name}, {"at", loc_json(s.loc)}, {"params", params_json(s.params, s.loc)}};
}

SlotChoice slot_of(const Json& j, Slot slot, const Registry& registry) {
  SlotChoice s;
  const std::string name = j.at("component").get<std::string>();
  s.info = registry.find(slot, name);
  if (s.info == nullptr)
    throw Error("no " + std::string(slot_name(slot)) + " '" + name + "' among the loaded plugins' components");
  s.loc = loc_of(j.at("at"));
  s.params = params_of(j.at("params"), s.info->params, std::string(slot_name(slot)) + " '" + name + "'");
  return s;
}

}  // namespace

std::string case_json(const Case& c, const ResolvedCase& rc) {
  const ModelDims& d = rc.model.dims;
  Json where = Json::object();
  for (const auto& [k, l] : d.where) where[k] = loc_json(l);
  Json dims = {{"vocab_size", d.vocab_size},
               {"d_model", d.d_model},
               {"n_layers", d.n_layers},
               {"n_heads", d.n_heads},
               {"n_kv_heads", d.n_kv_heads},
               {"d_head", d.d_head},
               {"seq_len", d.seq_len},
               {"batch_size", d.batch_size},
               {"init_std", d.init_std},
               {"tie_embeddings", d.tie_embeddings},
               {"train_seq_len", d.train_seq_len},
               {"dropout_embedding", d.dropout_embedding},
               {"dropout_attention", d.dropout_attention},
               {"dropout_residual", d.dropout_residual},
               {"where", where}};
  Json slots = Json::object();
  for (const Slot s : all_slots())
    if (s != Slot::kDataset) slots[std::string(slot_name(s))] = slot_json(rc.model.slot(s));
  const Json model = {{"dims", dims},
                      {"dtype", std::string(dtype_name(rc.model.dtype))},
                      {"final_norm", rc.model.final_norm},
                      {"decay_groups", rc.model.decay_groups},
                      {"backend", static_cast<int>(rc.model.backend)},
                      {"slots", slots}};
  const Json j = {{"case",
                   {{"ordinal", c.ordinal},
                    {"runner", c.runner},
                    {"variant", c.variant},
                    {"label", c.label},
                    {"axes", value_json(c.axes)}}},
                  {"model", model},
                  {"data", slot_json(rc.data)},
                  {"runner", params_json(rc.runner, {})},
                  {"seed", rc.seed}};
  return j.dump();
}

std::pair<Case, ResolvedCase> case_from_json(const std::string& text, const Registry& registry,
                                             const RunnerSections& runners) {
  Case c;
  ResolvedCase rc;
  try {
    const Json j = Json::parse(text);
    const Json& jc = j.at("case");
    c.ordinal = jc.at("ordinal").get<int64_t>();
    c.runner = jc.at("runner").get<std::string>();
    c.variant = jc.at("variant").get<std::string>();
    c.label = jc.at("label").get<std::string>();
    c.axes = value_of(jc.at("axes"), {});
    c.config = Value::table();

    const Json& m = j.at("model");
    const Json& jd = m.at("dims");
    ModelDims& d = rc.model.dims;
    d.vocab_size = jd.at("vocab_size").get<int64_t>();
    d.d_model = jd.at("d_model").get<int64_t>();
    d.n_layers = jd.at("n_layers").get<int64_t>();
    d.n_heads = jd.at("n_heads").get<int64_t>();
    d.n_kv_heads = jd.at("n_kv_heads").get<int64_t>();
    d.d_head = jd.at("d_head").get<int64_t>();
    d.seq_len = jd.at("seq_len").get<int64_t>();
    d.batch_size = jd.at("batch_size").get<int64_t>();
    d.init_std = jd.at("init_std").get<double>();
    d.tie_embeddings = jd.at("tie_embeddings").get<bool>();
    d.train_seq_len = jd.at("train_seq_len").get<int64_t>();
    d.dropout_embedding = jd.at("dropout_embedding").get<double>();
    d.dropout_attention = jd.at("dropout_attention").get<double>();
    d.dropout_residual = jd.at("dropout_residual").get<double>();
    for (const auto& [k, l] : jd.at("where").items()) d.where[k] = loc_of(l);
    const auto dtype = parse_dtype(m.at("dtype").get<std::string>());
    if (!dtype) throw Error("unknown dtype " + m.at("dtype").get<std::string>());
    rc.model.dtype = *dtype;
    rc.model.final_norm = m.at("final_norm").get<std::string>();
    rc.model.decay_groups = m.at("decay_groups").get<std::vector<std::string>>();
    rc.model.backend = static_cast<tile::Backend>(m.at("backend").get<int>());
    for (const Slot s : all_slots())
      if (s != Slot::kDataset)
        rc.model.slots[static_cast<size_t>(s)] = slot_of(m.at("slots").at(std::string(slot_name(s))), s, registry);
    rc.data = slot_of(j.at("data"), Slot::kDataset, registry);
    const RunnerSection* section = schema::find_runner(runners, c.runner);
    if (section == nullptr) throw Error("no runner '" + c.runner + "'");
    rc.runner = params_of(j.at("runner"), section->params, "[" + c.runner + "]");
    rc.seed = j.at("seed").get<int64_t>();
    return {std::move(c), std::move(rc)};
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("not a case description: ") + e.what());
  }
}

}  // namespace bench
