// defines: test::error_of, test::config_error_of — what a piece of code throws, for tests that
// check messages and places
#pragma once

#include <optional>
#include <string>

#include "bench/error.h"

namespace bench::test {

/// The message (what()) of the bench::Error that `f` throws, or "" when it throws none. Any other
/// exception passes through and fails the test.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// The bench::ConfigError that `f` throws (its place and message), or nullopt when it throws none.
template <class F>
std::optional<ConfigError> config_error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e;
  }
  return std::nullopt;
}

}  // namespace bench::test
