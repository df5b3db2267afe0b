#include "experiment/shard.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "bench/error.h"
#include "bench/sha256.h"

namespace bench {

namespace {

constexpr int64_t kMaxShards = 100000;

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

ShardSpec parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  ShardSpec s;
  if (slash == std::string::npos || !parse_int(std::string_view(text).substr(0, slash), s.index) ||
      !parse_int(std::string_view(text).substr(slash + 1), s.count))
    throw Error("--shard '" + text + "': expected I/N, e.g. 0/4 (shard I of N, counted from 0)");
  if (s.count < 1 || s.count > kMaxShards)
    throw Error("--shard '" + text + "': N must be between 1 and " + std::to_string(kMaxShards));
  if (s.index < 0 || s.index >= s.count)
    throw Error("--shard '" + text + "': I must be between 0 and N-1 = " + std::to_string(s.count - 1) +
                " (shards are counted from 0)");
  return s;
}

std::vector<int64_t> shard_of(const std::vector<std::string>& unit_keys, int64_t count) {
  // Unit key -> the positions of its cases. Hashing the key spreads units evenly whatever their
  // configurations have in common, and keeps the order independent of the file's order.
  std::map<std::string, std::vector<size_t>> units;
  for (size_t i = 0; i < unit_keys.size(); ++i) units[sha256_hex(unit_keys[i])].push_back(i);
  std::vector<std::pair<std::string, const std::vector<size_t>*>> order;
  order.reserve(units.size());
  for (const auto& [key, members] : units) order.emplace_back(key, &members);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second->size() > b.second->size(); });
  std::vector<int64_t> load(static_cast<size_t>(count), 0);
  std::vector<int64_t> out(unit_keys.size(), 0);
  for (const auto& [key, members] : order) {
    const auto lightest = std::min_element(load.begin(), load.end()) - load.begin();
    for (const size_t i : *members) out[i] = lightest;
    load[static_cast<size_t>(lightest)] += static_cast<int64_t>(members->size());
  }
  return out;
}

}  // namespace bench
