// defines: bench::Value — a configuration value (TOML-shaped) that remembers where it was written
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "bench/error.h"

namespace bench {

/// A boolean, integer, float, string, array or table, with the source location it was read
/// from. Tables keep their keys in file order.
class Value {
 public:
  enum class Kind : uint8_t { kNull, kBool, kInt, kFloat, kString, kArray, kTable };
  using Array = std::vector<Value>;
  using Table = std::vector<std::pair<std::string, Value>>;

  Value() = default;
  static Value boolean(bool v, SourceLoc loc = {});
  static Value integer(int64_t v, SourceLoc loc = {});
  static Value number(double v, SourceLoc loc = {});
  static Value string(std::string v, SourceLoc loc = {});
  static Value array(Array v, SourceLoc loc = {});
  static Value table(Table v = {}, SourceLoc loc = {});

  Kind kind() const;
  bool is_null() const { return kind() == Kind::kNull; }
  bool is_table() const { return kind() == Kind::kTable; }
  bool is_array() const { return kind() == Kind::kArray; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_number() const { return kind() == Kind::kInt || kind() == Kind::kFloat; }

  bool as_bool() const;
  int64_t as_int() const;
  /// Integers convert to double.
  double as_double() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Table& as_table() const;
  Table& as_table();

  /// Table member or nullptr.
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  /// Table member, inserted as null when absent.
  Value& operator[](std::string_view key);
  /// Remove a table member if present.
  void erase(std::string_view key);

  /// Human-readable kind: "integer", "float", "string", "boolean", "array", "table".
  std::string_view kind_name() const;
  /// Compact TOML-like text of the value: 3, 0.001, "pre", [1, 2], {a = 1}.
  std::string str() const;
  /// JSON text of the value (for storage).
  std::string json() const;

  SourceLoc loc;

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, Array, Table> v_;
};

}  // namespace bench
