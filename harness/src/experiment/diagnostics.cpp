#include "experiment/diagnostics.h"

#include <algorithm>
#include <string>

namespace bench {

namespace {

std::string first_of(const std::vector<ConfigError>& all) {
  if (all.empty()) return "no mistakes";  // not constructed so (Diagnostics throws only with one)
  if (all.size() == 1) return all.front().message();
  return all.front().message() + " (and " + std::to_string(all.size() - 1) + " more; bench validate lists them)";
}

}  // namespace

ConfigErrors::ConfigErrors(std::vector<ConfigError> all)
    : ConfigError(all.empty() ? SourceLoc{} : all.front().loc(), first_of(all)), all_(std::move(all)) {}

void Diagnostics::add(const ConfigError& e) {
  if (const auto* many = dynamic_cast<const ConfigErrors*>(&e)) {
    for (const ConfigError& one : many->all()) add(one);
    return;
  }
  const bool seen = std::any_of(errors_.begin(), errors_.end(), [&](const ConfigError& x) {
    return x.loc().file == e.loc().file && x.loc().line == e.loc().line && x.loc().column == e.loc().column &&
           x.loc().key == e.loc().key && x.message() == e.message();
  });
  if (!seen) errors_.push_back(e);
}

void Diagnostics::throw_if_any() const {
  if (errors_.empty()) return;
  std::vector<ConfigError> sorted = errors_;
  // File order; a mistake of the whole file (line 0) after those at a line.
  std::stable_sort(sorted.begin(), sorted.end(), [](const ConfigError& a, const ConfigError& b) {
    const auto key = [](const SourceLoc& l) {
      return std::make_pair(l.line == 0 ? 1 : 0, std::make_pair(l.line, l.column));
    };
    return key(a.loc()) < key(b.loc());
  });
  throw ConfigErrors(std::move(sorted));
}

}  // namespace bench
