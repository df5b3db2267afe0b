// defines: bench::read_toml — TOML text -> bench::Value with source locations (TOML++)
#pragma once

#include <string>

#include "bench/value.h"

namespace bench {

/// Parse TOML `text` read from `file`. Tables keep their keys in file order; every value's
/// location is its key's (members) or its own (array elements). Syntax errors, invalid UTF-8
/// and date/time values (unsupported) throw ConfigError at file:line:col.
Value read_toml(const std::string& text, const std::string& file);

/// Read a whole file; throws ConfigError naming the file when it cannot be read.
std::string read_text_file(const std::string& file);

}  // namespace bench
