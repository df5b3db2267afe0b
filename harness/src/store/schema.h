// defines: bench::store::Migration, migrations, kApplicationId — the results schema, as the list
// of steps that build it. Documented column by column in docs/results.md.
#pragma once

#include <cstdint>
#include <vector>

namespace bench::store {

/// `PRAGMA application_id` of a results database: 'BENC'.
inline constexpr int32_t kApplicationId = 0x42454E43;

/// One schema step: the SQL that takes a database from version `version - 1` to `version`.
struct Migration {
  int version;
  const char* sql;
};

/// Every migration, in ascending version order; the last one's version is kSchemaVersion.
/// A new schema version appends a step here and never edits an old one.
const std::vector<Migration>& migrations();

}  // namespace bench::store
