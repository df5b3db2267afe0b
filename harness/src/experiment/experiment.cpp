#include "experiment/experiment.h"

#include <algorithm>
#include <filesystem>
#include <functional>

#include "experiment/diagnostics.h"
#include "experiment/hf_config.h"
#include "experiment/match.h"
#include "experiment/messages.h"
#include "experiment/schema.h"
#include "experiment/toml_reader.h"
#include "plugins/registry.h"

namespace bench {

namespace fs = std::filesystem;

namespace {

// Each unknown key is a mistake of its own.
void check_keys(const Value& table, const std::vector<std::string>& allowed, const std::string& where,
                Diagnostics& diags) {
  for (const auto& [k, v] : table.as_table())
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) diags.add(unknown_key(k, allowed, where, v.loc));
}

const Value& expect_table(const Value& v, const std::string& what) {
  if (!v.is_table()) throw ConfigError(v.loc, what + " must be a table, found " + std::string(v.kind_name()));
  return v;
}

std::string expect_string(const Value& v, const std::string& what) {
  if (!v.is_string()) throw ConfigError(v.loc, what + " must be a string, found " + std::string(v.kind_name()));
  return v.as_string();
}

// A slot value written as "name", ["a", "b"] or {type = ..., params...} becomes a table.
Value normalize_slot(const Value& v, const std::string& what) {
  if (v.is_string() || v.is_array()) {
    Value t = Value::table({}, v.loc);
    t["type"] = v;
    return t;
  }
  if (!v.is_table())
    throw ConfigError(v.loc, what + " must name a component (a string) or be a table with a 'type', found " +
                                 std::string(v.kind_name()));
  return v;
}

void normalize_model(Value& model) {
  if (model.is_null()) return;
  for (auto& [k, v] : model.as_table())
    if (schema::model_slot(k)) v = normalize_slot(v, "model." + k);
}

// The sections of an override table ([[variant]], [cpu], [cuda]) in canonical form.
Value normalized_sections(const Value& t, const RunnerSections& runners) {
  Value out = Value::table({}, t.loc);
  for (const auto& key : schema::override_keys(runners)) {
    const Value* v = t.find(key);
    if (v == nullptr) continue;
    Value c = *v;
    if (key == "model") {
      expect_table(c, "[model]");
      normalize_model(c);
    } else if (key == "data") {
      c = normalize_slot(c, "[data]");
    } else if (key != "seed") {
      expect_table(c, "[" + key + "]");
    }
    out[key] = std::move(c);
  }
  return out;
}

std::string axis_name(std::string_view key) {
  // model.norm.type -> norm; model.d_model -> d_model; stability.lr -> lr
  const size_t last = key.rfind('.');
  const std::string_view tail = last == std::string_view::npos ? key : key.substr(last + 1);
  if (tail != "type" || last == std::string_view::npos) return std::string(tail);
  const size_t before = key.rfind('.', last - 1);
  return std::string(key.substr(before == std::string_view::npos ? 0 : before + 1,
                                last - (before == std::string_view::npos ? 0 : before + 1)));
}

std::string axis_value(const Value& v) { return v.is_string() ? v.as_string() : v.str(); }

// Walks a merged configuration in a fixed order and reports the first array that is a sweep
// (an array where the key's declared type is a scalar).
class SweepFinder {
 public:
  explicit SweepFinder(const Registry& registry) : registry_(registry) {}

  // Returns the path of the first sweep, or an empty path.
  std::vector<std::string> find(const Value& config, const RunnerSection& runner) {
    if (const Value* s = config.find("seed"); s && s->is_array()) return {"seed"};
    if (const Value* m = config.find("model")) {
      for (const auto& [k, v] : m->as_table()) {
        if (auto slot = schema::model_slot(k)) {
          auto p = find_in_slot(*slot, v, "model." + k);
          if (!p.empty()) return prepend({"model", k}, p);
        } else if (v.is_array() && is_scalar(schema::model_params(), k)) {
          return {"model", k};
        }
      }
    }
    if (const Value* d = config.find("data")) {
      auto p = find_in_slot(Slot::kDataset, *d, "[data]");
      if (!p.empty()) return prepend({"data"}, p);
    }
    if (const Value* r = config.find(runner.name)) {
      for (const auto& [k, v] : r->as_table())
        if (v.is_array() && is_scalar(runner.params, k)) return {runner.name, k};
    }
    return {};
  }

  const ComponentInfo& component(Slot slot, const Value& type, const std::string& what) const {
    const std::string name = expect_string(type, what + ".type");
    const ComponentInfo* info = registry_.find(slot, name);
    if (info == nullptr) throw unknown_component(slot, name, registry_, type.loc);
    return *info;
  }

 private:
  static std::vector<std::string> prepend(std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  }

  static bool is_scalar(const std::vector<ParamSpec>& specs, const std::string& key) {
    for (const auto& s : specs)
      if (s.name == key) return !s.takes_list();
    return true;  // unknown keys are reported when the case is resolved; an array there is a sweep
  }

  std::vector<std::string> find_in_slot(Slot slot, const Value& t, const std::string& what) const {
    const Value* type = t.find("type");
    if (type == nullptr) return {};
    if (type->is_array()) return {"type"};
    const ComponentInfo& info = component(slot, *type, what);
    for (const auto& [k, v] : t.as_table())
      if (k != "type" && v.is_array() && is_scalar(info.params, k)) return {k};
    return {};
  }

  const Registry& registry_;
};

// The [model] of a Hugging Face config.json with the TOML's keys over it. A slot table without a
// `type` changes or adds options of the configuration's component; a slot that names its
// component (a string, or a table with `type`) replaces the configuration's, options and all.
Value overlay_model(Value hf, const Value& toml) {
  normalize_model(hf);
  for (const auto& [k, v] : toml.as_table()) {
    Value* base = hf.find(k);
    if (base != nullptr && schema::model_slot(k) && v.is_table() && v.find("type") == nullptr) {
      merge_into(*base, v);
    } else {
      hf[k] = v;
    }
  }
  return hf;
}

// `from = "PATH"` in [model]: the model of a Hugging Face config.json (or its directory), relative
// to the experiment file, under the table's other keys.
void read_model_from(Value& root, const std::string& path) {
  Value* model = root.find("model");
  if (model == nullptr || !model->is_table()) return;
  const Value* from = model->find("from");
  if (from == nullptr) return;
  if (!from->is_string()) throw ConfigError(from->loc, "model.from must be a path (a string), found " + from->str());
  fs::path p(from->as_string());
  if (p.is_relative()) p = fs::path(path).parent_path() / p;
  std::error_code ec;
  if (!fs::exists(p, ec) || !is_hf_config(p.string()))
    throw ConfigError(from->loc, "model.from: '" + from->as_string() +
                                     "' is neither a Hugging Face config.json nor a directory holding one");
  Value toml = *model;
  toml.erase("from");
  *model = overlay_model(read_hf_config(p.string()), toml);
}

Value* at_path(Value& root, const std::vector<std::string>& path) {
  Value* v = &root;
  for (const auto& k : path) v = v->find(k);
  return v;
}

}  // namespace

std::string case_label(const std::string& variant, const Value& axes, bool (*keep)(std::string_view key_path)) {
  std::string label = variant;
  for (const auto& [k, v] : axes.as_table())
    if (keep == nullptr || keep(k)) label += (label.empty() ? "" : " ") + axis_name(k) + "=" + axis_value(v);
  return label.empty() ? "base" : label;
}

void merge_into(Value& base, const Value& over) {
  if (base.is_table() && over.is_table()) {
    for (const auto& [k, v] : over.as_table()) {
      Value* b = base.find(k);
      if (b == nullptr) {
        base[k] = v;
      } else {
        merge_into(*b, v);
      }
    }
    return;
  }
  base = over;
}

ExperimentFile read_experiment(const std::string& path, const RunnerSections& runners, bool model_only) {
  Diagnostics diags;
  ExperimentFile f = read_experiment(path, runners, diags, model_only);
  diags.throw_if_any();
  return f;
}

ExperimentFile read_experiment(const std::string& path, const RunnerSections& runners, Diagnostics& diags,
                               bool model_only) {
  ExperimentFile f;
  f.path = path;
  f.runners = runners;
  std::error_code ec;
  const bool hf = is_hf_config(path);
  if (hf) {
    // A Hugging Face config.json (or its directory) is a file with only a model.
    f.text = read_text_file(hf_config_file(path));
    f.root = Value::table();
    if (!diags.check([&] { f.root["model"] = read_hf_config(path); }, true)) return f;
  } else {
    if (fs::is_directory(path, ec))
      throw ConfigError(SourceLoc{path, 0, 0, {}},
                        "is a directory, not an experiment file (nor one holding a config.json)");
    // A file that cannot be read or parsed has that one mistake.
    f.text = read_text_file(path);
    f.root = read_toml(f.text, path);
  }
  const SourceLoc top{path, 0, 0, {}};
  // A model from a Hugging Face config is read first: everything after sees its keys.
  if (!diags.check([&] { read_model_from(f.root, path); }, true)) return f;
  // Each check below is independent of the others. A mistake in what expansion reads (the seed,
  // the plugins, the tables and the variants) blocks the later stages: they would cascade from it.
  // Unknown keys, the name, the description, the device and the threads do not.
  check_keys(f.root, schema::top_level_keys(runners), "the experiment", diags);

  f.name = fs::path(path).stem().string();
  if (hf) {  // the model's directory: "Qwen2.5-0.5B" for Qwen2.5-0.5B/config.json
    const fs::path dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
    const std::string stem = fs::absolute(dir, ec).lexically_normal().filename().string();
    if (!stem.empty()) f.name = stem;
  }
  diags.check([&] {
    if (const Value* v = f.root.find("name")) {
      f.name = expect_string(*v, "name");
      if (f.name.empty()) throw ConfigError(v->loc, "name must not be empty");
    }
  });
  diags.check([&] {
    if (const Value* v = f.root.find("description")) f.description = expect_string(*v, "description");
  });
  f.device = "auto";
  diags.check([&] {
    if (const Value* v = f.root.find("device")) {
      const std::string device = expect_string(*v, "device");
      if (device != "auto" && device != "cpu" && device != "cuda" && device != "guarded" && device != "emulated")
        throw ConfigError(v->loc, "device must be \"auto\", \"cpu\", \"cuda\", \"guarded\" or \"emulated\", found \"" +
                                      device + "\"");
      f.device = device;
    }
  });
  diags.check([&] {
    if (const Value* v = f.root.find("threads")) {
      if (v->kind() != Value::Kind::kInt || v->as_int() < 0)
        throw ConfigError(v->loc, "threads must be a non-negative integer (0 = all cores), found " + v->str());
      f.threads = v->as_int();
    }
  });
  if (const Value* v = f.root.find("seed")) {
    auto check_seed = [](const Value& s) {
      if (s.kind() != Value::Kind::kInt || s.as_int() < 0)
        throw ConfigError(s.loc, "seed must be a non-negative integer, found " + s.str());
    };
    if (v->is_array()) {
      if (v->as_array().empty()) diags.check([&] { throw ConfigError(v->loc, "empty sweep: seed = []"); }, true);
      for (const auto& s : v->as_array()) diags.check([&] { check_seed(s); }, true);
    } else {
      diags.check([&] { check_seed(*v); }, true);
    }
  }
  if (const Value* v = f.root.find("plugin_paths")) {
    diags.check(
        [&] {
          if (!v->is_array()) throw ConfigError(v->loc, "plugin_paths must be an array of directory paths");
        },
        true);
    const fs::path dir = fs::path(path).parent_path();
    if (v->is_array())
      for (const auto& e : v->as_array())
        diags.check(
            [&] {
              const std::string p = expect_string(e, "plugin_paths entry");
              fs::path pp(p);
              if (pp.is_relative()) pp = dir / pp;
              if (!fs::is_directory(pp, ec)) throw ConfigError(e.loc, "plugin path '" + p + "' is not a directory");
              f.plugin_paths.push_back(pp.lexically_normal().string());
            },
            true);
  }
  std::vector<std::string> tables = {"model"};
  for (const auto& r : runners) tables.push_back(r.name);
  tables.insert(tables.end(), {"cpu", "cuda"});
  for (const auto& key : tables)
    if (const Value* v = f.root.find(key)) diags.check([&] { expect_table(*v, "[" + key + "]"); }, true);
  for (const char* key : {"cpu", "cuda"})
    if (const Value* v = f.root.find(key); v != nullptr && v->is_table())
      check_keys(*v, schema::override_keys(runners), std::string("[") + key + "]", diags);
  if (const Value* v = f.root.find("variant")) {
    if (!v->is_array()) {
      diags.check([&] { throw ConfigError(v->loc, "variant must be an array of tables: write [[variant]]"); }, true);
    } else {
      std::vector<std::string> names;
      auto allowed = schema::override_keys(runners);
      allowed.insert(allowed.end(), {"name", "description", "cpu", "cuda"});
      for (const auto& var : v->as_array()) {
        if (!diags.check([&] { expect_table(var, "[[variant]]"); }, true)) continue;
        check_keys(var, allowed, "[[variant]]", diags);
        diags.check(
            [&] {
              const Value* n = var.find("name");
              if (n == nullptr) throw ConfigError(var.loc, "[[variant]] needs a name");
              const std::string name = expect_string(*n, "variant name");
              if (name.empty()) throw ConfigError(n->loc, "variant name must not be empty");
              if (std::find(names.begin(), names.end(), name) != names.end())
                throw ConfigError(n->loc, "duplicate variant name '" + name + "'");
              names.push_back(name);
            },
            true);
        for (const char* key : {"cpu", "cuda"})
          if (const Value* d = var.find(key)) {
            if (diags.check([&] { expect_table(*d, std::string("[variant.") + key + "]"); }, true))
              check_keys(*d, schema::override_keys(runners), "[variant." + std::string(key) + "]", diags);
          }
      }
    }
  }
  // The match keys are checked with the rest of the top level; solved by match_budgets.
  diags.check([&] { read_match(f.root); }, true);
  const bool has_runner =
      std::any_of(runners.begin(), runners.end(), [&](const auto& r) { return f.root.find(r.name); });
  if (!model_only && !has_runner) {
    std::string sections;
    for (size_t i = 0; i < runners.size(); ++i)
      sections += std::string(i == 0 ? "" : i + 1 == runners.size() ? " or " : ", ") + "a [" + runners[i].name + "]";
    diags.add(ConfigError(top, "nothing to run: add " + sections + " section"));
  }
  return f;
}

std::vector<Case> expand_cases(const ExperimentFile& file, const Registry& registry, std::string_view device,
                               size_t max_cases) {
  Diagnostics diags;
  std::vector<Case> cases = expand_cases(file, registry, device, diags, max_cases);
  diags.throw_if_any();
  return cases;
}

std::vector<Case> expand_cases(const ExperimentFile& file, const Registry& registry, std::string_view device,
                               Diagnostics& diags, size_t max_cases) {
  const Value& root = file.root;
  // Base configuration with every section in canonical form.
  Value base = normalized_sections(root, file.runners);
  if (!base.find("seed")) base["seed"] = Value::integer(1234);
  if (!base.find("data")) base["data"] = Value::table();
  if (!base.find("model")) base["model"] = Value::table();
  if (const Value* d = root.find(std::string(device))) merge_into(base, normalized_sections(*d, file.runners));

  struct VariantDef {
    std::string name;
    Value overrides;
  };
  std::vector<VariantDef> variants;
  if (const Value* v = root.find("variant")) {
    for (const auto& var : v->as_array()) {
      Value o = normalized_sections(var, file.runners);
      if (const Value* d = var.find(std::string(device))) merge_into(o, normalized_sections(*d, file.runners));
      variants.push_back({var.find("name")->as_string(), std::move(o)});
    }
  } else {
    variants.push_back({"", Value::table()});
  }

  SweepFinder finder(registry);
  std::vector<Case> cases;
  size_t beyond = 0;  // cases past max_cases: counted, not made
  const auto key_of = [](const std::vector<std::string>& path) {
    std::string key;
    for (size_t i = 0; i < path.size(); ++i) key += (i ? "." : "") + path[i];
    return key;
  };
  const auto sweep_at = [&](Value& cfg, const std::vector<std::string>& path) -> const Value& {
    const Value& array = *at_path(cfg, path);
    if (array.as_array().empty()) throw ConfigError(array.loc, "empty sweep: " + key_of(path) + " = []");
    return array;
  };
  for (const auto& variant : variants) {
    // A mistake in one variant (an unknown component, an empty sweep) leaves the others to check.
    diags.check([&] {
      Value merged = base;
      merge_into(merged, variant.overrides);
      // Every model slot names a component, the default its plugin declares when the file names
      // none; the dataset too.
      Value& model = merged["model"];
      const auto name_default = [&](Value& s, Slot slot) {
        const ComponentInfo* d = registry.default_component(slot);
        if (!s.find("type") && d != nullptr) s["type"] = Value::string(d->name, s.loc);
      };
      for (const auto& [key, slot] : schema::model_slots()) {
        Value& s = model[key];
        if (s.is_null()) s = Value::table({}, model.loc);
        name_default(s, slot);
      }
      name_default(merged["data"], Slot::kDataset);

      for (const RunnerSection& section : file.runners) {
        const std::string& runner = section.name;
        if (!merged.find(runner)) continue;
        Value config = Value::table();
        config["model"] = merged["model"];
        config["data"] = merged["data"];
        config["seed"] = merged["seed"];
        config[runner] = merged[runner];

        // The cases `cfg` expands into, counted without making them: a sweep of a value multiplies
        // what follows by its length (whichever value is chosen, the same keys are swept after
        // it); a sweep of a component's type is counted per choice (each component declares its
        // own parameters), as is one whose values are lists themselves.
        std::function<size_t(Value&)> count = [&](Value& cfg) -> size_t {
          const auto path = finder.find(cfg, section);
          if (path.empty()) return 1;
          const Value& array = sweep_at(cfg, path);  // cfg is not changed: each choice goes to a copy
          const bool per_choice = path.back() == "type" || std::any_of(array.as_array().begin(), array.as_array().end(),
                                                                       [](const Value& v) { return v.is_array(); });
          size_t n = 0;
          for (const auto& choice : array.as_array()) {
            Value next = cfg;
            *at_path(next, path) = choice;
            if (!per_choice) return array.as_array().size() * count(next);
            n += count(next);
          }
          return n;
        };
        // Depth-first expansion: the first sweep found splits the configuration.
        std::function<void(Value&, Value&)> expand = [&](Value& cfg, Value& axes) {
          if (cases.size() >= max_cases) {
            beyond += count(cfg);
            return;
          }
          const auto path = finder.find(cfg, section);
          if (path.empty()) {
            Case c;
            c.ordinal = static_cast<int64_t>(cases.size());
            c.runner = runner;
            c.variant = variant.name;
            c.axes = axes;
            c.config = cfg;
            c.label = case_label(variant.name, axes);
            cases.push_back(std::move(c));
            return;
          }
          const Value& array = sweep_at(cfg, path);  // cfg is not changed: each choice goes to a copy
          const std::string key = key_of(path);
          for (const auto& choice : array.as_array()) {
            Value next = cfg;
            *at_path(next, path) = choice;
            Value next_axes = axes;
            next_axes[key] = choice;
            expand(next, next_axes);
          }
        };
        Value axes = Value::table();
        expand(config, axes);
      }
    });
  }
  if (beyond > 0) {
    diags.add(ConfigError(SourceLoc{file.path, 0, 0, {}},
                          "the sweeps expand to " + std::to_string(cases.size() + beyond) + " cases, more than the " +
                              std::to_string(max_cases) + " allowed; sweep fewer values or split the file"));
    diags.block();
  }
  return cases;
}

}  // namespace bench
