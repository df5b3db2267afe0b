#include "bench/value.h"

#include <cmath>
#include <cstdio>

namespace bench {

namespace {

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == std::floor(d) && std::abs(d) < 1e15) {  // integral: 10000.0, not 1e+04
    char ibuf[32];
    std::snprintf(ibuf, sizeof ibuf, "%.1f", d);
    return ibuf;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  // Shortest text that reads back to the same double.
  for (int prec = 1; prec <= 17; ++prec) {
    char tmp[32];
    std::snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    if (std::strtod(tmp, nullptr) == d) {
      std::string s = tmp;
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";
      return s;
    }
  }
  return buf;
}

void json_escape(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}
}  // namespace

Value Value::boolean(bool v, SourceLoc loc) {
  Value x;
  x.v_ = v;
  x.loc = std::move(loc);
  return x;
}
Value Value::integer(int64_t v, SourceLoc loc) {
  Value x;
  x.v_ = v;
  x.loc = std::move(loc);
  return x;
}
Value Value::number(double v, SourceLoc loc) {
  Value x;
  x.v_ = v;
  x.loc = std::move(loc);
  return x;
}
Value Value::string(std::string v, SourceLoc loc) {
  Value x;
  x.v_ = std::move(v);
  x.loc = std::move(loc);
  return x;
}
Value Value::array(Array v, SourceLoc loc) {
  Value x;
  x.v_ = std::move(v);
  x.loc = std::move(loc);
  return x;
}
Value Value::table(Table v, SourceLoc loc) {
  Value x;
  x.v_ = std::move(v);
  x.loc = std::move(loc);
  return x;
}

Value::Kind Value::kind() const { return static_cast<Kind>(v_.index()); }

bool Value::as_bool() const {
  if (auto* p = std::get_if<bool>(&v_)) return *p;
  throw Error(loc, "expected a boolean, found " + std::string(kind_name()));
}
int64_t Value::as_int() const {
  if (auto* p = std::get_if<int64_t>(&v_)) return *p;
  throw Error(loc, "expected an integer, found " + std::string(kind_name()));
}
double Value::as_double() const {
  if (auto* p = std::get_if<double>(&v_)) return *p;
  if (auto* p = std::get_if<int64_t>(&v_)) return static_cast<double>(*p);
  throw Error(loc, "expected a number, found " + std::string(kind_name()));
}
const std::string& Value::as_string() const {
  if (auto* p = std::get_if<std::string>(&v_)) return *p;
  throw Error(loc, "expected a string, found " + std::string(kind_name()));
}
const Value::Array& Value::as_array() const {
  if (auto* p = std::get_if<Array>(&v_)) return *p;
  throw Error(loc, "expected an array, found " + std::string(kind_name()));
}
Value::Array& Value::as_array() {
  if (auto* p = std::get_if<Array>(&v_)) return *p;
  throw Error(loc, "expected an array, found " + std::string(kind_name()));
}
const Value::Table& Value::as_table() const {
  if (auto* p = std::get_if<Table>(&v_)) return *p;
  throw Error(loc, "expected a table, found " + std::string(kind_name()));
}
Value::Table& Value::as_table() {
  if (auto* p = std::get_if<Table>(&v_)) return *p;
  throw Error(loc, "expected a table, found " + std::string(kind_name()));
}

const Value* Value::find(std::string_view key) const {
  if (!is_table()) return nullptr;
  for (const auto& [k, v] : as_table())
    if (k == key) return &v;
  return nullptr;
}
Value* Value::find(std::string_view key) {
  if (!is_table()) return nullptr;
  for (auto& [k, v] : as_table())
    if (k == key) return &v;
  return nullptr;
}
Value& Value::operator[](std::string_view key) {
  if (is_null()) v_ = Table{};
  if (Value* v = find(key)) return *v;
  auto& t = as_table();
  t.emplace_back(std::string(key), Value{});
  return t.back().second;
}
void Value::erase(std::string_view key) {
  if (!is_table()) return;
  auto& t = as_table();
  for (auto it = t.begin(); it != t.end(); ++it)
    if (it->first == key) {
      t.erase(it);
      return;
    }
}

std::string_view Value::kind_name() const {
  switch (kind()) {
    case Kind::kNull:
      return "nothing";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kArray:
      return "array";
    case Kind::kTable:
      return "table";
  }
  return "unknown";
}

std::string Value::str() const {
  switch (kind()) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return as_bool() ? "true" : "false";
    case Kind::kInt:
      return std::to_string(as_int());
    case Kind::kFloat:
      return format_double(std::get<double>(v_));
    case Kind::kString: {
      std::string s;
      json_escape(s, as_string());
      return s;
    }
    case Kind::kArray: {
      std::string s = "[";
      bool first = true;
      for (const auto& e : as_array()) {
        if (!first) s += ", ";
        first = false;
        s += e.str();
      }
      return s + "]";
    }
    case Kind::kTable: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, e] : as_table()) {
        if (!first) s += ", ";
        first = false;
        s += k + " = " + e.str();
      }
      return s + "}";
    }
  }
  return "";
}

std::string Value::json() const {
  switch (kind()) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kString:
      return str();
    case Kind::kFloat: {
      const double d = std::get<double>(v_);
      return std::isfinite(d) ? format_double(d) : "null";
    }
    case Kind::kArray: {
      std::string s = "[";
      bool first = true;
      for (const auto& e : as_array()) {
        if (!first) s += ",";
        first = false;
        s += e.json();
      }
      return s + "]";
    }
    case Kind::kTable: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, e] : as_table()) {
        if (!first) s += ",";
        first = false;
        json_escape(s, k);
        s += ":" + e.json();
      }
      return s + "}";
    }
  }
  return "null";
}

}  // namespace bench
