#include "report/sheet.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace bench::report {

namespace {

/// Longest cell of the text table and Markdown, in characters; CSV and JSON carry everything.
constexpr size_t kMaxCellChars = 80;

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

/// Characters (code points) in a UTF-8 string: what a terminal column count needs, near enough.
size_t display_width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return !is_continuation_byte(c); }));
}

/// One line, at most kMaxCellChars characters: a table cell must not break the layout.
std::string one_line(const std::string& s) {
  const bool cut = display_width(s) > kMaxCellChars;
  std::string out;
  size_t chars = 0;
  for (char c : s) {
    if (!is_continuation_byte(c) && chars++ == kMaxCellChars - 3 && cut) return out + "...";
    out += c == '\n' || c == '\r' || c == '\t' ? ' ' : c;
  }
  return out;
}

std::string pad(const std::string& s, size_t width, bool right) {
  const size_t w = display_width(s);
  if (w >= width) return s;
  return right ? std::string(width - w, ' ') + s : s + std::string(width - w, ' ');
}

std::vector<size_t> column_widths(const Sheet& s, const std::vector<std::vector<std::string>>& cells, size_t min) {
  std::vector<size_t> widths(s.columns.size(), min);
  for (size_t c = 0; c < s.columns.size(); ++c) widths[c] = std::max(widths[c], display_width(s.columns[c].header));
  for (const auto& row : cells)
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  return widths;
}

std::vector<std::vector<std::string>> display_cells(const Sheet& s, bool markdown) {
  std::vector<std::vector<std::string>> cells;
  cells.reserve(s.rows.size());
  for (const auto& row : s.rows) {
    std::vector<std::string> line;
    for (const SheetCell& cell : row) {
      std::string t = one_line(cell.text);
      if (markdown) {
        std::string escaped;
        for (char c : t) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
        t = std::move(escaped);
      }
      line.push_back(std::move(t));
    }
    cells.push_back(std::move(line));
  }
  return cells;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

/// Full-precision text of a raw value for CSV: the shortest form that reads back exactly.
std::string csv_text(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      return "";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return fmt::format("{}", v.as_double());
    case Value::Kind::kString:
      return v.as_string();
    default:
      return v.str();
  }
}

}  // namespace

Value number_or_null(const std::optional<double>& v) { return v ? Value::number(*v) : Value(); }

std::string display_text(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      return "-";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat: {
      const double x = v.as_double();
      if (std::isnan(x)) return "nan";
      if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
      std::string s = fmt::format("{:.4g}", x);
      // %g switches to an exponent from 10^4 on; 12345 reads better than 1.235e+04.
      if (s.find('e') != std::string::npos && std::fabs(x) >= 1 && std::fabs(x) < 1e15) s = fmt::format("{:.0f}", x);
      return s;
    }
    case Value::Kind::kString:
      return v.as_string();
    default:
      return v.str();
  }
}

std::string sheet_text(const Sheet& s) {
  if (s.columns.empty()) return "";
  const auto cells = display_cells(s, false);
  const auto widths = column_widths(s, cells, 1);
  std::string out;
  const auto emit = [&](const std::vector<std::string>& line) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      if (c > 0) text += "  ";
      text += pad(line[c], widths[c], s.columns[c].right_aligned);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  std::vector<std::string> header, rule;
  for (size_t c = 0; c < s.columns.size(); ++c) {
    header.push_back(s.columns[c].header);
    rule.emplace_back(widths[c], '-');
  }
  emit(header);
  emit(rule);
  for (const auto& line : cells) emit(line);
  return out;
}

std::string sheet_markdown(const Sheet& s) {
  if (s.columns.empty()) return "";
  const auto cells = display_cells(s, true);
  const auto widths = column_widths(s, cells, 3);
  std::string out;
  const auto emit = [&](const std::vector<std::string>& line) {
    out += "|";
    for (size_t c = 0; c < line.size(); ++c) out += " " + pad(line[c], widths[c], s.columns[c].right_aligned) + " |";
    out += "\n";
  };
  std::vector<std::string> header, rule;
  for (size_t c = 0; c < s.columns.size(); ++c) {
    std::string h = s.columns[c].header;
    for (size_t pos = 0; (pos = h.find('|', pos)) != std::string::npos; pos += 2) h.replace(pos, 1, "\\|");
    header.push_back(h);
    rule.push_back(s.columns[c].right_aligned ? std::string(widths[c] - 1, '-') + ":" : std::string(widths[c], '-'));
  }
  emit(header);
  emit(rule);
  for (const auto& line : cells) emit(line);
  return out;
}

std::string sheet_csv(const Sheet& s) {
  if (s.columns.empty()) return "";
  std::string out;
  for (size_t c = 0; c < s.columns.size(); ++c) out += (c > 0 ? "," : "") + csv_field(s.columns[c].key);
  out += "\r\n";
  for (const auto& row : s.rows) {
    for (size_t c = 0; c < row.size(); ++c) out += (c > 0 ? "," : "") + csv_field(csv_text(row[c].raw));
    out += "\r\n";
  }
  return out;
}

nlohmann::ordered_json json_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      return nullptr;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int();
    case Value::Kind::kFloat: {
      const double x = v.as_double();
      return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr);
    }
    case Value::Kind::kString:
      return v.as_string();
    default:
      return nlohmann::ordered_json::parse(v.json());
  }
}

nlohmann::ordered_json sheet_json(const Sheet& s) {
  auto rows = nlohmann::ordered_json::array();
  for (const auto& row : s.rows) {
    auto object = nlohmann::ordered_json::object();
    for (size_t c = 0; c < row.size(); ++c) object[s.columns[c].key] = json_of(row[c].raw);
    rows.push_back(std::move(object));
  }
  return rows;
}

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace bench::report
