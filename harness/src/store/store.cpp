#include "store/store.h"

#include <fmt/format.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench/error.h"
#include "bench/sha256.h"
#include "store/schema.h"
#include "store/sqlite.h"
#include "store/write_transaction.h"

namespace bench::store {

namespace fs = std::filesystem;

namespace {

constexpr int kBusyTimeoutMs = 10'000;
constexpr std::string_view kMemoryPath = ":memory:";

/// Every SQLite 3 database file starts with these 16 bytes (https://sqlite.org/fileformat.html).
/// The database header at the start of page 1.
constexpr size_t kSqliteHeaderBytes = 100;
constexpr std::array<char, 16> kSqliteMagic = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f',
                                               'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};

uint32_t big_endian(const std::array<unsigned char, kSqliteHeaderBytes>& h, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | h[at + i];
  return v;
}

/// Refuses a SQLite file whose header is cut short, names an impossible page size, or declares
/// more pages than the file holds (a truncated copy): SQLite itself would fail only when a query
/// reaches a missing page, with a message that names no file. The declared size is trusted only
/// when valid (change counter = version-valid-for, https://sqlite.org/fileformat.html#in_header_database_size)
/// and when no write-ahead log exists: a checkpoint in progress may have written the header before
/// the pages that grow the file.
void check_header_is_whole(const std::string& path, uintmax_t size) {
  if (size < kSqliteHeaderBytes)
    throw Error(
        fmt::format("{} is a corrupt SQLite database: {} bytes, shorter than its {}-byte header; refusing "
                    "to use it",
                    path, size, kSqliteHeaderBytes));
  std::array<unsigned char, kSqliteHeaderBytes> h{};
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(h.data()), h.size());
  if (in.gcount() != static_cast<std::streamsize>(h.size())) throw Error(fmt::format("cannot read {}", path));
  const uint32_t raw_page = big_endian(h, 16, 2);
  const uint64_t page = raw_page == 1 ? 65536 : raw_page;
  if (page < 512 || page > 65536 || (page & (page - 1)) != 0)
    throw Error(fmt::format("{} is a corrupt SQLite database: its header gives page size {}; refusing to use it", path,
                            raw_page));
  const uint32_t pages = big_endian(h, 28, 4);
  std::error_code ec;
  const bool declared_valid = pages > 0 && big_endian(h, 24, 4) == big_endian(h, 92, 4);
  if (declared_valid && !fs::exists(path + "-wal", ec) && size < pages * page)
    throw Error(
        fmt::format("{} is a corrupt SQLite database: {} bytes, but its header declares {} pages of {} bytes "
                    "(truncated?); refusing to use it",
                    path, size, pages, page));
}

/// Refuses, before SQLite sees it, a path that is a directory or a non-empty file without the
/// SQLite header: SQLite would report "file is not a database" only at the first read, and in
/// read-write mode we must not get as far as writing anything.
void check_is_sqlite_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(fmt::format("{} is a directory, not a results database", path));
  const auto size = fs::file_size(path, ec);
  if (ec) throw Error(fmt::format("cannot read {}: {}", path, ec.message()));
  if (size == 0) return;  // SQLite treats an empty file as an empty database
  std::ifstream in(path, std::ios::binary);
  std::array<char, 16> header{};
  if (!in) throw Error(fmt::format("cannot read {}", path));
  in.read(header.data(), header.size());
  if (in.gcount() != static_cast<std::streamsize>(header.size()) || header != kSqliteMagic)
    throw Error(fmt::format("{} is not a SQLite database; refusing to use it as the results database", path));
  check_header_is_whole(path, size);
}

/// This machine's host name, as `bench run` records it in runs.hostname.
std::string this_hostname() {
  std::array<char, 256> buf{};
  gethostname(buf.data(), buf.size() - 1);
  return buf.data();
}

/// Whether `pid` is a live (not zombie) process named `bench`. Without /proc only liveness is
/// known, and a live process is given the benefit of the doubt.
bool is_live_bench_process(int64_t pid) {
  if (pid <= 0) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) return true;
  // "pid (comm) S ...": the name may hold spaces and parentheses; the state follows the last ')'.
  const size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= line.size()) return true;
  const char state = line[close + 2];
  return state != 'Z' && state != 'X' && line.substr(open + 1, close - open - 1) == "bench";
}

/// SQLite authorizer of read-only connections: everything but ATTACH and DETACH.
extern "C" int deny_attach(void* /*unused*/, int action, const char* /*a*/, const char* /*b*/, const char* /*c*/,
                           const char* /*d*/) {
  return action == SQLITE_ATTACH || action == SQLITE_DETACH ? SQLITE_DENY : SQLITE_OK;
}

}  // namespace

std::string now_utc() {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const int64_t ms = duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

void Store::Closer::operator()(sqlite3* db) const { sqlite3_close_v2(db); }

Store::Store(const std::string& path, Mode mode) : path_(path) {
  if (mode == Mode::kReadOnly)
    open_read_only();
  else
    open_read_write();
}

Store::~Store() = default;

const std::string& Store::path() const { return path_; }

void Store::open_read_write() {
  if (path_ != kMemoryPath) {
    std::error_code ec;
    if (fs::exists(path_, ec)) {
      check_is_sqlite_file(path_);
    } else {
      const fs::path parent = fs::path(path_).parent_path();
      if (!parent.empty() && !fs::create_directories(parent, ec) && ec)
        throw Error(
            fmt::format("cannot create directory {} for the results database: {}", parent.string(), ec.message()));
    }
  }
  sqlite3* raw = nullptr;
  // URIs on, for `bench merge` to attach its sources read-only; a path that would read as a URI
  // ("file:...") is opened as the relative path it is.
  const std::string open_path = path_.rfind("file:", 0) == 0 ? "./" + path_ : path_;
  const int rc =
      sqlite3_open_v2(open_path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, nullptr);
  db_.reset(raw);  // SQLite hands out a handle even on failure, and it must be closed
  if (rc != SQLITE_OK)
    throw Error(fmt::format("cannot open results database {}: {}", path_, raw ? sqlite3_errmsg(raw) : "out of memory"));
  sqlite3_busy_timeout(db_.get(), kBusyTimeoutMs);

  // Two processes opening a new file at once can both find it empty; the loser of the race for
  // the write lock sees SQLITE_BUSY from the journal-mode switch and simply starts over.
  for (int attempt = 1;; ++attempt) {
    try {
      check_identity(false);  // before anything that writes
      try {
        sqlite::exec(db_.get(), "PRAGMA journal_mode=WAL");
        sqlite::exec(db_.get(), "PRAGMA synchronous=NORMAL");
        sqlite::exec(db_.get(), "PRAGMA foreign_keys=ON");
      } catch (const sqlite::BusyError&) {
        throw;
      } catch (const Error& e) {
        throw Error(fmt::format("cannot configure results database {}: {}", path_, e.message()));
      }
      migrate();
      stale_failed_ = fail_stale_runs();
      return;
    } catch (const sqlite::BusyError& e) {
      if (attempt >= kMaxWriteAttempts)
        throw Error(fmt::format("cannot open results database {}: {}", path_, e.message()));
      std::this_thread::sleep_for(kRetryBackoff * attempt);
    }
  }
}

void Store::open_read_only() {
  std::error_code ec;
  if (path_ == kMemoryPath || !fs::exists(path_, ec))
    throw Error(fmt::format("no results database at {} (run `bench run` first)", path_));
  check_is_sqlite_file(path_);
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path_.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  db_.reset(raw);
  if (rc != SQLITE_OK)
    throw Error(fmt::format("cannot open results database {}: {}", path_, raw ? sqlite3_errmsg(raw) : "out of memory"));
  sqlite3_busy_timeout(db_.get(), kBusyTimeoutMs);
  check_identity(true);
  sqlite::exec(db_.get(), "PRAGMA query_only=ON");
  // The connection is read-only and query-only; attaching is refused too, since ATTACH of a new
  // path would be a way to create a file (and DETACH has nothing to undo).
  sqlite3_set_authorizer(db_.get(), deny_attach, nullptr);
}

void Store::check_identity(bool read_only) const {
  int64_t application_id = 0, user_version = 0, n_objects = 0;
  try {
    // One statement, so one read transaction: another connection may commit the first schema
    // between two separate reads.
    sqlite::Statement s(db_.get(), R"sql(
      SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM pragma_user_version),
             (SELECT count(*) FROM sqlite_master))sql");
    if (!s.step()) throw Error("no identity row");
    application_id = s.column_int64(0);
    user_version = s.column_int64(1);
    n_objects = s.column_int64(2);
  } catch (const sqlite::BusyError&) {
    throw;
  } catch (const Error& e) {
    throw Error(fmt::format("cannot read {} as a SQLite database: {}", path_, e.message()));
  }
  const bool empty = application_id == 0 && user_version == 0 && n_objects == 0;
  if (!empty && application_id != kApplicationId)
    throw Error(fmt::format(
        "{} is a SQLite database of another application (application_id {:#010x}, {} schema objects), not a bench "
        "results database; refusing to touch it",
        path_, static_cast<uint32_t>(application_id), n_objects));
  if (user_version > kSchemaVersion)
    throw Error(fmt::format("{} has results schema version {}, newer than this build knows ({}); use a newer bench",
                            path_, user_version, kSchemaVersion));
  if (read_only && empty)
    throw Error(fmt::format("{} is an empty database, not a bench results database (run `bench run` first)", path_));
  if (read_only && user_version < kSchemaVersion)
    throw Error(
        fmt::format("{} has results schema version {}; open it read-write once (e.g. `bench run`) to upgrade it "
                    "to version {}",
                    path_, user_version, kSchemaVersion));
}

void Store::migrate() {
  if (sqlite::scalar_int(db_.get(), "PRAGMA user_version") >= kSchemaVersion) return;  // no write lock needed
  write_transaction("upgrading the schema", [&] {
    // Another connection may have migrated while we waited for the lock.
    check_identity(false);
    const int64_t from = sqlite::scalar_int(db_.get(), "PRAGMA user_version");
    for (const Migration& m : migrations())
      if (m.version > from) sqlite::exec(db_.get(), m.sql);
    sqlite::exec(db_.get(), fmt::format("PRAGMA application_id={}", kApplicationId));
    sqlite::exec(db_.get(), fmt::format("PRAGMA user_version={}", kSchemaVersion));
    return from;
  });
}

std::vector<int64_t> Store::fail_stale_runs() {
  const std::string host = this_hostname();
  // Read first, without a write lock: most databases have no running run on this host.
  std::vector<std::pair<int64_t, int64_t>> candidates;  // run id, pid
  {
    sqlite::Statement s(db_.get(),
                        "SELECT id, pid FROM runs WHERE status = 'running' AND hostname = ?1 AND pid IS NOT NULL");
    s.bind(1, host);
    while (s.step())
      if (!is_live_bench_process(s.column_int64(1))) candidates.emplace_back(s.column_int64(0), s.column_int64(1));
  }
  if (candidates.empty()) return {};
  return write_transaction("marking stale runs failed", [&] {
    std::vector<int64_t> marked;
    sqlite::Statement upd(db_.get(), R"sql(
      UPDATE runs SET status = 'failed', finished_at = ?1, error = ?2
      WHERE id = ?3 AND status = 'running' AND pid = ?4)sql");
    for (const auto& [id, pid] : candidates) {
      upd.bind(1, now_utc())
          .bind(2, fmt::format("stale: its process (pid {} on {}) is gone; killed or crashed while running", pid, host))
          .bind(3, id)
          .bind(4, pid)
          .run();
      if (sqlite3_changes(db_.get()) > 0) marked.push_back(id);
    }
    return marked;
  });
}

const std::vector<int64_t>& Store::stale_runs_failed() const { return stale_failed_; }

void Store::resume_run(int64_t run_id, int64_t pid, std::string_view hostname) {
  write_transaction(fmt::format("resuming run {}", run_id), [&] {
    sqlite::Statement s(db_.get(),
                        "UPDATE runs SET status = 'running', error = NULL, finished_at = NULL, pid = ?1, "
                        "hostname = ?2 WHERE id = ?3");
    s.bind(1, pid).bind(2, hostname).bind(3, run_id).run();
    if (sqlite3_changes(db_.get()) == 0) throw Error(fmt::format("no run {}", run_id));
    return 0;
  });
}

void Store::remove_case(int64_t run_id, int64_t ordinal) {
  write_transaction(fmt::format("removing case {} of run {}", ordinal, run_id), [&] {
    sqlite::Statement find(db_.get(), "SELECT id FROM cases WHERE run_id = ?1 AND ordinal = ?2");
    find.bind(1, run_id).bind(2, ordinal);
    if (!find.step()) return 0;
    const int64_t case_id = find.column_int64(0);
    find.reset();
    delete_case(case_id);
    return 0;
  });
}

void Store::delete_case(int64_t case_id) {
  for (const char* table : kCaseTables) {
    sqlite::Statement del(db_.get(), fmt::format("DELETE FROM {} WHERE case_id = ?1", table));
    del.bind(1, case_id).run();
  }
  sqlite::Statement del(db_.get(), "DELETE FROM cases WHERE id = ?1");
  del.bind(1, case_id).run();
}

int64_t Store::begin_run(const RunInfo& info) {
  return write_transaction("starting a run", [&] {
    sqlite::Statement s(db_.get(), R"sql(
      INSERT INTO runs(started_at, status, experiment_name, experiment_path, experiment_text, experiment_sha256,
                       git_sha, harness_version, plugins_json, device, device_json, compiler, build_flags, seed,
                       command_line, hostname, n_cases, pid, uid, sweep, shard_index, shard_count, sweep_cases)
      VALUES(?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
             lower(hex(randomblob(16))), ?18, ?19, ?20, ?21))sql");
    const bool shard = !info.sweep.empty();
    const auto if_shard = [&](int64_t v) { return shard ? std::optional<int64_t>(v) : std::nullopt; };
    s.bind(1, info.started_at.empty() ? now_utc() : info.started_at)
        .bind(2, info.experiment_name)
        .bind(3, info.experiment_path)
        .bind(4, info.experiment_text)
        .bind(5, sha256_hex(info.experiment_text))
        .bind(6, info.git_sha)
        .bind(7, info.harness_version)
        .bind(8, info.plugins_json)
        .bind(9, info.device)
        .bind(10, info.device_json)
        .bind(11, info.compiler)
        .bind(12, info.build_flags)
        .bind(13, info.seed)
        .bind(14, info.command_line)
        .bind(15, info.hostname)
        .bind(16, info.n_cases)
        .bind(17, info.pid > 0 ? std::optional<int64_t>(info.pid) : std::nullopt)
        .bind(19, if_shard(info.shard_index))
        .bind(20, if_shard(info.shard_count))
        .bind(21, if_shard(info.sweep_cases));
    if (shard)
      s.bind(18, info.sweep);
    else
      s.bind_null(18);
    s.run();
    return static_cast<int64_t>(sqlite3_last_insert_rowid(db_.get()));
  });
}

std::string Store::finish_run(int64_t run_id, std::string_view status, std::string_view error) {
  if (status != "completed" && status != "failed" && status != "interrupted")
    throw Error(fmt::format("finish_run: status must be completed, failed or interrupted, not '{}'", status));
  std::string finished_at = now_utc();
  write_transaction(fmt::format("finishing run {}", run_id), [&] {
    sqlite::Statement s(db_.get(), "UPDATE runs SET status=?1, error=?2, finished_at=?3 WHERE id=?4");
    s.bind(1, status).bind(3, finished_at).bind(4, run_id);
    if (error.empty())
      s.bind_null(2);
    else
      s.bind(2, error);
    s.run();
    if (sqlite3_changes(db_.get()) == 0) throw Error(fmt::format("no run {}", run_id));
    return 0;
  });
  return finished_at;
}

std::string Store::run_uid(int64_t run_id) const {
  sqlite::Statement s(db_.get(), "SELECT uid FROM runs WHERE id = ?1");
  s.bind(1, run_id);
  if (!s.step() || s.column_is_null(0)) throw Error(fmt::format("no run {} in {}", run_id, path_));
  return s.column_text(0);
}

std::optional<int64_t> Store::latest_run() const {
  sqlite::Statement s(db_.get(), "SELECT max(id) FROM runs");
  if (!s.step() || s.column_is_null(0)) return std::nullopt;
  return s.column_int64(0);
}

QueryResult Store::query(const std::string& sql, const std::vector<Value>& params) const {
  sqlite3* db = db_.get();
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &raw, &tail);
  if (rc != SQLITE_OK) {
    const bool refused = rc == SQLITE_AUTH || rc == SQLITE_READONLY;
    throw Error(fmt::format("query failed: {}{}", sqlite3_errmsg(db),
                            refused ? " (queries are read-only: no writes, no ATTACH)" : ""));
  }
  if (raw == nullptr) throw Error("query failed: no SQL statement given");
  sqlite3_finalize(raw);
  // Everything after the first statement must be whitespace, comments or semicolons: a second
  // statement would otherwise be silently ignored.
  const char* end = sql.c_str() + sql.size();
  while (tail != nullptr && tail < end) {
    sqlite3_stmt* extra = nullptr;
    const char* next = nullptr;
    rc = sqlite3_prepare_v2(db, tail, static_cast<int>(end - tail), &extra, &next);
    sqlite3_finalize(extra);
    if (rc != SQLITE_OK || extra != nullptr) throw Error("query failed: give exactly one SQL statement");
    if (next == tail) break;
    tail = next;
  }

  sqlite::Statement s(db, sql);
  if (static_cast<size_t>(s.parameter_count()) != params.size())
    throw Error(
        fmt::format("query failed: the statement takes {} parameter(s), {} given", s.parameter_count(), params.size()));
  for (size_t i = 0; i < params.size(); ++i) s.bind(static_cast<int>(i) + 1, params[i]);

  QueryResult result;
  for (int i = 0; i < s.column_count(); ++i) result.columns.push_back(s.column_name(i));
  try {
    while (s.step()) {
      std::vector<Value> row;
      row.reserve(result.columns.size());
      for (int i = 0; i < s.column_count(); ++i) row.push_back(s.column_value(i));
      result.rows.push_back(std::move(row));
    }
  } catch (const Error&) {
    const int code = sqlite3_errcode(db);
    const bool refused = code == SQLITE_AUTH || code == SQLITE_READONLY;
    throw Error(fmt::format("query failed: {}{}", sqlite3_errmsg(db),
                            refused ? " (queries are read-only: no writes, no ATTACH)" : ""));
  }
  return result;
}

int Store::schema_version() const { return static_cast<int>(sqlite::scalar_int(db_.get(), "PRAGMA user_version")); }

}  // namespace bench::store
