// defines: bench::report::Sheet — a table of cells that keep both their raw value (for CSV and
// JSON) and their display text (for the text table and Markdown), and its four writers.
// Private to report/.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/value.h"

namespace bench::report {

/// A column: `key` names it in CSV and JSON, `header` in the text table and Markdown.
struct SheetColumn {
  std::string key;
  std::string header;
  bool right_aligned = false;
};

/// One cell: the stored value and how a person should read it.
struct SheetCell {
  Value raw;
  std::string text;
};

struct Sheet {
  std::vector<SheetColumn> columns;
  std::vector<std::vector<SheetCell>> rows;
};

/// A cell's value from a number that may be absent: the number, or NULL.
Value number_or_null(const std::optional<double>& v);

/// Display text of a value in the generic format: NULL "-", integers as they are, floats with 4
/// significant digits (whole numbers from 10^4 up without an exponent), strings as they are.
std::string display_text(const Value& v);

/// Aligned columns, two spaces apart, a rule of '-' under the headers.
std::string sheet_text(const Sheet& s);
/// A GitHub-flavoured pipe table; numeric columns right-aligned.
std::string sheet_markdown(const Sheet& s);
/// RFC 4180 with a header row of keys, CRLF line ends.
std::string sheet_csv(const Sheet& s);
/// An array of objects, key -> raw value.
nlohmann::ordered_json sheet_json(const Sheet& s);

/// JSON of a raw value: null, number (non-finite as null), string.
nlohmann::ordered_json json_of(const Value& v);
/// Serialises JSON for output: two-space indent, invalid UTF-8 replaced, a final newline.
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace bench::report
