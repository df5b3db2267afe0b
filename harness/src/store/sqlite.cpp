#include "store/sqlite.h"

#include <fmt/format.h>

namespace bench::store::sqlite {

namespace {

/// At most this much of a statement's text goes into an error message.
constexpr size_t kMaxSqlInMessage = 60;

/// The statement on one line, whitespace runs collapsed, cut at kMaxSqlInMessage characters.
std::string abbreviate(std::string_view sql) {
  std::string s;
  for (char c : sql) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && (s.empty() || s.back() == ' ')) continue;
    s += space ? ' ' : c;
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (s.size() > kMaxSqlInMessage) s = s.substr(0, kMaxSqlInMessage) + "...";
  return s;
}

}  // namespace

void fail(sqlite3* db, int rc, std::string_view what) {
  const std::string message = fmt::format("{}: {}", what, db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  if ((rc & 0xff) == SQLITE_BUSY) throw BusyError(message);
  throw Error(message);
}

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) fail(db, rc, fmt::format("cannot prepare `{}`", abbreviate(sql)));
  if (stmt_ == nullptr) throw Error(fmt::format("no SQL statement in `{}`", abbreviate(sql)));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }

namespace {
void check_bind(sqlite3* db, int rc, int index) {
  if (rc != SQLITE_OK) fail(db, rc, fmt::format("cannot bind parameter {}", index));
}
}  // namespace

Statement& Statement::bind_null(int index) {
  check_bind(db_, sqlite3_bind_null(stmt_, index), index);
  return *this;
}
Statement& Statement::bind(int index, int64_t v) {
  check_bind(db_, sqlite3_bind_int64(stmt_, index, v), index);
  return *this;
}
Statement& Statement::bind(int index, double v) {
  check_bind(db_, sqlite3_bind_double(stmt_, index, v), index);
  return *this;
}
Statement& Statement::bind(int index, std::string_view v) {
  check_bind(db_, sqlite3_bind_text64(stmt_, index, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8), index);
  return *this;
}
Statement& Statement::bind(int index, std::optional<int64_t> v) { return v ? bind(index, *v) : bind_null(index); }
Statement& Statement::bind(int index, std::optional<double> v) { return v ? bind(index, *v) : bind_null(index); }

Statement& Statement::bind(int index, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      return bind_null(index);
    case Value::Kind::kBool:
      return bind(index, int64_t{v.as_bool() ? 1 : 0});
    case Value::Kind::kInt:
      return bind(index, v.as_int());
    case Value::Kind::kFloat:
      return bind(index, v.as_double());
    case Value::Kind::kString:
      return bind(index, std::string_view(v.as_string()));
    case Value::Kind::kArray:
    case Value::Kind::kTable:
      return bind(index, std::string_view(v.json()));
  }
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const std::string message = fmt::format("`{}` failed: {}", abbreviate(sqlite3_sql(stmt_)), sqlite3_errmsg(db_));
  // Reset now, so the connection is free for the ROLLBACK and the retry that may follow.
  sqlite3_reset(stmt_);
  if ((rc & 0xff) == SQLITE_BUSY) throw BusyError(message);
  throw Error(message);
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() { sqlite3_reset(stmt_); }

int Statement::parameter_count() const { return sqlite3_bind_parameter_count(stmt_); }
int Statement::column_count() const { return sqlite3_column_count(stmt_); }
std::string Statement::column_name(int column) const {
  const char* name = sqlite3_column_name(stmt_, column);
  return name != nullptr ? name : "";
}

Value Statement::column_value(int column) const {
  switch (sqlite3_column_type(stmt_, column)) {
    case SQLITE_INTEGER:
      return Value::integer(sqlite3_column_int64(stmt_, column));
    case SQLITE_FLOAT:
      return Value::number(sqlite3_column_double(stmt_, column));
    case SQLITE_TEXT:
      return Value::string(column_text(column));
    case SQLITE_BLOB: {
      const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(stmt_, column));
      const int n = sqlite3_column_bytes(stmt_, column);
      std::string s = "X'";
      for (int i = 0; i < n; ++i) s += fmt::format("{:02X}", p[i]);
      return Value::string(s + "'");
    }
    default:
      return Value();
  }
}

int64_t Statement::column_int64(int column) const { return sqlite3_column_int64(stmt_, column); }
bool Statement::column_is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
std::string Statement::column_text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  return p != nullptr ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, column))) : std::string();
}

void exec(sqlite3* db, const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return;
  const std::string text = message != nullptr ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  const std::string full = fmt::format("`{}` failed: {}", abbreviate(sql), text);
  if ((rc & 0xff) == SQLITE_BUSY) throw BusyError(full);
  throw Error(full);
}

int64_t scalar_int(sqlite3* db, const std::string& sql) {
  Statement s(db, sql);
  if (!s.step()) throw Error(fmt::format("`{}` returned no row", abbreviate(sql)));
  return s.column_int64(0);
}

}  // namespace bench::store::sqlite
