// The text dataset's BPE tokenizer (plugins/data/tokenizer, linked into this test): exact round
// trips, byte counts that add up to the text, deterministic training, the cache and its key.
#include "data/tokenizer/bpe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "bench/error.h"

namespace bench::data {
namespace bpe_test {
namespace {

/// A few KB of English-like lines with what a byte-exact tokenizer must keep: runs of spaces, a
/// tab, a leading space, empty lines, non-ASCII letters, and no newline at the end.
std::string corpus() {
  const char* const lines[] = {
      "The quick brown fox jumps over the lazy dog.",
      "  Indented  text, with  double spaces and a\ttab.",
      "",
      "A caf\xc3\xa9 serves na\xc3\xafve questions -- and answers them.",
      "def tokenize(text): return [byte for byte in text]",
      "Numbers: 3.14159, 2718, 1e-3; symbols: {}[]()<>#@!?",
  };
  std::string text;
  for (int i = 0; i < 40; ++i)
    for (const char* line : lines) text += std::string(line) + " " + std::to_string(i) + "\n";
  return text + "the end";
}

std::string fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("bench_bpe_" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

int64_t byte_sum(const BpeTokenizer& bpe, const std::vector<int32_t>& tokens) {
  int64_t n = 0;
  for (int32_t t : tokens) n += bpe.token_bytes()[static_cast<size_t>(t)];
  return n;
}

TEST(Bpe, RoundTripsExactlyAndItsTokensCountTheBytes) {
  const std::string text = corpus();
  const BpeTokenizer bpe(BpeTokenizer::train(text, {400, 100000}));
  EXPECT_EQ(bpe.vocab_size(), 400);
  // Text it never saw: CJK, a carriage return, trailing spaces, a lone newline at each end.
  const std::string unseen = "\n\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e text\r\nwith   \n\n  odd\x01 bytes \xc3\xbc  \n";
  for (const std::string& x : {text, unseen, std::string(""), std::string("\n"), std::string(" ")}) {
    const std::vector<int32_t> tokens = bpe.encode(x);
    EXPECT_EQ(bpe.decode(tokens), x);
    EXPECT_EQ(byte_sum(bpe, tokens), static_cast<int64_t>(x.size()));
  }
  // Each piece's byte count is what it decodes to alone (byte pieces: one byte each).
  int64_t merged = 0;
  for (int32_t id = 0; id < 400; ++id) {
    const std::string alone = bpe.decode({id});
    if (bpe.token_bytes()[static_cast<size_t>(id)] > 1) {
      EXPECT_EQ(bpe.token_bytes()[static_cast<size_t>(id)], static_cast<int32_t>(alone.size())) << alone;
      ++merged;
    }
  }
  EXPECT_GT(merged, 50);
  // It merges: the training text takes fewer than two tokens for three bytes.
  EXPECT_LT(bpe.encode(text).size() * 3, text.size() * 2);
}

TEST(Bpe, TrainsDeterministicallyAndOnceThroughTheCache) {
  const std::string text = corpus();
  const BpeSettings s{400, 100000};
  EXPECT_EQ(BpeTokenizer::train(text, s), BpeTokenizer::train(text, s));
  const std::string dir = fresh_dir("cache");
  bool trained = false;
  const BpeTokenizer first = BpeTokenizer::cached(dir, text, s, &trained);
  EXPECT_TRUE(trained);
  EXPECT_EQ(first.path(), (std::filesystem::path(dir) / (BpeTokenizer::cache_key(text, s) + ".model")).string());
  ASSERT_TRUE(std::filesystem::is_regular_file(first.path()));
  const auto written = std::filesystem::last_write_time(first.path());
  const BpeTokenizer second = BpeTokenizer::cached(dir, text, s, &trained);
  EXPECT_FALSE(trained);  // a cache hit: no retraining
  EXPECT_EQ(second.model(), first.model());
  EXPECT_EQ(std::filesystem::last_write_time(second.path()), written);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);  // no temporary left over
}

TEST(Bpe, TheCacheKeyFollowsTheCorpusAndTheSettings) {
  const std::string text = corpus();
  const std::string key = BpeTokenizer::cache_key(text, {300, 100000});
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(BpeTokenizer::cache_key(text, {300, 100000}), key);
  EXPECT_NE(BpeTokenizer::cache_key(text, {301, 100000}), key);
  EXPECT_NE(BpeTokenizer::cache_key(text, {300, 1000}), key);
  EXPECT_NE(BpeTokenizer::cache_key(text + ".", {300, 100000}), key);
  EXPECT_NE(BpeTokenizer::cache_key("x" + text.substr(1), {300, 100000}), key);
}

TEST(Bpe, ATrainerErrorSaysWhy) {
  // Fewer pieces than the 256 bytes, <unk> and the text's characters need.
  try {
    (void)BpeTokenizer::train(corpus(), {260, 100000});
    FAIL() << "trained a vocabulary too small for its characters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocab_size 260"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bpe_test
}  // namespace bench::data
