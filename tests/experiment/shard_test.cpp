// Sharding a sweep: every case in exactly one shard, balanced, independent of the order of the
// variants in the file, and a learning-rate grid kept whole.
#include "experiment/shard.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "bench/error.h"
#include "support/toml_case.h"

namespace bench {
namespace shard_test {
namespace {

/// Four named variants, each over a grid of three learning rates, and throughput over two widths.
std::string grid(const std::vector<std::string>& variant_order) {
  std::map<std::string, std::string> variants = {
      {"post", "[[variant]]\nname = \"post\"\nmodel.norm_position = \"post\"\n"},
      {"pre", "[[variant]]\nname = \"pre\"\nmodel.norm_position = \"pre\"\n"},
      {"double", "[[variant]]\nname = \"double\"\nmodel.norm_position = \"double\"\n"},
      {"ln", "[[variant]]\nname = \"ln\"\nmodel.norm = \"layernorm\"\n"},
  };
  std::string text =
      "name = \"grid\"\nseed = 3\n"
      "[model]\nd_model = [32, 64]\nn_layers = 2\nn_heads = 2\nseq_len = 16\nbatch_size = 2\n"
      "[data]\ntype = \"synthetic\"\n"
      "[throughput]\nmodes = [\"forward\"]\n"
      "[stability]\nsteps = 5\nlr = [1e-3, 3e-3, 1e-2]\n";
  for (const auto& v : variant_order) text += variants.at(v);
  return text;
}

struct Sharded {
  std::vector<Case> cases;
  std::vector<int64_t> shard;
};

Sharded shard_file(const std::string& text, int64_t n) {
  Sharded s;
  s.cases = test::cases_of(text);
  std::vector<ResolvedCase> resolved;
  std::vector<std::string> keys;
  for (const auto& c : s.cases) keys.push_back(shard_unit_key(c, test::resolve(c)));
  s.shard = shard_of(keys, n);
  return s;
}

/// runner + label -> shard: what identifies a case whatever its ordinal.
std::map<std::string, int64_t> by_label(const Sharded& s) {
  std::map<std::string, int64_t> out;
  for (size_t i = 0; i < s.cases.size(); ++i) out[s.cases[i].runner + " " + s.cases[i].label] = s.shard[i];
  return out;
}

TEST(Shard, ParsesIOverNAndRejectsTheRest) {
  const ShardSpec s = parse_shard("2/5");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 5);
  EXPECT_EQ(parse_shard("0/1").count, 1);
  for (const char* bad : {"", "1", "/3", "1/", "3/3", "-1/3", "1/0", "a/3", "1/3x", "1 /3", "1/200000"})
    EXPECT_THROW(parse_shard(bad), Error) << bad;
  try {
    parse_shard("4/4");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("counted from 0"), std::string::npos) << e.what();
  }
}

TEST(Shard, EveryCaseInExactlyOneShardAndTheShardsBalanced) {
  for (const int64_t n : {1, 2, 3, 5, 8, 40}) {
    const Sharded s = shard_file(grid({"post", "pre", "double", "ln"}), n);
    ASSERT_EQ(s.cases.size(), 2u * 4u * (1u + 3u));  // two widths x four variants x (throughput + 3 lrs)
    std::vector<int64_t> load(static_cast<size_t>(n), 0);
    for (const int64_t k : s.shard) {
      ASSERT_GE(k, 0);
      ASSERT_LT(k, n);
      ++load[static_cast<size_t>(k)];
    }
    // Units hold one case (throughput) or three (an lr grid): shards differ by at most one unit.
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    if (n <= 8) {
      EXPECT_LE(*hi - *lo, 3) << "n = " << n;
    } else {  // more shards than units: some are empty, none holds two units
      EXPECT_LE(*hi, 3) << "n = " << n;
      EXPECT_EQ(*lo, 0);
    }
  }
}

TEST(Shard, TheOrderOfTheVariantsInTheFileChangesNothing) {
  const auto a = by_label(shard_file(grid({"post", "pre", "double", "ln"}), 3));
  const auto b = by_label(shard_file(grid({"ln", "double", "post", "pre"}), 3));
  const auto c = by_label(shard_file(grid({"pre", "ln", "post", "double"}), 3));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  // Not trivially so: the ordinals did move.
  const Sharded first = shard_file(grid({"post", "pre", "double", "ln"}), 3);
  const Sharded other = shard_file(grid({"ln", "double", "post", "pre"}), 3);
  EXPECT_NE(first.cases[0].label, other.cases[0].label);
}

TEST(Shard, ALearningRateGridStaysInOneShard) {
  const Sharded s = shard_file(grid({"post", "pre", "double", "ln"}), 4);
  std::map<std::string, std::set<int64_t>> shards_of_variant;  // stability variant+width -> shards
  for (size_t i = 0; i < s.cases.size(); ++i) {
    if (s.cases[i].runner != "stability") continue;
    const std::string& label = s.cases[i].label;
    shards_of_variant[label.substr(0, label.find(" lr="))].insert(s.shard[i]);
  }
  EXPECT_EQ(shards_of_variant.size(), 8u);
  for (const auto& [variant, shards] : shards_of_variant) EXPECT_EQ(shards.size(), 1u) << variant;
}

TEST(Shard, OneShardIsEverything) {
  const Sharded s = shard_file(grid({"post", "pre"}), 1);
  for (const int64_t k : s.shard) EXPECT_EQ(k, 0);
}

}  // namespace
}  // namespace shard_test
}  // namespace bench
