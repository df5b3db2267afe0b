// defines: bench::store::sqlite — a thin RAII layer over the SQLite C API: Statement, exec,
// BusyError. Private to the store; everything else goes through store/store.h.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "bench/error.h"
#include "bench/value.h"

namespace bench::store::sqlite {

/// SQLITE_BUSY after the busy timeout: another connection holds the write lock. The store
/// retries whole transactions on it.
class BusyError : public Error {
 public:
  using Error::Error;
};

/// Throws BusyError or Error with "`what`: <SQLite's message>".
[[noreturn]] void fail(sqlite3* db, int rc, std::string_view what);

/// One prepared statement. Parameters are 1-based, as in SQLite. Move-only.
class Statement {
 public:
  /// Prepares exactly the first statement of `sql`; throws Error naming `sql` on failure.
  Statement(sqlite3* db, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind_null(int index);
  Statement& bind(int index, int64_t v);
  /// NaN is stored as NULL by SQLite itself; callers that must not lose a value check first.
  Statement& bind(int index, double v);
  Statement& bind(int index, std::string_view v);
  Statement& bind(int index, const char* v) { return bind(index, std::string_view(v)); }
  /// NULL when empty.
  Statement& bind(int index, std::optional<int64_t> v);
  Statement& bind(int index, std::optional<double> v);
  /// null, boolean (0/1), integer, float, string; arrays and tables as their JSON text.
  Statement& bind(int index, const Value& v);

  /// Advances one row: true when a row is ready, false when the statement is done.
  bool step();
  /// Steps to completion, then resets (bindings stay) so the statement can run again.
  void run();
  void reset();

  int parameter_count() const;
  int column_count() const;
  std::string column_name(int column) const;
  /// The current row's value: null, integer, float or string (blobs as X'hex' text).
  Value column_value(int column) const;
  int64_t column_int64(int column) const;
  bool column_is_null(int column) const;
  std::string column_text(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// Runs one or more statements without parameters (schema, pragmas, BEGIN/COMMIT).
void exec(sqlite3* db, const std::string& sql);

/// The single integer a pragma or a scalar query returns.
int64_t scalar_int(sqlite3* db, const std::string& sql);

}  // namespace bench::store::sqlite
