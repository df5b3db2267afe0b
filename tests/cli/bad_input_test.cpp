// The corpus of broken experiment files (tests/cli/bad/*.toml; tests/cli/bad/EXPECTED holds the
// start of the error each must give, file name first). For every file, `bench validate` and
// `bench run` print exactly one line on stderr, starting with the file and, where the input has
// one, the line and column; exit with status 2; and leave an existing database byte for byte as it
// was. Inputs that are not in the corpus (a missing file, a directory) are checked alongside.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "support/shell.h"

namespace bench {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(BENCH_SOURCE_DIR) / "tests" / "cli" / "bad";

/// file name -> the start of its error message, as EXPECTED writes it ("name.toml:3:1: ...").
std::map<std::string, std::string> expected_errors() {
  std::map<std::string, std::string> e;
  std::istringstream in(test::read_file((kCorpus / "EXPECTED").string()));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t colon = line.find(':');
    e[line.substr(0, colon)] = line;
  }
  return e;
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

  static void expect_refused(const std::string& file, const std::string& expected_start) {
    for (const std::string& args : {"-q validate " + file, "-q --db " + db_ + " run " + file}) {
      const test::Output r = test::bench_cli(args);
      EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
      EXPECT_EQ(r.err.rfind(expected_start, 0), 0u) << args << "\nexpected: " << expected_start << "\ngot: " << r.err;
      EXPECT_TRUE(!r.err.empty() && r.err.find('\n') == r.err.size() - 1) << "not one line: " << r.err;
      EXPECT_EQ(r.out, "") << args;
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

TEST_F(BadInput, EveryFileIsOneLineExitTwoAndTouchesNoDatabase) {
  for (const auto& [name, message] : expected_errors()) {
    SCOPED_TRACE(name);
    const std::string path = (kCorpus / name).string();
    // EXPECTED names the file relative to the corpus; bench names it as it was given.
    expect_refused(path, (kCorpus / message).string());
  }
}

TEST_F(BadInput, MissingFilesAndDirectoriesAreOneLine) {
  expect_refused("/nonexistent/experiment.toml", "/nonexistent/experiment.toml: ");
  expect_refused(kCorpus.string(), kCorpus.string() + ": ");
}

}  // namespace
}  // namespace bench
