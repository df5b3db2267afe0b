#include "plugins/registry.h"

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

namespace bench {

namespace fs = std::filesystem;

namespace {

struct Entry {
  ComponentInfo info;
  size_t plugin = 0;  // index into plugins_
};

// Collects what a plugin registers; problems are checked after the plugin function returns so
// that nothing has to be thrown into plugin code.
class CollectingRegistrar final : public Registrar {
 public:
  void plugin(std::string_view name, std::string_view version, std::string_view doc) override {
    record.name = name;
    record.version = version;
    record.doc = doc;
    described = true;
  }
  void add(ComponentInfo info) override { added.push_back(std::move(info)); }
  void set_default(Slot slot, std::string_view name) override { defaults.emplace_back(slot, name); }
  void add_attention_core(AttentionCoreInfo info) override { cores.push_back(std::move(info)); }

  PluginRecord record;
  bool described = false;
  std::vector<ComponentInfo> added;
  std::vector<std::pair<Slot, std::string>> defaults;
  std::vector<AttentionCoreInfo> cores;
};

[[noreturn]] void fail(const fs::path& file, std::string_view step, const std::string& message) {
  throw Error("plugin " + file.string() + ": " + std::string(step) + ": " + message);
}

}  // namespace

struct Registry::Impl {
  std::vector<boost::dll::shared_library> libraries;
  std::set<std::string> loaded_paths;
  std::map<std::pair<int, std::string>, Entry, std::less<>> entries;
  std::map<int, std::pair<std::string, size_t>> defaults;   // slot -> component name, declaring plugin
  std::vector<std::pair<AttentionCoreInfo, size_t>> cores;  // in load order, with the registering plugin
};

Registry::Registry() : impl_(std::make_unique<Impl>()) {}

// Entries (and their factories' code) go first. The libraries are never unloaded: an exception
// thrown by a plugin's code is caught above the registry, after it is gone, and the exception's
// vtable and what() live in the plugin (hidden visibility), so unloading here would turn a
// one-line configuration error into a crash. They are kept until the process exits.
Registry::~Registry() {
  impl_->entries.clear();
  static std::mutex mutex;
  // Never freed, so never unloaded, not even by static destructors at exit. (Out of memory here,
  // in a destructor, ends the process, as it would anywhere else in it.)
  static auto* kept = new std::vector<boost::dll::shared_library>();  // NOLINT(bugprone-unhandled-exception-at-new)
  const std::lock_guard<std::mutex> lock(mutex);
  for (auto& lib : impl_->libraries) kept->push_back(std::move(lib));
  impl_->libraries.clear();
}

fs::path Registry::builtin_directory() {
  std::error_code ec;
  const fs::path lib = boost::dll::this_line_location(ec);
  if (ec) return {};
  return lib.parent_path() / "bench" / "plugins";
}

void Registry::load_file(const fs::path& file) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(file, ec);
  const std::string key = ec ? file.string() : canonical.string();
  if (impl_->loaded_paths.count(key)) return;

  // 1. open
  boost::dll::shared_library lib;
  try {
    lib.load(canonical, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    fail(file, "open", e.what());
  }
  // 2. ABI tag, before anything else in the plugin runs
  if (!lib.has("bench_plugin_abi")) fail(file, "check ABI", "missing symbol bench_plugin_abi (not a bench plugin?)");
  const char* tag = lib.get<const char*()>("bench_plugin_abi")();
  if (tag == nullptr || std::string_view(tag) != BENCH_ABI_TAG) {
    fail(file, "check ABI",
         "built for " + std::string(tag ? tag : "(null)") + " but this bench is " + BENCH_ABI_TAG +
             "; rebuild the plugin against the installed headers");
  }
  // 3. entry point
  if (!lib.has("bench_plugin_register")) fail(file, "find entry point", "missing symbol bench_plugin_register");
  auto entry = lib.get<int(Registrar*, char*, size_t)>("bench_plugin_register");
  // 4. register
  CollectingRegistrar reg;
  char err[1024] = {0};
  if (entry(&reg, err, sizeof err) != 0) fail(file, "register", err[0] ? err : "failed without a message");
  if (!reg.described) fail(file, "register", "the plugin did not describe itself (BENCH_PLUGIN)");
  // 5. names: unique within the plugin and against everything loaded before
  std::set<std::pair<int, std::string>> seen;
  for (const auto& info : reg.added) {
    const auto k = std::make_pair(static_cast<int>(info.slot), info.name);
    if (info.name.empty())
      fail(file, "register", "a component in slot '" + std::string(slot_name(info.slot)) + "' has no name");
    if (!info.factory) fail(file, "register", "component '" + info.name + "' has no factory");
    if (!seen.insert(k).second)
      fail(file, "register",
           "duplicate component '" + info.name + "' in slot '" + std::string(slot_name(info.slot)) + "'");
    auto it = impl_->entries.find(k);
    if (it != impl_->entries.end())
      fail(file, "register",
           "duplicate component '" + info.name + "' in slot '" + std::string(slot_name(info.slot)) +
               "': already registered by " + plugins_[it->second.plugin].path);
  }
  for (const auto& p : plugins_)
    if (p.name == reg.record.name)
      fail(file, "register", "duplicate plugin name '" + p.name + "': already loaded from " + p.path);
  // 6. defaults: each of its own components, at most one per slot across all plugins
  std::set<int> defaulted;
  for (const auto& [slot, name] : reg.defaults) {
    const std::string what = "default " + std::string(slot_name(slot)) + " '" + name + "'";
    if (!seen.count({static_cast<int>(slot), name}))
      fail(file, "register", what + ": the plugin registers no such component");
    if (!defaulted.insert(static_cast<int>(slot)).second)
      fail(file, "register", "two defaults for slot '" + std::string(slot_name(slot)) + "'");
    if (const auto it = impl_->defaults.find(static_cast<int>(slot)); it != impl_->defaults.end())
      fail(file, "register",
           what + ": slot '" + std::string(slot_name(slot)) + "' already has default '" + it->second.first + "' from " +
               plugins_[it->second.second].path);
  }
  // 6b. attention cores: named, complete, unique within the plugin, and not taken in this process
  // by another file (the frame finds cores by name, process-wide: bench/attention_core.h)
  std::set<std::string> core_seen;
  for (const auto& core : reg.cores) {
    const std::string what = "attention core '" + core.name + "'";
    if (core.name.empty()) fail(file, "register", "an attention core has no name");
    if (core.unsupported == nullptr || core.preferred == nullptr || core.make == nullptr)
      fail(file, "register", what + " lacks its unsupported, preferred or make function");
    if (!core_seen.insert(core.name).second) fail(file, "register", "duplicate " + what + " in the plugin");
    const std::string other = attention_core_origin(core.name);
    if (!other.empty() && other != key)
      fail(file, "register", "duplicate " + what + ": already registered by " + other);
    if (core.name == "auto" || core.name == "ours")
      fail(file, "register", what + ": the name is reserved (the frame's choice among cores)");
  }
  // 7. commit
  reg.record.path = key;
  plugins_.push_back(reg.record);
  for (const auto& [slot, name] : reg.defaults) impl_->defaults[static_cast<int>(slot)] = {name, plugins_.size() - 1};
  for (auto& info : reg.added) {
    const auto k = std::make_pair(static_cast<int>(info.slot), info.name);
    impl_->entries.emplace(k, Entry{std::move(info), plugins_.size() - 1});
  }
  for (auto& core : reg.cores) {
    // Checked above: publishing cannot be refused now.
    if (const std::string why = publish_attention_core(core, key); !why.empty()) fail(file, "register", why);
    impl_->cores.emplace_back(std::move(core), plugins_.size() - 1);
  }
  impl_->libraries.push_back(std::move(lib));
  impl_->loaded_paths.insert(key);
}

void Registry::load_directory(const fs::path& dir, bool required) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (required) throw Error("plugin directory " + dir.string() + " does not exist");
    return;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".so") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) load_file(f);
}

void Registry::load_defaults() {
  load_directory(builtin_directory(), false);
  if (const char* env = std::getenv("BENCH_PLUGIN_PATH")) {
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      const size_t end = s.find(':', start);
      const std::string part = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (!part.empty()) load_directory(part, true);
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
}

const ComponentInfo* Registry::find(Slot slot, std::string_view name) const {
  auto it = impl_->entries.find(std::make_pair(static_cast<int>(slot), std::string(name)));
  return it == impl_->entries.end() ? nullptr : &it->second.info;
}

const ComponentInfo* Registry::default_component(Slot slot) const {
  const auto it = impl_->defaults.find(static_cast<int>(slot));
  return it == impl_->defaults.end() ? nullptr : find(slot, it->second.first);
}

std::vector<std::string> Registry::names(Slot slot) const {
  std::vector<std::string> out;
  for (const auto& [k, e] : impl_->entries)
    if (k.first == static_cast<int>(slot)) out.push_back(k.second);
  return out;
}

std::vector<const ComponentInfo*> Registry::components(Slot slot) const {
  std::vector<const ComponentInfo*> out;
  for (const auto& [k, e] : impl_->entries)
    if (k.first == static_cast<int>(slot)) out.push_back(&e.info);
  return out;
}

std::vector<std::pair<const AttentionCoreInfo*, std::string>> Registry::attention_cores() const {
  std::vector<std::pair<const AttentionCoreInfo*, std::string>> out;
  for (const auto& [info, plugin] : impl_->cores) out.emplace_back(&info, plugins_[plugin].path);
  return out;
}

const std::string& Registry::origin(const ComponentInfo* info) const {
  for (const auto& [k, e] : impl_->entries)
    if (&e.info == info) return plugins_[e.plugin].path;
  static const std::string unknown = "(unknown)";
  return unknown;
}

std::unique_ptr<Component> Registry::create(const ComponentInfo& info, const Params& params) const {
  std::unique_ptr<Component> c;
  try {
    c = info.factory(params);
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("plugin " + origin(&info) + ": " + std::string(slot_name(info.slot)) + " '" + info.name +
                "': factory threw: " + e.what());
  } catch (...) {
    throw Error("plugin " + origin(&info) + ": " + std::string(slot_name(info.slot)) + " '" + info.name +
                "': factory threw a non-standard exception");
  }
  if (!c)
    throw Error("plugin " + origin(&info) + ": " + std::string(slot_name(info.slot)) + " '" + info.name +
                "': factory returned nothing");
  return c;
}

}  // namespace bench
