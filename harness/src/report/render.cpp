// render(): any query result in any format, through the Sheet writers.
#include "report/report.h"
#include "report/sheet.h"

namespace bench::report {

std::optional<Format> parse_format(std::string_view name) {
  if (name == "table") return Format::kTable;
  if (name == "csv") return Format::kCsv;
  if (name == "json") return Format::kJson;
  if (name == "markdown") return Format::kMarkdown;
  return std::nullopt;
}

std::string render(const store::QueryResult& r, Format f) {
  Sheet sheet;
  for (size_t c = 0; c < r.columns.size(); ++c) {
    // A column is numeric (right-aligned) when every value in it is a number or NULL.
    bool numeric = false, other = false;
    for (const auto& row : r.rows) {
      if (c >= row.size() || row[c].is_null()) continue;
      (row[c].is_number() ? numeric : other) = true;
    }
    sheet.columns.push_back({r.columns[c], r.columns[c], numeric && !other});
  }
  for (const auto& row : r.rows) {
    std::vector<SheetCell> cells;
    cells.reserve(r.columns.size());
    for (size_t c = 0; c < r.columns.size(); ++c) {
      const Value v = c < row.size() ? row[c] : Value();
      cells.push_back({v, display_text(v)});
    }
    sheet.rows.push_back(std::move(cells));
  }
  switch (f) {
    case Format::kTable:
      return sheet_text(sheet);
    case Format::kCsv:
      return sheet_csv(sheet);
    case Format::kJson:
      return dump_json(sheet_json(sheet));
    case Format::kMarkdown:
      return sheet_markdown(sheet);
  }
  return "";
}

}  // namespace bench::report
