#include "experiment/messages.h"

#include "bench/params.h"
#include "experiment/schema.h"
#include "plugins/registry.h"

namespace bench {

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

ConfigError unknown_key(const std::string& key, const std::vector<std::string>& allowed, const std::string& where,
                        const SourceLoc& loc) {
  std::string msg = "unknown key '" + key + "' in " + where;
  const std::string dym = did_you_mean(key, allowed);
  msg += dym.empty() ? "; allowed: " + join_names(allowed) : " (did you mean '" + dym + "'?)";
  return ConfigError(loc, msg);
}

ConfigError unknown_model_key(const std::string& key, const std::vector<std::string>& allowed, const Value& model,
                              const Registry& registry, const SourceLoc& loc) {
  std::vector<std::string> owners;  // "attention.window": the slots whose component takes the key
  for (const auto& [slot_key, slot] : schema::model_slots()) {
    const Value* s = model.find(slot_key);
    const Value* type = s != nullptr ? s->find("type") : nullptr;
    if (type == nullptr || !type->is_string()) continue;
    const ComponentInfo* info = registry.find(slot, type->as_string());
    if (info == nullptr) continue;
    for (const ParamSpec& p : info->params)
      if (p.name == key) owners.push_back(slot_key + "." + key);
  }
  if (owners.empty()) return unknown_key(key, allowed, "[model]", loc);
  std::string hint;
  for (size_t i = 0; i < owners.size(); ++i)
    hint += (i == 0 ? "" : i + 1 == owners.size() ? "' or '" : "', '") + owners[i];
  return ConfigError(loc, "unknown key '" + key + "' in [model] (did you mean '" + hint + "'?)");
}

ConfigError unknown_component(Slot slot, const std::string& name, const Registry& registry, const SourceLoc& loc) {
  const auto names = registry.names(slot);
  std::string msg = "unknown " + std::string(slot_name(slot)) + " '" + name + "'";
  const std::string dym = did_you_mean(name, names);
  if (!dym.empty()) msg += " (did you mean '" + dym + "'?)";
  msg += names.empty() ? "; no plugin provides one" : "; available: " + join_names(names);
  return ConfigError(loc, msg);
}

}  // namespace bench
