// defines: bench::ExperimentFile, read_experiment, Case, expand_cases
//
// An experiment file is read in two steps: read_experiment() parses it and checks its top level
// (and yields plugin_paths, which must be loaded before components can be checked), then
// expand_cases() merges variants and device overrides and expands sweeps into cases.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/value.h"
#include "experiment/diagnostics.h"
#include "experiment/schema.h"

namespace bench {

class Registry;

/// An experiment file as read, before plugins are loaded.
struct ExperimentFile {
  std::string path;
  std::string text;
  Value root;
  std::string name;  ///< `name`, or the file's stem
  std::string description;
  std::string device;                     ///< "auto", "cpu", "cuda", "guarded" or "emulated"
  int64_t threads = 0;                    ///< CPU worker threads; 0 = all cores
  std::vector<std::string> plugin_paths;  ///< resolved against the file's directory
  RunnerSections runners;                 ///< the runners it was read with, in expansion order
};

/// Parse `path` and check its top level, with a section for each of `runners`
/// (runners/registry.h: runner_sections()). Throws ConfigError at file:line:col (ConfigErrors
/// when it has several mistakes). A file read with `model_only` (it describes a model, e.g. for
/// `bench eval`) needs no runner section.
ExperimentFile read_experiment(const std::string& path, const RunnerSections& runners, bool model_only = false);
/// The same, adding every independent mistake of the top level to `diags` instead; a mistake that
/// expansion would cascade from blocks it (Diagnostics::blocked()). Still throws when the file
/// cannot be read or parsed.
ExperimentFile read_experiment(const std::string& path, const RunnerSections& runners, Diagnostics& diags,
                               bool model_only = false);

/// One unit of work: a fully merged configuration for one runner.
struct Case {
  int64_t ordinal = 0;
  std::string runner;   ///< the runner's name (its section)
  std::string variant;  ///< [[variant]] name, "" for the base configuration
  std::string label;    ///< variant name and swept values, e.g. "pre-norm lr=0.003"
  Value axes;           ///< table: swept key path -> value
  Value config;         ///< table: model, data, seed and the runner's section
};

/// Expand an experiment into cases for `device` ("cpu" or "cuda", selecting the [cpu] or
/// [cuda] overrides): per variant, a case per point of its sweeps for each runner section, in the
/// order of file.runners. Unknown components and empty sweeps (named by key) are ConfigErrors;
/// more than `max_cases` cases is a ConfigError too, which says how many.
std::vector<Case> expand_cases(const ExperimentFile& file, const Registry& registry, std::string_view device,
                               size_t max_cases = 10000);
/// The same, adding the mistakes to `diags`: a variant with a mistake makes no cases and the
/// others are expanded still; too many cases blocks the later stages.
std::vector<Case> expand_cases(const ExperimentFile& file, const Registry& registry, std::string_view device,
                               Diagnostics& diags, size_t max_cases = 10000);

/// A case's label: the variant name and each swept axis as name=value, where a key path names its
/// axis by its last part ("model.d_model" -> d_model) or, for a component's type, by its slot
/// ("model.norm.type" -> norm); "base" when there is neither. With `keep`, only the axes whose
/// key path it accepts.
std::string case_label(const std::string& variant, const Value& axes,
                       bool (*keep)(std::string_view key_path) = nullptr);

/// Deep merge: tables merge key by key, anything else in `over` replaces `base`.
void merge_into(Value& base, const Value& over);

}  // namespace bench
