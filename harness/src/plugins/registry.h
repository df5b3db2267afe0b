// defines: bench::PluginRecord, bench::Registry — loads plugins and owns their components' infos
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/plugin.h"

namespace bench {

/// A loaded plugin, as it described itself.
struct PluginRecord {
  std::string name;
  std::string version;
  std::string doc;
  std::string path;
};

/// Every component of every loaded plugin, by slot and name, and the attention cores they
/// register. Loading follows the order open -> check ABI tag -> find entry point -> register ->
/// check names, and every failure is an Error "plugin PATH: STEP: message". A plugin's attention
/// cores are published to the process (bench/attention_core.h), where the frame finds them. The registry keeps the
/// libraries loaded for its whole lifetime, so it must outlive every component created through it.
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  /// Load one plugin file. A file already loaded (same canonical path) is skipped.
  void load_file(const std::filesystem::path& file);
  /// Load every *.so in `dir`, in name order. A missing directory is an error when `required`.
  void load_directory(const std::filesystem::path& dir, bool required);
  /// The build's own plugin directory, then each directory of $BENCH_PLUGIN_PATH.
  void load_defaults();

  /// Component `name` in `slot`, or nullptr.
  const ComponentInfo* find(Slot slot, std::string_view name) const;
  /// The component a plugin declared the default of `slot` (Registrar::set_default), or nullptr
  /// when no loaded plugin declares one.
  const ComponentInfo* default_component(Slot slot) const;
  /// Registered names in `slot`, sorted.
  std::vector<std::string> names(Slot slot) const;
  /// Registered components in `slot`, sorted by name.
  std::vector<const ComponentInfo*> components(Slot slot) const;
  /// The attention cores this registry's plugins registered, in load order, with the plugin
  /// file of each (`bench list cores`).
  std::vector<std::pair<const AttentionCoreInfo*, std::string>> attention_cores() const;
  /// Path of the plugin file that registered `info`.
  const std::string& origin(const ComponentInfo* info) const;
  const std::vector<PluginRecord>& plugins() const { return plugins_; }

  /// Run the factory of `info`; a ConfigError passes through, anything else thrown becomes an
  /// Error naming the plugin file and the component.
  std::unique_ptr<Component> create(const ComponentInfo& info, const Params& params) const;

  /// The build's own plugin directory (next to libbench: lib/bench/plugins).
  static std::filesystem::path builtin_directory();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<PluginRecord> plugins_;
};

}  // namespace bench
