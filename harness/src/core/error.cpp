#include "bench/error.h"

namespace bench {

std::string SourceLoc::str() const {
  std::string s = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (column > 0) s += ":" + std::to_string(column);
  } else if (!key.empty()) {
    s += " (" + key + ")";
  }
  return s;
}

Error::Error(const std::string& message) : std::runtime_error(message), message_(message) {}

Error::Error(SourceLoc loc, const std::string& message)
    : std::runtime_error(loc.known() ? loc.str() + ": " + message : message), loc_(std::move(loc)), message_(message) {}

}  // namespace bench
