// Store::merge — `bench merge OUT.db IN.db...`: shards of a sweep into one run, other runs copied
// once, nothing duplicated, everything checked before anything is written.
#include <fmt/format.h>
#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <set>

#include "bench/error.h"
#include "store/sqlite.h"
#include "store/store.h"
#include "store/write_transaction.h"

namespace bench::store {

namespace fs = std::filesystem;

namespace {

/// Columns of the `runs` rows the merge reads, in this order.
constexpr const char* kRunColumns =
    "id, uid, sweep, shard_index, shard_count, sweep_cases, experiment_sha256, experiment_name, status";
enum RunCol : size_t { kId, kUid, kSweep, kShardIndex, kShardCount, kSweepCases, kSha, kName, kStatus };

bool is_finished(const std::string& status) { return status == "completed" || status == "diverged"; }

bool is_shard(const std::vector<Value>& run) { return !run[kSweep].is_null() && !run[kShardIndex].is_null(); }

/// "run 3 (norms, shard 1/4 of sweep S)" / "run 3 (norms, merged sweep S)" / "run 3 (norms)".
std::string describe(const std::vector<Value>& run) {
  std::string out = fmt::format("run {} ({}", run[kId].as_int(), run[kName].as_string());
  if (is_shard(run))
    out += fmt::format(", shard {}/{} of sweep {}", run[kShardIndex].as_int(), run[kShardCount].as_int(),
                       run[kSweep].as_string());
  else if (!run[kSweep].is_null())
    out += fmt::format(", merged sweep {}", run[kSweep].as_string());
  return out + ")";
}

/// A path as an SQLite URI that opens the file read-only (https://sqlite.org/uri.html).
std::string read_only_uri(const std::string& path) {
  std::string out = "file:";
  for (const unsigned char ch : fs::absolute(path).lexically_normal().string()) {
    if (std::isalnum(ch) || ch == '/' || ch == '-' || ch == '_' || ch == '.' || ch == '~')
      out += static_cast<char>(ch);
    else
      out += fmt::format("%{:02X}", ch);
  }
  return out + "?mode=ro";
}

/// Attaches a database as `src` for the lifetime of this object.
class Attached {
 public:
  Attached(sqlite3* db, const std::string& path) : db_(db) {
    sqlite::Statement s(db, "ATTACH DATABASE ?1 AS src");
    s.bind(1, read_only_uri(path)).run();
  }
  ~Attached() { sqlite3_exec(db_, "DETACH DATABASE src", nullptr, nullptr, nullptr); }
  Attached(const Attached&) = delete;
  Attached& operator=(const Attached&) = delete;

 private:
  sqlite3* db_;
};

/// The columns of `table` in the main database, in order.
std::vector<std::string> columns_of(sqlite3* db, const std::string& table) {
  std::vector<std::string> out;
  sqlite::Statement s(db, "SELECT name FROM pragma_table_info(?1) ORDER BY cid");
  s.bind(1, table);
  while (s.step()) out.push_back(s.column_text(0));
  return out;
}

}  // namespace

std::vector<MergeOutcome> Store::merge(const std::vector<std::string>& sources) {
  if (sources.empty()) throw Error("bench merge: no database to merge");
  // What every sweep here looks like, and what each source adds to it: (sha, shard count, where).
  struct SweepFacts {
    std::string sha;
    int64_t shard_count = 0;
    std::string where;
  };
  std::map<std::string, SweepFacts> sweeps;
  for (const auto& row :
       query("SELECT sweep, experiment_sha256, shard_count, id FROM runs WHERE sweep IS NOT NULL").rows)
    sweeps.emplace(row[0].as_string(), SweepFacts{row[1].as_string(), row[2].is_null() ? 0 : row[2].as_int(),
                                                  fmt::format("{} run {}", path_, row[3].as_int())});
  std::map<std::string, std::string> uids;  // uid -> experiment sha, here
  for (const auto& row : query("SELECT uid, experiment_sha256 FROM runs").rows)
    uids.emplace(row[0].as_string(), row[1].as_string());

  // Check everything first: a refusal writes nothing.
  std::vector<std::vector<std::vector<Value>>> runs_of(sources.size());
  std::set<std::string> seen_files;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string& src = sources[i];
    std::error_code ec;
    if (path_ != ":memory:" && fs::exists(path_, ec) && fs::equivalent(src, path_, ec))
      throw Error(fmt::format("{}: is the output database itself; merge other databases into it", src));
    if (!fs::exists(src, ec)) throw Error(fmt::format("{}: no such database", src));
    if (!seen_files.insert(fs::canonical(src, ec).string()).second) throw Error(fmt::format("{}: given twice", src));
    QueryResult runs;
    try {
      const Store in(src, Mode::kReadOnly);  // refuses foreign, corrupt, older and newer databases
      if (in.schema_version() != schema_version())
        throw Error(
            fmt::format("has results schema version {}, {} has {}", in.schema_version(), path_, schema_version()));
      runs = in.query(fmt::format("SELECT {} FROM runs ORDER BY id", kRunColumns));
    } catch (const Error& e) {
      const std::string& msg = e.message();
      throw Error(msg.rfind(src, 0) == 0 ? msg : fmt::format("{}: {}", src, msg));
    }
    for (const auto& run : runs.rows) {
      if (run[kUid].is_null()) throw Error(fmt::format("{}: {} has no uid", src, describe(run)));
      const auto known = uids.find(run[kUid].as_string());
      if (known != uids.end() && known->second != run[kSha].as_string())
        throw Error(fmt::format("{}: {} has the uid of a run here that was made from another experiment text", src,
                                describe(run)));
      if (run[kSweep].is_null()) continue;
      const std::string sweep = run[kSweep].as_string();
      const int64_t count = run[kShardCount].is_null() ? 0 : run[kShardCount].as_int();
      const auto [it, fresh] = sweeps.emplace(
          sweep, SweepFacts{run[kSha].as_string(), count, fmt::format("{} run {}", src, run[kId].as_int())});
      if (fresh) continue;
      if (it->second.sha != run[kSha].as_string())
        throw Error(fmt::format(
            "{}: {} was made from another experiment text (sha256 {}...) than {} (sha256 {}...) of the same sweep; "
            "refusing to merge them: the shards of one sweep must come from one experiment file",
            src, describe(run), run[kSha].as_string().substr(0, 12), it->second.where, it->second.sha.substr(0, 12)));
      if (it->second.shard_count != count)
        throw Error(
            fmt::format("{}: {} is one of {} shards, but {} of the same sweep is one of {}; refusing to merge "
                        "them",
                        src, describe(run), count, it->second.where, it->second.shard_count));
    }
    runs_of[i] = std::move(runs.rows);
  }

  std::vector<MergeOutcome> out;
  for (size_t i = 0; i < sources.size(); ++i) {
    const Attached attached(db_.get(), sources[i]);
    for (const auto& run : runs_of[i]) out.push_back(merge_run(sources[i], run));
  }
  return out;
}

MergeOutcome Store::merge_run(const std::string& source, const std::vector<Value>& run) {
  MergeOutcome o;
  o.source = source;
  o.source_run = run[kId].as_int();
  o.description = describe(run);
  const std::string src_uid = run[kUid].as_string();
  const fs::path out_dir = path_ == ":memory:" ? fs::current_path() : fs::absolute(path_).parent_path();
  const fs::path src_dir = fs::absolute(source).parent_path();
  const std::vector<std::string> run_columns = columns_of(db_.get(), "runs");

  write_transaction(fmt::format("merging {} of {}", o.description, source), [&] {
    // The run that receives the cases: the sweep's merged run, or the run with this uid.
    std::optional<int64_t> target;
    if (!run[kSweep].is_null()) {
      sqlite::Statement find(db_.get(), "SELECT id FROM main.runs WHERE sweep = ?1 AND shard_index IS NULL");
      find.bind(1, run[kSweep].as_string());
      if (find.step()) target = find.column_int64(0);
    } else {
      sqlite::Statement find(db_.get(), "SELECT id FROM main.runs WHERE uid = ?1");
      find.bind(1, src_uid);
      if (find.step()) target = find.column_int64(0);
    }
    if (!target) {
      // A copy of the source's row; a sweep's merged run gets its own uid, drops the shard index,
      // plans the whole sweep's cases and belongs to no process.
      std::string cols, select;
      for (const auto& c : run_columns) {
        if (c == "id") continue;
        cols += (cols.empty() ? "" : ", ") + c;
        std::string expr = "s." + c;
        if (c == "pid") expr = "NULL";
        if (!run[kSweep].is_null()) {
          if (c == "uid") expr = "lower(hex(randomblob(16)))";
          if (c == "shard_index") expr = "NULL";
          if (c == "n_cases") expr = "coalesce(s.sweep_cases, s.n_cases)";
          if (c == "command_line") expr = "'bench merge'";
        }
        select += (select.empty() ? "" : ", ") + expr;
      }
      sqlite::Statement ins(
          db_.get(), fmt::format("INSERT INTO main.runs({}) SELECT {} FROM src.runs s WHERE s.id = ?1", cols, select));
      ins.bind(1, o.source_run).run();
      target = sqlite3_last_insert_rowid(db_.get());
      o.created = true;
    }
    o.target_run = *target;

    // Cases, by ordinal.
    std::map<int64_t, std::pair<int64_t, std::string>> here;  // ordinal -> id, status
    {
      sqlite::Statement s(db_.get(), "SELECT ordinal, id, status FROM main.cases WHERE run_id = ?1");
      s.bind(1, *target);
      while (s.step()) here[s.column_int64(0)] = {s.column_int64(1), s.column_text(2)};
    }
    std::vector<std::pair<int64_t, std::string>> theirs;  // id, status, by ordinal
    std::vector<int64_t> ordinals;
    {
      sqlite::Statement s(db_.get(), "SELECT id, status, ordinal FROM src.cases WHERE run_id = ?1 ORDER BY ordinal");
      s.bind(1, o.source_run);
      while (s.step()) {
        theirs.emplace_back(s.column_int64(0), s.column_text(1));
        ordinals.push_back(s.column_int64(2));
      }
    }
    for (size_t k = 0; k < theirs.size(); ++k) {
      const auto existing = here.find(ordinals[k]);
      if (existing != here.end()) {
        if (is_finished(existing->second.second) || !is_finished(theirs[k].second)) {
          ++o.kept;
          continue;
        }
        delete_case(existing->second.first);
        ++o.replaced;
      } else {
        ++o.added;
      }
      copy_case(theirs[k].first, *target, src_uid);
    }
    // Artifacts were stored relative to the source database's directory: re-path them.
    {
      sqlite::Statement sel(db_.get(), R"sql(
        SELECT a.rowid, a.path FROM main.artifacts a JOIN main.cases c ON c.id = a.case_id
        WHERE c.run_id = ?1 AND c.source_uid = ?2)sql");
      sel.bind(1, *target).bind(2, src_uid);
      std::vector<std::pair<int64_t, std::string>> fix;
      while (sel.step()) {
        const fs::path p = sel.column_text(1);
        if (p.is_absolute()) continue;
        const fs::path abs = (src_dir / p).lexically_normal();
        const fs::path rel = abs.lexically_relative(out_dir);
        const std::string now = rel.empty() || *rel.begin() == ".." ? abs.string() : rel.string();
        if (now != p.string()) fix.emplace_back(sel.column_int64(0), now);
      }
      if (src_dir != out_dir) {
        sqlite::Statement upd(db_.get(), "UPDATE main.artifacts SET path = ?1 WHERE rowid = ?2");
        for (const auto& [rowid, path] : fix) upd.bind(1, path).bind(2, rowid).run();
      }
    }

    // Provenance: the source run, and the runs a merged source was made of.
    sqlite::Statement prov(db_.get(), R"sql(
      INSERT OR REPLACE INTO main.run_sources(run_id, source_uid, source_db, shard_index, status, hostname, device,
                                              device_json, git_sha, started_at, finished_at, merged_at)
      SELECT ?1, uid, ?2, shard_index, status, hostname, device, device_json, git_sha, started_at, finished_at, ?3
      FROM src.runs WHERE id = ?4 AND NOT (sweep IS NOT NULL AND shard_index IS NULL))sql");
    prov.bind(1, *target).bind(2, fs::absolute(source).lexically_normal().string()).bind(3, now_utc());
    prov.bind(4, o.source_run).run();
    sqlite::Statement inherit(db_.get(), R"sql(
      INSERT OR REPLACE INTO main.run_sources(run_id, source_uid, source_db, shard_index, status, hostname, device,
                                              device_json, git_sha, started_at, finished_at, merged_at)
      SELECT ?1, source_uid, source_db, shard_index, status, hostname, device, device_json, git_sha, started_at,
             finished_at, merged_at
      FROM src.run_sources WHERE run_id = ?2)sql");
    inherit.bind(1, *target).bind(2, o.source_run).run();

    if (!run[kSweep].is_null()) {
      update_sweep_status(*target);
    } else {
      // A copied run takes the source's state: merging it again after it finished updates it.
      sqlite::Statement upd(db_.get(), R"sql(
        UPDATE main.runs SET (status, error, finished_at) = (SELECT status, error, finished_at FROM src.runs
                                                              WHERE id = ?1)
        WHERE id = ?2)sql");
      upd.bind(1, o.source_run).bind(2, *target).run();
    }
    return 0;
  });
  return o;
}

void Store::copy_case(int64_t src_case, int64_t target_run, const std::string& source_uid) {
  std::string cols, select;
  for (const auto& c : columns_of(db_.get(), "cases")) {
    if (c == "id") continue;
    cols += (cols.empty() ? "" : ", ") + c;
    select += std::string(select.empty() ? "" : ", ") + (c == "run_id"       ? "?1"
                                                         : c == "source_uid" ? "coalesce(s.source_uid, ?2)"
                                                                             : "s." + c);
  }
  sqlite::Statement ins(
      db_.get(), fmt::format("INSERT INTO main.cases({}) SELECT {} FROM src.cases s WHERE s.id = ?3", cols, select));
  ins.bind(1, target_run).bind(2, source_uid).bind(3, src_case).run();
  const int64_t case_id = sqlite3_last_insert_rowid(db_.get());
  for (const char* table : kCaseTables) {
    std::string tcols, tselect;
    for (const auto& c : columns_of(db_.get(), table)) {
      tcols += (tcols.empty() ? "" : ", ") + c;
      tselect += std::string(tselect.empty() ? "" : ", ") + (c == "case_id" ? "?1" : "s." + c);
    }
    sqlite::Statement copy(
        db_.get(), fmt::format("INSERT INTO main.{}({}) SELECT {} FROM src.{} s WHERE s.case_id = ?2", table, tcols,
                               tselect, table));
    copy.bind(1, case_id).bind(2, src_case).run();
  }
}

void Store::update_sweep_status(int64_t run_id) {
  sqlite::Statement facts(db_.get(), R"sql(
    SELECT r.n_cases, r.shard_count,
           (SELECT count(*) FROM main.cases c WHERE c.run_id = r.id AND c.status IN ('completed', 'diverged')),
           (SELECT count(*) FROM main.cases c WHERE c.run_id = r.id),
           (SELECT group_concat(DISTINCT shard_index) FROM
              (SELECT shard_index FROM main.run_sources WHERE run_id = r.id AND shard_index IS NOT NULL
               ORDER BY shard_index)),
           (SELECT count(*) FROM main.run_sources WHERE run_id = r.id AND status = 'running'),
           (SELECT min(started_at) FROM main.run_sources WHERE run_id = r.id),
           (SELECT max(finished_at) FROM main.run_sources WHERE run_id = r.id)
    FROM main.runs r WHERE r.id = ?1)sql");
  facts.bind(1, run_id);
  if (!facts.step()) throw Error(fmt::format("no run {}", run_id));
  const int64_t n_cases = facts.column_int64(0), shard_count = facts.column_int64(1);
  const int64_t finished = facts.column_int64(2), stored = facts.column_int64(3);
  const std::string shards = facts.column_is_null(4) ? "" : facts.column_text(4);
  const int64_t running = facts.column_int64(5);
  const std::string started = facts.column_is_null(6) ? now_utc() : facts.column_text(6);
  const std::optional<std::string> finished_at =
      facts.column_is_null(7) ? std::nullopt : std::optional<std::string>(facts.column_text(7));
  facts.reset();

  std::set<int64_t> have;
  for (size_t at = 0; at < shards.size();) {
    const size_t comma = shards.find(',', at);
    have.insert(std::stoll(shards.substr(at, comma - at)));
    at = comma == std::string::npos ? shards.size() : comma + 1;
  }
  std::string missing;
  for (int64_t k = 0; k < shard_count; ++k)
    if (!have.count(k)) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
  std::string error;
  if (finished < n_cases || running > 0 || !missing.empty()) {
    error = fmt::format("incomplete: {} of {} cases finished ({} stored) from {} of {} shards", finished, n_cases,
                        stored, have.size(), shard_count);
    if (!missing.empty()) error += "; missing shards: " + missing;
    if (running > 0) error += fmt::format("; {} shard(s) were still running when merged", running);
  }
  sqlite::Statement upd(
      db_.get(), "UPDATE main.runs SET status = ?1, error = ?2, started_at = ?3, finished_at = ?4 WHERE id = ?5");
  upd.bind(1, error.empty() ? "completed" : "failed").bind(3, started).bind(5, run_id);
  if (error.empty())
    upd.bind_null(2);
  else
    upd.bind(2, error);
  if (finished_at)
    upd.bind(4, *finished_at);
  else
    upd.bind_null(4);
  upd.run();
}

}  // namespace bench::store
