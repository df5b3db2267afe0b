// The built-in datasets: determinism, the input/target shift, file formats and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "bench/interfaces.h"
#include "experiment/resolve.h"
#include "support/toml_case.h"

namespace bench {
namespace data_test {
namespace {

struct Loaded {
  ResolvedCase rc;
  std::unique_ptr<Component> owner;
  Dataset* ds = nullptr;
};

Loaded load(const std::string& data_toml, const std::string& name = "data.toml") {
  Loaded l;
  const std::string toml = "[model]\nseq_len = 8\nbatch_size = 2\n[data]\n" + data_toml + "\n[stability]\n";
  const auto cases = test::cases_of(toml, "cpu", name);
  l.rc = test::resolve(cases.at(0));
  validate_case(l.rc, test::builtin_registry());
  l.owner = test::builtin_registry().create(*l.rc.data.info, l.rc.data.params);
  l.ds = dynamic_cast<Dataset*>(l.owner.get());
  return l;
}

TEST(Data, SyntheticIsDeterministicAndShifted) {
  Loaded a = load("type = \"synthetic\"\nreference_tokens = 4096");
  Loaded b = load("type = \"synthetic\"\nreference_tokens = 4096");
  std::vector<int32_t> in1(16), tg1(16), in2(16), tg2(16), in3(16), tg3(16);
  a.ds->batch(Split::kTrain, 5, 2, 8, in1.data(), tg1.data());
  b.ds->batch(Split::kTrain, 5, 2, 8, in2.data(), tg2.data());
  a.ds->batch(Split::kValidation, 5, 2, 8, in3.data(), tg3.data());
  EXPECT_EQ(in1, in2);
  EXPECT_EQ(tg1, tg2);
  EXPECT_NE(in1, in3);
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t + 1 < 8; ++t) EXPECT_EQ(tg1[r * 8 + t], in1[r * 8 + t + 1]);
  for (int32_t v : in1) EXPECT_TRUE(v >= 0 && v < 256);
  const auto ref = a.ds->reference();
  ASSERT_EQ(ref.size(), 2u);
  EXPECT_GT(ref[0].second, ref[1].second);    // context lowers the entropy
  EXPECT_LT(ref[0].second, std::log(256.0));  // Zipfian, not uniform
}

TEST(Data, TextFileAsBytes) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abab";  // unigram entropy ln 2, bigram entropy 0
  const std::string path = test::write_temp("corpus.txt", text);
  Loaded l = load("type = \"text\"\npath = \"corpus.txt\"");
  std::vector<int32_t> in(16), tg(16);
  l.ds->batch(Split::kTrain, 0, 2, 8, in.data(), tg.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(in[i] == 'a' || in[i] == 'b');
    EXPECT_NE(in[i], tg[i]);  // a is always followed by b and b by a
  }
  const auto ref = l.ds->reference();
  EXPECT_NEAR(ref[0].second, std::log(2.0), 1e-6);
  EXPECT_NEAR(ref[1].second, 0.0, 1e-9);
  (void)path;
}

TEST(Data, LlmcTokenFile) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = 1000;
  std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
  for (int i = 0; i < 1000; ++i) {
    const uint16_t t = static_cast<uint16_t>(i % 7 == 0 ? 50000 : i % 100);
    bytes.append(reinterpret_cast<const char*>(&t), 2);
  }
  test::write_temp("toks.bin", bytes);
  Loaded l = load("type = \"tokens\"\npath = \"toks.bin\"");
  EXPECT_EQ(l.rc.model.dims.vocab_size, 50257);
  std::vector<int32_t> in(16), tg(16);
  l.ds->batch(Split::kValidation, 3, 2, 8, in.data(), tg.data());
  for (int32_t v : in) EXPECT_TRUE(v == 50000 || v < 100);

  header[0] = 12345;
  std::string bad(reinterpret_cast<const char*>(header.data()), 1024);
  bad += bytes.substr(1024);
  test::write_temp("bad_magic.bin", bad);
  try {
    load("type = \"tokens\"\npath = \"bad_magic.bin\"", "bad.toml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.toml:6:1: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad llm.c magic 12345"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load("type = \"tokens\"\npath = \"toks.bin\"\nvocab_size = 1000"), ConfigError);  // 50000 >= 1000
  EXPECT_THROW(load("type = \"text\"\npath = \"nowhere.txt\""), ConfigError);
  EXPECT_THROW(load("type = \"text\""), ConfigError);
}

TEST(Data, TextTokenizersCountTheBytesTheirTokensStandFor) {
  // Bytes: each token is one byte. A directory: its files in sorted order, concatenated.
  std::string text;
  for (int i = 0; i < 60; ++i) text += "The tokenizer reads line " + std::to_string(i) + " of a small corpus.\n";
  const std::string half = text.substr(0, text.size() / 2);
  const auto dir = std::filesystem::path(test::write_temp("textdir.keep", "")).parent_path() / "textdir";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "b.txt", std::ios::binary) << text.substr(half.size());
  std::ofstream(dir / "a.txt", std::ios::binary) << half;
  Loaded bytes = load("type = \"text\"\npath = \"textdir\"");
  EXPECT_EQ(bytes.rc.model.dims.vocab_size, 256);
  const std::vector<int32_t> all = bytes.ds->all_tokens();
  EXPECT_EQ(std::string(all.begin(), all.end()), text);
  EXPECT_EQ(bytes.ds->bytes_of(all.data(), 5), 5);
  EXPECT_TRUE(bytes.ds->derived_files().empty());

  // BPE: the pieces' bytes add up to the corpus exactly; the model is a file of the cache.
  Loaded bpe = load("type = \"text\"\npath = \"textdir\"\ntokenizer = \"bpe\"\nvocab_size = 300");
  EXPECT_EQ(bpe.rc.model.dims.vocab_size, 300);
  const auto cache = dir.parent_path() / "tokcache";
  std::filesystem::remove_all(cache);
  bpe.ds->set_cache_dir(cache.string());
  const std::vector<int32_t> tokens = bpe.ds->all_tokens();
  EXPECT_LT(tokens.size(), text.size());
  EXPECT_EQ(bpe.ds->bytes_of(tokens.data(), static_cast<int64_t>(tokens.size())), static_cast<int64_t>(text.size()));
  const auto files = bpe.ds->derived_files();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].first, "tokenizer");
  EXPECT_EQ(std::filesystem::path(files[0].second).parent_path(), cache);
  EXPECT_TRUE(std::filesystem::is_regular_file(files[0].second));
  for (int32_t t : tokens) EXPECT_TRUE(t >= 0 && t < 300);
}

// sampling = "sequential" (docs/experiments.md): window w = index * batch + row starts at
// (w mod W) * seq of its split, W the whole windows of seq + 1 tokens in the split.
TEST(Data, SequentialSamplingTakesWindowsInOrderAndWraps) {
  std::string bytes;
  for (int i = 0; i < 100; ++i) {  // token i is i: a window's start is its first token
    const uint16_t t = static_cast<uint16_t>(i);
    bytes.append(reinterpret_cast<const char*>(&t), 2);
  }
  test::write_temp("ramp.u16", bytes);
  // 100 tokens, validation_fraction 0.2: training [0, 80), validation [80, 100).
  Loaded l = load(
      "type = \"tokens\"\npath = \"ramp.u16\"\nformat = \"uint16\"\nvocab_size = 100\n"
      "validation_fraction = 0.2\nsampling = \"sequential\"");
  std::vector<int32_t> in(16), tg(16);
  const auto starts = [&](Split split, int64_t index) {
    l.ds->batch(split, index, 2, 8, in.data(), tg.data());
    for (int r = 0; r < 2; ++r)
      for (int t = 0; t < 8; ++t) {
        EXPECT_EQ(in[r * 8 + t], in[r * 8] + t);
        EXPECT_EQ(tg[r * 8 + t], in[r * 8] + t + 1);
      }
    return std::vector<int32_t>{in[0], in[8]};
  };
  // Training: W = floor(79 / 8) = 9 windows at 0, 8, ..., 64; window 9 is window 0 again.
  EXPECT_EQ(starts(Split::kTrain, 0), (std::vector<int32_t>{0, 8}));
  EXPECT_EQ(starts(Split::kTrain, 1), (std::vector<int32_t>{16, 24}));
  EXPECT_EQ(starts(Split::kTrain, 4), (std::vector<int32_t>{64, 0}));
  EXPECT_EQ(starts(Split::kTrain, 5), (std::vector<int32_t>{8, 16}));
  // Validation: W = floor(19 / 8) = 2 windows, at 80 and 88.
  EXPECT_EQ(starts(Split::kValidation, 0), (std::vector<int32_t>{80, 88}));
  EXPECT_EQ(starts(Split::kValidation, 1), (std::vector<int32_t>{80, 88}));
  // The last target of the training split stays inside it: window 8 ends at token 72.
  l.ds->batch(Split::kTrain, 4, 2, 8, in.data(), tg.data());
  EXPECT_EQ(tg[7], 72);

  // The default stays random: seeded positions, not the sequential ones.
  Loaded r = load(
      "type = \"tokens\"\npath = \"ramp.u16\"\nformat = \"uint16\"\nvocab_size = 100\n"
      "validation_fraction = 0.2");
  r.ds->batch(Split::kTrain, 1, 2, 8, in.data(), tg.data());
  EXPECT_NE((std::vector<int32_t>{in[0], in[8]}), (std::vector<int32_t>{16, 24}));
  EXPECT_THROW(load("type = \"tokens\"\npath = \"ramp.u16\"\nformat = \"uint16\"\nvocab_size = 100\n"
                    "sampling = \"shuffled\""),
               ConfigError);
}

}  // namespace
}  // namespace data_test
}  // namespace bench
