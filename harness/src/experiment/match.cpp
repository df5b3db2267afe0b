#include "experiment/match.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "experiment/messages.h"
#include "model/model.h"
#include "plugins/registry.h"

namespace bench {

namespace {

// Widths a params match may solve, by their short names; any "model...." key path is taken as it is.
const std::map<std::string, std::string, std::less<>>& width_paths() {
  static const std::map<std::string, std::string, std::less<>> paths = {
      {"d_ff", "model.ffn.d_ff"},        {"d_model", "model.d_model"},       {"n_layers", "model.n_layers"},
      {"n_heads", "model.n_heads"},      {"n_kv_heads", "model.n_kv_heads"}, {"d_head", "model.d_head"},
      {"vocab_size", "model.vocab_size"}};
  return paths;
}

// Past the first candidate that fails its checks (d_model not divisible by n_heads ...), how many
// more multiples are tried before a width is declared impossible.
constexpr int64_t kValidSearch = 256;
// The largest multiple tried while looking for a width above the target.
constexpr int64_t kMaxMultiple = int64_t{1} << 30;

std::string percent(double gap) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", 100 * gap);
  return buf;
}

std::string in_quotes(const std::string& s) { return "\"" + s + "\""; }

const Value* string_key(const Value& root, const char* key) {
  const Value* v = root.find(key);
  if (v != nullptr && !v->is_string())
    throw ConfigError(v->loc, std::string(key) + " must be a string, found " + std::string(v->kind_name()));
  return v;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    parts.push_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(path.substr(start));
  return parts;
}

// Sets the key path of a case's configuration (tables made as needed), the value placed at `loc`
// so that a check failing on it points at the match key that chose it.
void set_path(Value& config, const std::vector<std::string>& path, int64_t value, const SourceLoc& loc) {
  Value* v = &config;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    Value& next = (*v)[path[i]];
    if (next.is_null()) next = Value::table({}, loc);
    v = &next;
  }
  (*v)[path.back()] = Value::integer(value, loc);
}

// Two cases correspond when every axis both have takes the same value.
bool axes_agree(const Value& a, const Value& b) {
  for (const auto& [k, v] : a.as_table())
    if (const Value* w = b.find(k); w != nullptr && w->json() != v.json()) return false;
  return true;
}

struct Solver {
  const MatchSpec& spec;
  const Registry& registry;
  const RunnerSections& runners;

  // The budget of `c`, or nullopt when the case fails its checks (a candidate that cannot be built).
  std::optional<Budget> try_measure(const Case& c) const {
    try {
      const ResolvedCase rc = resolve_case(c, registry, runners);
      return measure_budget(rc, registry);
    } catch (const ConfigError&) {
      return std::nullopt;
    }
  }

  // The key path the match solves in case `c`: a model key, or the runner's steps.
  std::string width_path(const Case& c) const { return spec.width == "steps" ? c.runner + ".steps" : spec.width; }

  Budget measure(const Case& c) const { return measure_budget(resolve_case(c, registry, runners), registry); }

  double achieved(const Budget& b) const {
    return spec.budget == "params" ? static_cast<double>(b.params_non_embedding) : b.train_flops_total;
  }

  std::string what() const { return spec.budget == "params" ? "non-embedding parameters" : "training FLOPs"; }

  [[noreturn]] void fail(const SourceLoc& at, const Case& c, const std::string& why) const {
    throw ConfigError(at, "match = " + in_quotes(spec.budget) + ": variant '" + c.variant + "' (case " +
                              std::to_string(c.ordinal) + ", " + c.runner + " " + c.label + ") " + why);
  }

  // Solves the width of `c` (a multiple of spec.multiple) whose budget is closest to `target`;
  // rewrites c.config and returns the achieved budget.
  Budget solve(Case& c, double target) const {
    const std::vector<std::string> path = split_path(width_path(c));
    std::map<int64_t, std::optional<Budget>> seen;
    const auto at = [&](int64_t k) -> const std::optional<Budget>& {
      auto it = seen.find(k);
      if (it == seen.end()) {
        Case trial = c;
        set_path(trial.config, path, k * spec.multiple, spec.width_at);
        it = seen.emplace(k, try_measure(trial)).first;
      }
      return it->second;
    };
    // The first multiple from k on that passes its checks, or 0.
    const auto valid_from = [&](int64_t k) -> int64_t {
      for (int64_t j = k; j < k + kValidSearch; ++j)
        if (at(j)) return j;
      return 0;
    };
    const auto value = [&](int64_t k) { return achieved(*at(k)); };

    int64_t lo = 0;  // 0, or a valid multiple whose budget is below the target
    int64_t hi = valid_from(1);
    if (hi == 0)
      fail(spec.width_at, c,
           "has no " + spec.width_name + " that passes its checks among the first " + std::to_string(kValidSearch) +
               " multiples of " + std::to_string(spec.multiple));
    while (value(hi) < target) {
      lo = hi;
      if (hi > kMaxMultiple / 2) fail(spec.width_at, c, "cannot reach the target with any " + spec.width_name);
      const int64_t next = valid_from(2 * hi);
      if (next == 0) break;
      hi = next;
    }
    if (value(hi) >= target) {
      // Bisect on the valid multiples: lo below the target (or none), hi at or above it.
      int64_t a = lo, b = hi;
      while (b - a > 1) {
        const int64_t mid = a + (b - a) / 2;
        const int64_t v = valid_from(mid);
        if (v == 0 || v >= b) {
          b = mid;  // no valid multiple in [mid, b): the answer's neighbours are a and b
          continue;
        }
        if (value(v) < target) {
          a = v;
          lo = v;
        } else {
          b = v;
          hi = v;
        }
      }
    }
    int64_t best = hi;
    if (lo != 0 && std::fabs(value(lo) - target) <= std::fabs(value(hi) - target)) best = lo;
    set_path(c.config, path, best * spec.multiple, spec.width_at);
    Budget b = *at(best);
    b.match = spec.budget;
    b.match_target = target;
    b.match_gap = (achieved(b) - target) / target;
    if (std::fabs(b.match_gap) > spec.tolerance)
      fail(spec.tolerance_at, c,
           "cannot come within " + percent(spec.tolerance).substr(1) + " of the reference's " + thousands(target) +
               " " + what() + ": the closest, " + spec.width_name + " = " + std::to_string(best * spec.multiple) +
               ", gives " + thousands(achieved(b)) + " (" + percent(b.match_gap) + ")" +
               (spec.tolerance_given ? "" : "; match_tolerance (default 0.05) accepts a larger gap"));
    return b;
  }
};

}  // namespace

std::optional<MatchSpec> read_match(const Value& root) {
  const Value* match = string_key(root, "match");
  static const char* const keys[] = {"match_reference", "match_width", "match_by", "match_multiple", "match_tolerance"};
  if (match == nullptr) {
    for (const char* key : keys)
      if (const Value* v = root.find(key))
        throw ConfigError(v->loc, std::string(key) + " needs match = \"params\" or \"flops\"");
    return std::nullopt;
  }
  MatchSpec s;
  s.budget = match->as_string();
  s.at = s.width_at = s.tolerance_at = match->loc;
  if (s.budget != "params" && s.budget != "flops")
    throw ConfigError(match->loc, "match must be \"params\" or \"flops\", found " + in_quotes(s.budget));
  if (const Value* v = string_key(root, "match_reference")) {
    s.reference = v->as_string();
    if (s.reference.empty()) throw ConfigError(v->loc, "match_reference must name a variant");
  }
  const Value* width = string_key(root, "match_width");
  const Value* by = string_key(root, "match_by");
  if (s.budget == "params") {
    if (by != nullptr) throw ConfigError(by->loc, "match_by is for match = \"flops\"; with \"params\" use match_width");
    s.width_name = width ? width->as_string() : "d_ff";
    if (width != nullptr) s.width_at = width->loc;
    if (const auto it = width_paths().find(s.width_name); it != width_paths().end()) {
      s.width = it->second;
    } else if (s.width_name.rfind("model.", 0) == 0 && s.width_name.size() > 6) {
      s.width = s.width_name;
    } else {
      std::vector<std::string> names;
      for (const auto& [k, p] : width_paths()) names.push_back(k);
      throw ConfigError(width->loc, "match_width must be one of " + join_names(names) +
                                        " or a key path under model (\"model.ffn.d_ff\"), found " +
                                        in_quotes(s.width_name));
    }
  } else {
    if (width != nullptr)
      throw ConfigError(width->loc, "match_width is for match = \"params\"; with \"flops\" use match_by");
    s.width_name = by ? by->as_string() : "steps";
    if (by != nullptr) s.width_at = by->loc;
    if (s.width_name != "steps" && s.width_name != "batch_size")
      throw ConfigError(by->loc, "match_by must be \"steps\" or \"batch_size\", found " + in_quotes(s.width_name));
    s.width = s.width_name == "steps" ? "steps" : "model.batch_size";
  }
  if (const Value* v = root.find("match_multiple")) {
    if (v->kind() != Value::Kind::kInt || v->as_int() < 1)
      throw ConfigError(v->loc, "match_multiple must be a positive integer, found " + v->str());
    s.multiple = v->as_int();
  }
  if (const Value* v = root.find("match_tolerance")) {
    const double t = v->is_number() ? v->as_double() : -1;
    if (!(t >= 0)) throw ConfigError(v->loc, "match_tolerance must be a number >= 0, found " + v->str());
    s.tolerance = t;
    s.tolerance_at = v->loc;
    s.tolerance_given = true;
  }
  return s;
}

Budget measure_budget(const ResolvedCase& rc, const Registry& registry) {
  const Model m(rc.model, registry, Model::Validating{});
  return measure_budget(rc, m);
}

Budget measure_budget(const ResolvedCase& rc, const Model& m) {
  Budget b;
  const ModelDims& d = rc.model.dims;
  b.params_total = m.n_params();
  b.params_non_embedding = m.n_params() - m.n_params_embedding();
  const Cost cost = m.cost();
  b.flops_per_token = (cost.flops_forward + cost.flops_backward) / static_cast<double>(d.tokens());
  if (const Value* steps = rc.runner.values().find("steps"); steps != nullptr && steps->kind() == Value::Kind::kInt)
    b.train_tokens = steps->as_int() * d.tokens();
  b.train_flops_total = b.flops_per_token * static_cast<double>(b.train_tokens);
  for (const auto& [layer, c] : m.components(Slot::kFfn))
    if (layer == 0) b.d_ff = c->accounting().ffn_hidden;
  return b;
}

std::vector<Budget> match_budgets(const ExperimentFile& file, std::vector<Case>& cases, const Registry& registry) {
  std::vector<Budget> out(cases.size());
  const std::optional<MatchSpec> spec = read_match(file.root);
  if (!spec) return out;
  std::vector<std::string> variants;
  for (const Case& c : cases)
    if (std::find(variants.begin(), variants.end(), c.variant) == variants.end()) variants.push_back(c.variant);
  if (variants.size() < 2 || variants.front().empty())
    throw ConfigError(spec->at, "match needs two or more [[variant]]s: one to match and a reference");
  std::string reference = spec->reference.empty() ? variants.front() : spec->reference;
  if (std::find(variants.begin(), variants.end(), reference) == variants.end())
    throw ConfigError(file.root.find("match_reference")->loc,
                      "match_reference names no variant: '" + reference + "'; variants: " + join_names(variants));

  const Solver solver{*spec, registry, file.runners};
  // The reference's cases keep their configuration; their budgets are the targets.
  const auto trains = [&](const Case& c) {
    const RunnerSection* r = schema::find_runner(file.runners, c.runner);
    return r != nullptr &&
           std::any_of(r->params.begin(), r->params.end(), [](const ParamSpec& p) { return p.name == "steps"; });
  };
  std::map<size_t, double> targets;
  for (size_t i = 0; i < cases.size(); ++i) {
    // A FLOP budget is a training budget: cases of runners that do not train are left as they are.
    if (cases[i].variant != reference || (spec->budget == "flops" && !trains(cases[i]))) continue;
    const Budget b = solver.measure(cases[i]);
    targets[i] = solver.achieved(b);
    out[i].match = spec->budget;
    out[i].match_target = targets[i];
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    Case& c = cases[i];
    if (c.variant == reference || (spec->budget == "flops" && !trains(c))) continue;
    if (c.axes.find(solver.width_path(c)) != nullptr)
      solver.fail(spec->width_at, c, "sweeps " + spec->width_name + ", which the match solves; sweep another key");
    // The reference's case of the same runner (for params, of any runner) whose axes agree.
    std::optional<size_t> ref;
    for (int pass = 0; pass < 2 && !ref; ++pass)
      for (const auto& [j, t] : targets)
        if ((pass == 1 ? spec->budget == "params" : cases[j].runner == c.runner) && axes_agree(cases[j].axes, c.axes)) {
          ref = j;
          break;
        }
    if (!ref) solver.fail(spec->at, c, "has no case of the reference '" + reference + "' with the same sweep values");
    out[i] = solver.solve(c, targets[*ref]);
  }
  return out;
}

std::string thousands(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.0f", std::fabs(v));
  std::string digits = buf, out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

}  // namespace bench
