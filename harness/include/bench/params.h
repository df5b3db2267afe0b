// defines: bench::ParamType, ParamSpec, Params — what a component can be configured with
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/error.h"
#include "bench/value.h"

namespace bench {

/// Declared type of a component parameter.
enum class ParamType : uint8_t { kInt, kFloat, kBool, kString, kEnum, kFloatList, kIntList, kStringList };

/// "int", "float", "bool", "string", "enum", "float list", "int list", "string list".
std::string_view param_type_name(ParamType t);

/// One declared parameter: name, type, default, one-line doc, and optional constraints.
struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kInt;
  Value default_value;
  std::string doc;
  std::vector<std::string> choices;  ///< kEnum, and kStringList elements when not empty
  std::optional<double> min;         ///< inclusive lower bound for numbers
  std::optional<double> max;         ///< inclusive upper bound for numbers

  static ParamSpec integer(std::string name, int64_t def, std::string doc);
  static ParamSpec number(std::string name, double def, std::string doc);
  static ParamSpec boolean(std::string name, bool def, std::string doc);
  static ParamSpec string(std::string name, std::string def, std::string doc);
  static ParamSpec choice(std::string name, std::string def, std::vector<std::string> choices, std::string doc);
  static ParamSpec numbers(std::string name, const std::vector<double>& def, std::string doc);
  static ParamSpec integers(std::string name, const std::vector<int64_t>& def, std::string doc);
  /// A list of strings; when `choices` is not empty every element must be one of them.
  static ParamSpec strings(std::string name, std::vector<std::string> def, std::vector<std::string> choices,
                           std::string doc);
  /// Fluent constraints: ParamSpec::number("eps", 1e-5, "...").at_least(0).
  ParamSpec at_least(double v) &&;
  ParamSpec at_most(double v) &&;

  /// True when an array written for this parameter is its value, not a sweep.
  bool takes_list() const {
    return type == ParamType::kFloatList || type == ParamType::kIntList || type == ParamType::kStringList;
  }
  /// The default as text, for `bench list`.
  std::string default_str() const;
};

/// Checked values of a component's parameters: every declared parameter has a value (given or
/// default) of its declared type. Built by the harness; components only read it.
class Params {
 public:
  Params() = default;
  /// Check `given` (a table, possibly null) against `specs`: unknown keys (with a did-you-mean),
  /// wrong types and bounds throw ConfigError at the offending value's location. `context`
  /// names the owner in messages, e.g. "norm 'rmsnorm'". The key "type" is skipped.
  static Params resolve(const std::vector<ParamSpec>& specs, const Value& given, std::string_view context,
                        const SourceLoc& owner_loc);

  int64_t integer(std::string_view name) const;
  double number(std::string_view name) const;
  bool boolean(std::string_view name) const;
  const std::string& string(std::string_view name) const;
  std::vector<double> numbers(std::string_view name) const;
  std::vector<int64_t> integers(std::string_view name) const;
  std::vector<std::string> strings(std::string_view name) const;
  /// True when the experiment set this parameter (rather than its default applying).
  bool given(std::string_view name) const;
  /// Where the parameter was set (the owner's location for defaults).
  SourceLoc where(std::string_view name) const;
  /// A path parameter resolved relative to the directory of the file that set it.
  std::string path(std::string_view name) const;
  /// All values as a table (for storage and labels).
  const Value& values() const { return values_; }

 private:
  const Value& get(std::string_view name) const;
  Value values_ = Value::table();
  std::map<std::string, bool, std::less<>> given_;
  SourceLoc owner_;
};

/// Closest candidate by edit distance, or "" when none is close enough to suggest.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace bench
