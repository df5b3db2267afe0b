// defines: bench::ShardSpec, parse_shard, shard_of — which cases of an experiment a shard runs
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

/// Shard `index` of `count` (0 <= index < count), written "I/N" on the command line.
struct ShardSpec {
  int64_t index = 0;
  int64_t count = 1;
};

/// Parses "I/N" (0 <= I < N <= 100000). Throws bench::Error quoting the text otherwise.
ShardSpec parse_shard(const std::string& text);

/// The shard (0 .. count-1) of every case, given each case's unit key (runners/registry.h:
/// shard_unit_key — its runner's name and group key).
///
/// The assignment depends only on what the cases are, never on their order in the file: cases are
/// grouped into units — cases with equal keys, such as a stability case with every case that
/// differs from it only in `lr` (one learning-rate grid, which `lr_sensitivity` needs whole), any
/// other case alone — each unit is keyed by the SHA-256 of its key, and the units, largest first and
/// then by key, go one by one to the shard with the fewest cases so far (the lowest index on a
/// tie). Shards differ by at most the size of one unit. Reordering the variants of a file, or
/// editing one variant, moves no other case (within the limits of the rebalancing: an added or
/// removed unit can shift later units).
std::vector<int64_t> shard_of(const std::vector<std::string>& unit_keys, int64_t count);

}  // namespace bench
