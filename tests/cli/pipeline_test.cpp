// `bench run`'s results as they flow: the table it prints is made from its own results in memory
// and is what `bench results` reads back; --jsonl gives every case as a line of JSON as it ends; a
// [diagnostics] section is a runner of its own; children (--isolate) store what this process
// stores; the child's subcommand is not part of the help.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runners/registry.h"
#include "store/store.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace pipeline_test {
namespace {

const char* const kExperiment =
    "name = \"flow\"\nseed = 5\n"
    "[model]\nd_model = 16\nn_layers = 2\nn_heads = 2\nseq_len = 8\nbatch_size = 2\n"
    "norm_position = [\"post\", \"pre\"]\n"
    "[data]\ntype = \"synthetic\"\nreference_tokens = 4096\n"
    "[throughput]\nmodes = [\"forward\"]\nrepetitions = 2\nmin_time = 0.01\nwarmup_time = 0.0\nmax_time = 0\n"
    "[stability]\nsteps = 8\nlr = [1e-2, 3e-2]\neval_batches = 1\n"
    "[diagnostics]\nbatches = 2\n";

std::string fresh_db(const std::string& name) {
  const std::string db = test::write_temp(name, "");
  std::filesystem::remove(db);
  return db;
}

int64_t count(const std::string& db, const std::string& sql) {
  const store::Store s(db, store::Store::Mode::kReadOnly);
  return s.query(sql).rows.at(0).at(0).as_int();
}

TEST(Pipeline, TheTablePrintedIsTheTableReadBackAndJsonLinesCarryEveryCase) {
  const std::string exp = test::write_temp("flow.toml", kExperiment);
  const std::string db = fresh_db("flow.db");
  const std::string lines_path = test::write_temp("flow.jsonl", "");
  const test::Output r = test::bench_cli("-q --db " + db + " run " + exp + " --jsonl " + lines_path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, test::bench_cli("--db " + db + " results").out);
  EXPECT_NE(r.out.find("\ndiagnostics\n"), std::string::npos) << r.out;
  // 2 throughput, 4 stability, 2 diagnostics cases; the stability grids get lr_sensitivity.
  EXPECT_EQ(count(db, "SELECT count(*) FROM cases WHERE status = 'completed'"), 8);
  EXPECT_EQ(count(db, "SELECT count(*) FROM cases WHERE runner = 'diagnostics'"), 2);
  EXPECT_EQ(count(db,
                  "SELECT count(*) FROM series s JOIN cases c ON c.id = s.case_id WHERE c.runner = 'diagnostics' AND "
                  "s.name = 'init_grad_norm' AND s.step = -1"),
            4);
  EXPECT_EQ(count(db, "SELECT count(*) FROM steps s JOIN cases c ON c.id = s.case_id WHERE c.runner = 'diagnostics'"),
            0);
  EXPECT_EQ(count(db, "SELECT count(*) FROM metrics WHERE name = 'lr_sensitivity'"), 4);
  {  // every stored figure, the scheduler's budget and finish()'s included, is declared with its unit
    const store::Store s(db, store::Store::Mode::kReadOnly);
    const auto stored = s.query(
        "SELECT DISTINCT c.runner, m.name, coalesce(m.unit, '') FROM metrics m "
        "JOIN cases c ON c.id = m.case_id");
    ASSERT_GT(stored.rows.size(), 40u);
    for (const auto& row : stored.rows) {
      const Runner* runner = find_runner(row.at(0).as_string());
      ASSERT_NE(runner, nullptr) << row.at(0).as_string();
      const MetricSpec* spec = runner->declaration(row.at(1).as_string());
      ASSERT_NE(spec, nullptr) << row.at(0).as_string() << " stores " << row.at(1).as_string() << " undeclared";
      if (!spec->unit_varies) {
        EXPECT_EQ(spec->unit, row.at(2).as_string()) << row.at(1).as_string();
      }
    }
  }
  std::istringstream in(test::read_file(lines_path));
  std::set<int64_t> ordinals;
  int64_t added = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("added")) {
      ++added;
      EXPECT_EQ(j["added"][0]["name"], "lr_sensitivity");
      continue;
    }
    ordinals.insert(j["ordinal"].get<int64_t>());
    EXPECT_EQ(j["result"]["status"], "completed");
    EXPECT_TRUE(j["config"].contains("model"));
  }
  EXPECT_EQ(ordinals.size(), 8u);
  EXPECT_EQ(added, 4);
  // To stdout: the lines instead of the table.
  const test::Output lines = test::bench_cli("-q --db " + fresh_db("flow2.db") + " run " + exp + " --jsonl -");
  ASSERT_EQ(lines.code, 0) << lines.err;
  std::istringstream out(lines.out);
  int64_t n = 0;
  for (std::string line; std::getline(out, line); ++n) EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  EXPECT_EQ(n, 12);
}

TEST(Pipeline, AChildStoresWhatThisProcessStores) {
  const std::string exp = test::write_temp("flow_iso.toml", kExperiment);
  std::string numbers[2];
  const char* flags[2] = {"", " --isolate"};
  for (int i = 0; i < 2; ++i) {
    const std::string db = fresh_db("flow_iso" + std::to_string(i) + ".db");
    const test::Output r = test::bench_cli("-q --db " + db + " run " + exp + flags[i]);
    ASSERT_EQ(r.code, 0) << flags[i] << r.err;
    const store::Store s(db, store::Store::Mode::kReadOnly);
    for (const char* sql :
         {"SELECT c.ordinal, printf('%.17g %.17g', s.loss, s.grad_norm) FROM steps s JOIN cases c ON c.id = s.case_id "
          "ORDER BY c.ordinal, s.step",
          "SELECT c.ordinal, m.name, printf('%.17g', m.value) FROM metrics m JOIN cases c ON c.id = m.case_id WHERE "
          "c.runner != 'throughput' AND m.name NOT LIKE '%tokens_per_s' ORDER BY c.ordinal, m.name",
          "SELECT c.ordinal, s.name, s.layer, s.step, printf('%.17g', s.value) FROM series s JOIN cases c ON "
          "c.id = s.case_id ORDER BY 1, 2, 3, 4",
          "SELECT ordinal, runner, label, config_json, status FROM cases ORDER BY ordinal"})
      for (const auto& row : s.query(sql).rows) {
        for (const Value& v : row) numbers[i] += v.str() + " ";
        numbers[i] += "\n";
      }
  }
  EXPECT_GT(numbers[0].size(), 1000u);
  EXPECT_EQ(numbers[0], numbers[1]);
}

TEST(Pipeline, ValidateCountsEveryRunnersCasesAndTheChildCommandIsNotInTheHelp) {
  const std::string exp = test::write_temp("flow_validate.toml", kExperiment);
  const test::Output v = test::bench_cli("validate " + exp);
  ASSERT_EQ(v.code, 0) << v.err;
  EXPECT_NE(v.out.find(": ok: 8 cases (2 throughput, 4 stability, 2 diagnostics) on cpu"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("diagnostics  norm_position=pre"), std::string::npos) << v.out;
  const test::Output help = test::bench_cli("--help");
  EXPECT_EQ(help.code, 0);
  EXPECT_EQ(help.out.find("run-case"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("validate"), std::string::npos);
  EXPECT_NE(test::bench_cli("run --help").out.find("--jsonl"), std::string::npos);
}

}  // namespace
}  // namespace pipeline_test
}  // namespace bench
