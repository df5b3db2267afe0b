// The corpus of broken experiment files (tests/cli/bad/*.toml; tests/cli/bad/EXPECTED holds the
// start of the error each must give, file name first: one line per mistake, in file order). For
// every file, `bench validate` prints each mistake on its own line on stderr and `bench run` one
// line, the first mistake's, with the count of the others ("(and 2 more; bench validate lists
// them)"); each line starts with the file and, where the input has one, the line and column; both
// exit with status 2 and leave an existing database byte for byte as it was. Inputs that are not in
// the corpus (a missing file, a directory) are checked alongside.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/shell.h"

namespace bench {
namespace bad_input_test {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(BENCH_SOURCE_DIR) / "tests" / "cli" / "bad";

/// file name -> the start of each of its error messages in file order, as EXPECTED writes them
/// ("name.toml:3:1: ...").
std::map<std::string, std::vector<std::string>> expected_errors() {
  std::map<std::string, std::vector<std::string>> e;
  std::istringstream in(test::read_file((kCorpus / "EXPECTED").string()));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t colon = line.find(':');
    e[line.substr(0, colon)].push_back(line);
  }
  return e;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A database with one finished run in it: every refusal below must leave it untouched.
    db_ = test::write_temp("bad_input.db", "");
    fs::remove(db_);
    const std::string ok = test::write_temp("bad_input_ok.toml",
                                            "name = \"ok\"\n[model]\nd_model = 16\nn_layers = 1\nn_heads = 2\n"
                                            "seq_len = 8\nbatch_size = 2\n[stability]\nsteps = 3\neval_batches = 1\n");
    const test::Output r = test::bench_cli("-q --db " + db_ + " run " + ok);
    ASSERT_EQ(r.code, 0) << r.err;
    bytes_ = test::read_file(db_);
    ASSERT_GT(bytes_.size(), 0u);
  }

  /// `expected`: the start of each mistake's line, in file order.
  static void expect_refused(const std::string& file, const std::vector<std::string>& expected) {
    // validate: a line per mistake.
    const test::Output v = test::bench_cli("-q validate " + file);
    EXPECT_EQ(v.code, 2) << v.err;
    EXPECT_EQ(v.out, "");
    EXPECT_TRUE(!v.err.empty() && v.err.back() == '\n') << v.err;
    const std::vector<std::string> lines = lines_of(v.err);
    EXPECT_EQ(lines.size(), expected.size()) << v.err;
    for (size_t i = 0; i < std::min(lines.size(), expected.size()); ++i)
      EXPECT_EQ(lines[i].rfind(expected[i], 0), 0u) << "validate\nexpected: " << expected[i] << "\ngot: " << lines[i];
    // run: one line, the first mistake, and how many more.
    const test::Output r = test::bench_cli("-q --db " + db_ + " run " + file);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(!r.err.empty() && r.err.find('\n') == r.err.size() - 1) << "not one line: " << r.err;
    EXPECT_EQ(r.err.rfind(expected.front(), 0), 0u) << "run\nexpected: " << expected.front() << "\ngot: " << r.err;
    const std::string more = " (and " + std::to_string(expected.size() - 1) + " more; bench validate lists them)\n";
    if (expected.size() > 1) {
      EXPECT_TRUE(r.err.ends_with(more)) << r.err;
      EXPECT_EQ(r.err.substr(0, r.err.size() - more.size()), lines.empty() ? "" : lines.front())
          << "run's line is validate's first";
    } else {
      EXPECT_EQ(r.err.find("more; bench validate lists them"), std::string::npos) << r.err;
    }
    EXPECT_TRUE(test::read_file(db_) == bytes_) << file << " changed the database";
    EXPECT_FALSE(fs::exists(db_ + "-journal")) << file;
  }

  static std::string db_;
  static std::string bytes_;
};

std::string BadInput::db_;
std::string BadInput::bytes_;

TEST_F(BadInput, CorpusAndExpectationsMatch) {
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(kCorpus))
    if (e.path().extension() == ".toml") files.insert(e.path().filename().string());
  EXPECT_GE(files.size(), 40u);
  std::set<std::string> listed;
  for (const auto& [name, message] : expected_errors()) listed.insert(name);
  EXPECT_EQ(files, listed) << "every file in tests/cli/bad needs a line in EXPECTED, and every line a file";
}

TEST_F(BadInput, EveryMistakeIsALineOfValidateRunIsOneLineExitTwoAndTouchesNoDatabase) {
  size_t several = 0;
  for (const auto& [name, messages] : expected_errors()) {
    SCOPED_TRACE(name);
    const std::string path = (kCorpus / name).string();
    // EXPECTED names the file relative to the corpus; bench names it as it was given.
    std::vector<std::string> expected;
    for (const std::string& m : messages) expected.push_back((kCorpus / m).string());
    expect_refused(path, expected);
    several += messages.size() > 1 ? 1 : 0;
  }
  EXPECT_GE(several, 2u) << "the corpus has files with several mistakes";
}

TEST_F(BadInput, MissingFilesAndDirectoriesAreOneLine) {
  expect_refused("/nonexistent/experiment.toml", {"/nonexistent/experiment.toml: "});
  expect_refused(kCorpus.string(), {kCorpus.string() + ": "});
}

}  // namespace
}  // namespace bad_input_test
}  // namespace bench
