// defines: bench::unknown_key, unknown_model_key, unknown_component, join_names — the experiment layer's messages for
// a key or a component name it does not know, with a did-you-mean (written once, used by reading,
// expanding and resolving)
#pragma once

#include <string>
#include <vector>

#include "bench/component.h"
#include "bench/error.h"
#include "bench/value.h"

namespace bench {

class Registry;

/// "a, b, c".
std::string join_names(const std::vector<std::string>& names);

/// ConfigError at `loc`: "unknown key 'KEY' in WHERE", then " (did you mean 'X'?)" or "; allowed: ...".
ConfigError unknown_key(const std::string& key, const std::vector<std::string>& allowed, const std::string& where,
                        const SourceLoc& loc);

/// unknown_key for a key of [model] `model` (a merged case configuration, every slot naming its
/// component): a parameter of the component in one of the model's slots, written a level too
/// high, gets that slot's key as the hint: "unknown key 'window' in [model] (did you mean
/// 'attention.window'?)".
ConfigError unknown_model_key(const std::string& key, const std::vector<std::string>& allowed, const Value& model,
                              const Registry& registry, const SourceLoc& loc);

/// ConfigError at `loc`: "unknown SLOT 'NAME'", a did-you-mean, and the components the registry has
/// in the slot (or that no plugin provides one).
ConfigError unknown_component(Slot slot, const std::string& name, const Registry& registry, const SourceLoc& loc);

}  // namespace bench
