#include "experiment/messages.h"

#include "bench/params.h"
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

ConfigError unknown_component(Slot slot, const std::string& name, const Registry& registry, const SourceLoc& loc) {
  const auto names = registry.names(slot);
  std::string msg = "unknown " + std::string(slot_name(slot)) + " '" + name + "'";
  const std::string dym = did_you_mean(name, names);
  if (!dym.empty()) msg += " (did you mean '" + dym + "'?)";
  msg += names.empty() ? "; no plugin provides one" : "; available: " + join_names(names);
  return ConfigError(loc, msg);
}

}  // namespace bench
