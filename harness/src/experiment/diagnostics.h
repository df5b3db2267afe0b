// defines: bench::ConfigErrors, Diagnostics — the mistakes of one experiment file, gathered in one
// pass
//
// Validation goes on past a mistake wherever the next check does not depend on it, and stops where
// it does (a dependent check would only repeat the mistake in other words). The mistakes are then
// reported in file order: `bench validate` lists each on its own line, as a compiler does; every
// other command reports the first and counts the rest.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "bench/error.h"

namespace bench {

/// Several independent mistakes of a file, in file order. A ConfigError itself: what() is the
/// first one's line, with "(and N more; bench validate lists them)" when there are more.
class ConfigErrors : public ConfigError {
 public:
  /// `all`: at least one, in the order to report them.
  explicit ConfigErrors(std::vector<ConfigError> all);
  const std::vector<ConfigError>& all() const { return all_; }

 private:
  std::vector<ConfigError> all_;
};

/// The mistakes found so far, each once (by place and message).
class Diagnostics {
 public:
  /// Adds `e`, or each mistake of a ConfigErrors.
  void add(const ConfigError& e);
  /// Runs `check`; a ConfigError it throws is added. With `blocking`, such a mistake also marks
  /// the file as one whose later stages would only cascade from it (blocked()). Returns whether
  /// `check` completed.
  template <class F>
  bool check(F&& check, bool blocking = false) {
    try {
      std::forward<F>(check)();
      return true;
    } catch (const ConfigError& e) {
      add(e);
      blocked_ = blocked_ || blocking;
      return false;
    }
  }
  /// Marks the file as blocked: the stages after this one must not run.
  void block() { blocked_ = true; }
  bool blocked() const { return blocked_; }
  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }
  /// Throws ConfigErrors with every mistake so far, in file order (by line and column; mistakes of
  /// the whole file, which have no line, last); does nothing when there is none.
  void throw_if_any() const;

 private:
  std::vector<ConfigError> errors_;
  bool blocked_ = false;
};

}  // namespace bench
