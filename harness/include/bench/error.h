// defines: bench::SourceLoc, bench::Error, bench::ConfigError
#pragma once

#include <stdexcept>
#include <string>

namespace bench {

/// Where a configuration value came from: an experiment file and a 1-based line and column.
/// A location with line 0 names only the file (and `key`, when set).
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key;  ///< dotted key path, for values that have no position of their own

  /// "file:line:col" or "file" (with " (key)" appended when only the key is known).
  std::string str() const;
  bool known() const { return !file.empty(); }
};

/// The harness's error type: a message, and where in the input it applies, if anywhere.
/// what() is the one-line form "file:line:col: message".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  Error(SourceLoc loc, const std::string& message);
  const SourceLoc& loc() const { return loc_; }
  const std::string& message() const { return message_; }

 private:
  SourceLoc loc_;
  std::string message_;
};

/// An invalid experiment or component configuration (exit status 2).
class ConfigError : public Error {
 public:
  using Error::Error;
};

}  // namespace bench
