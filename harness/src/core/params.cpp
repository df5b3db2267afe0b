#include "bench/params.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace bench {

std::string_view param_type_name(ParamType t) {
  switch (t) {
    case ParamType::kInt:
      return "int";
    case ParamType::kFloat:
      return "float";
    case ParamType::kBool:
      return "bool";
    case ParamType::kString:
      return "string";
    case ParamType::kEnum:
      return "enum";
    case ParamType::kFloatList:
      return "float list";
    case ParamType::kIntList:
      return "int list";
    case ParamType::kStringList:
      return "string list";
  }
  return "unknown";
}

ParamSpec ParamSpec::integer(std::string name, int64_t def, std::string doc) {
  return ParamSpec{std::move(name), ParamType::kInt, Value::integer(def), std::move(doc), {}, {}, {}};
}
ParamSpec ParamSpec::number(std::string name, double def, std::string doc) {
  return ParamSpec{std::move(name), ParamType::kFloat, Value::number(def), std::move(doc), {}, {}, {}};
}
ParamSpec ParamSpec::boolean(std::string name, bool def, std::string doc) {
  return ParamSpec{std::move(name), ParamType::kBool, Value::boolean(def), std::move(doc), {}, {}, {}};
}
ParamSpec ParamSpec::string(std::string name, std::string def, std::string doc) {
  return ParamSpec{std::move(name), ParamType::kString, Value::string(std::move(def)), std::move(doc), {}, {}, {}};
}
ParamSpec ParamSpec::choice(std::string name, std::string def, std::vector<std::string> choices, std::string doc) {
  return ParamSpec{
      std::move(name), ParamType::kEnum, Value::string(std::move(def)), std::move(doc), std::move(choices), {}, {}};
}
ParamSpec ParamSpec::numbers(std::string name, const std::vector<double>& def, std::string doc) {
  Value::Array a;
  for (double d : def) a.push_back(Value::number(d));
  return ParamSpec{std::move(name), ParamType::kFloatList, Value::array(std::move(a)), std::move(doc), {}, {}, {}};
}
ParamSpec ParamSpec::integers(std::string name, const std::vector<int64_t>& def, std::string doc) {
  Value::Array a;
  for (int64_t d : def) a.push_back(Value::integer(d));
  return ParamSpec{std::move(name), ParamType::kIntList, Value::array(std::move(a)), std::move(doc), {}, {}, {}};
}
ParamSpec ParamSpec::strings(std::string name, std::vector<std::string> def, std::vector<std::string> choices,
                             std::string doc) {
  Value::Array a;
  for (auto& d : def) a.push_back(Value::string(std::move(d)));
  return ParamSpec{
      std::move(name), ParamType::kStringList, Value::array(std::move(a)), std::move(doc), std::move(choices), {}, {}};
}
ParamSpec ParamSpec::at_least(double v) && {
  min = v;
  return std::move(*this);
}
ParamSpec ParamSpec::at_most(double v) && {
  max = v;
  return std::move(*this);
}

std::string ParamSpec::default_str() const { return default_value.str(); }

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

Value check_value(const ParamSpec& spec, const Value& v, std::string_view context) {
  const std::string where = "'" + spec.name + "' of " + std::string(context);
  auto bad_type = [&](std::string_view expected) {
    return ConfigError(
        v.loc, where + " must be " + std::string(expected) + ", found " + std::string(v.kind_name()) + " " + v.str());
  };
  auto bound = [&](double b) {
    return spec.type == ParamType::kInt || spec.type == ParamType::kIntList ? std::to_string(static_cast<int64_t>(b))
                                                                            : Value::number(b).str();
  };
  auto check_bounds = [&](double d) {
    if (!std::isfinite(d)) throw ConfigError(v.loc, where + " must be finite, found " + v.str());
    if (spec.min && d < *spec.min)
      throw ConfigError(v.loc, where + " must be >= " + bound(*spec.min) + ", found " + v.str());
    if (spec.max && d > *spec.max)
      throw ConfigError(v.loc, where + " must be <= " + bound(*spec.max) + ", found " + v.str());
  };
  switch (spec.type) {
    case ParamType::kInt:
      if (v.kind() != Value::Kind::kInt) throw bad_type("an integer");
      check_bounds(static_cast<double>(v.as_int()));
      return v;
    case ParamType::kFloat:
      if (!v.is_number()) throw bad_type("a number");
      check_bounds(v.as_double());
      return Value::number(v.as_double(), v.loc);
    case ParamType::kBool:
      if (v.kind() != Value::Kind::kBool) throw bad_type("a boolean");
      return v;
    case ParamType::kString:
      if (!v.is_string()) throw bad_type("a string");
      return v;
    case ParamType::kEnum: {
      if (!v.is_string()) throw bad_type("one of " + join(spec.choices));
      const std::string& s = v.as_string();
      if (std::find(spec.choices.begin(), spec.choices.end(), s) == spec.choices.end()) {
        std::string msg = "unknown value \"" + s + "\" for " + where + "; expected one of " + join(spec.choices);
        const std::string dym = did_you_mean(s, spec.choices);
        if (!dym.empty()) msg += " (did you mean \"" + dym + "\"?)";
        throw ConfigError(v.loc, msg);
      }
      return v;
    }
    case ParamType::kFloatList:
    case ParamType::kIntList: {
      const bool ints = spec.type == ParamType::kIntList;
      if (!v.is_array()) throw bad_type(ints ? "an array of integers" : "an array of numbers");
      Value::Array out;
      for (const Value& e : v.as_array()) {
        if (ints ? e.kind() != Value::Kind::kInt : !e.is_number())
          throw ConfigError(e.loc, where + " must hold only " + (ints ? "integers" : "numbers") + ", found " +
                                       std::string(e.kind_name()) + " " + e.str());
        check_bounds(e.as_double());
        out.push_back(ints ? e : Value::number(e.as_double(), e.loc));
      }
      return Value::array(std::move(out), v.loc);
    }
    case ParamType::kStringList: {
      if (!v.is_array()) throw bad_type("an array of strings");
      for (const Value& e : v.as_array()) {
        if (!e.is_string())
          throw ConfigError(e.loc,
                            where + " must hold only strings, found " + std::string(e.kind_name()) + " " + e.str());
        if (!spec.choices.empty() &&
            std::find(spec.choices.begin(), spec.choices.end(), e.as_string()) == spec.choices.end()) {
          std::string msg =
              "unknown value \"" + e.as_string() + "\" in " + where + "; expected one of " + join(spec.choices);
          const std::string dym = did_you_mean(e.as_string(), spec.choices);
          if (!dym.empty()) msg += " (did you mean \"" + dym + "\"?)";
          throw ConfigError(e.loc, msg);
        }
      }
      return v;
    }
  }
  return v;
}

}  // namespace

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  return best_d <= limit ? best : std::string();
}

Params Params::resolve(const std::vector<ParamSpec>& specs, const Value& given, std::string_view context,
                       const SourceLoc& owner_loc) {
  Params p;
  p.owner_ = owner_loc;
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(s.name);
  if (given.is_table()) {
    for (const auto& [key, v] : given.as_table()) {
      if (key == "type") continue;
      if (std::find(names.begin(), names.end(), key) == names.end()) {
        std::string msg = "unknown key '" + key + "' for " + std::string(context);
        const std::string dym = did_you_mean(key, names);
        if (!dym.empty()) {
          msg += " (did you mean '" + dym + "'?)";
        } else if (!names.empty()) {
          msg += "; it takes " + join(names);
        } else {
          msg += "; it takes no parameters";
        }
        throw ConfigError(v.loc.known() ? v.loc : owner_loc, msg);
      }
    }
  }
  for (const auto& spec : specs) {
    const Value* v = given.is_table() ? given.find(spec.name) : nullptr;
    if (v != nullptr && !v->is_null()) {
      p.values_[spec.name] = check_value(spec, *v, context);
      p.given_[spec.name] = true;
    } else {
      Value d = spec.default_value;
      d.loc = owner_loc;
      p.values_[spec.name] = std::move(d);
      p.given_[spec.name] = false;
    }
  }
  return p;
}

const Value& Params::get(std::string_view name) const {
  const Value* v = values_.find(name);
  if (v == nullptr) throw Error("component asked for undeclared parameter '" + std::string(name) + "'");
  return *v;
}

int64_t Params::integer(std::string_view name) const { return get(name).as_int(); }
double Params::number(std::string_view name) const { return get(name).as_double(); }
bool Params::boolean(std::string_view name) const { return get(name).as_bool(); }
const std::string& Params::string(std::string_view name) const { return get(name).as_string(); }
std::vector<double> Params::numbers(std::string_view name) const {
  std::vector<double> out;
  for (const auto& e : get(name).as_array()) out.push_back(e.as_double());
  return out;
}
std::vector<int64_t> Params::integers(std::string_view name) const {
  std::vector<int64_t> out;
  for (const auto& e : get(name).as_array()) out.push_back(e.as_int());
  return out;
}
std::vector<std::string> Params::strings(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& e : get(name).as_array()) out.push_back(e.as_string());
  return out;
}
bool Params::given(std::string_view name) const {
  auto it = given_.find(name);
  return it != given_.end() && it->second;
}
SourceLoc Params::where(std::string_view name) const {
  const Value& v = get(name);
  return v.loc.known() ? v.loc : owner_;
}
std::string Params::path(std::string_view name) const {
  const std::string& s = string(name);
  std::filesystem::path p(s);
  if (p.is_absolute() || s.empty()) return s;
  const SourceLoc loc = where(name);
  if (!loc.known()) return s;
  return (std::filesystem::path(loc.file).parent_path() / p).lexically_normal().string();
}

}  // namespace bench
