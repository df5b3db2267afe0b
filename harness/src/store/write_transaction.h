// defines: bench::store::Store::write_transaction (private to the store's .cpp files), the tables
// that hang off a case, rollback
#pragma once

#include <fmt/format.h>
#include <sqlite3.h>

#include <array>
#include <chrono>
#include <thread>

#include "bench/error.h"
#include "store/sqlite.h"
#include "store/store.h"

namespace bench::store {

/// Tables whose rows belong to one case (a `case_id` column): what removing or copying a case
/// touches besides its `cases` row.
inline constexpr std::array<const char*, 7> kCaseTables = {"samples", "throughput", "profile",  "steps",
                                                           "series",  "metrics",    "artifacts"};

/// Whole-transaction attempts before giving up; each waits up to the busy timeout for the lock.
inline constexpr int kMaxWriteAttempts = 5;
inline constexpr auto kRetryBackoff = std::chrono::milliseconds(50);

inline void rollback(sqlite3* db) { sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr); }

template <class Body>
auto Store::write_transaction(std::string_view what, Body&& body) {
  for (int attempt = 1;; ++attempt) {
    try {
      sqlite::exec(db_.get(), "BEGIN IMMEDIATE");
      auto result = body();
      sqlite::exec(db_.get(), "COMMIT");
      return result;
    } catch (const sqlite::BusyError& e) {
      rollback(db_.get());
      if (attempt >= kMaxWriteAttempts)
        throw Error(fmt::format("{} in {}: gave up after {} attempts: {}", what, path_, attempt, e.message()));
      std::this_thread::sleep_for(kRetryBackoff * attempt);
    } catch (const Error& e) {
      rollback(db_.get());
      throw Error(fmt::format("{} in {}: {}", what, path_, e.message()));
    } catch (...) {
      rollback(db_.get());
      throw;
    }
  }
}

}  // namespace bench::store
