// A case as a child process receives it (experiment/case_json.h): every shipped experiment's
// cases come back from their JSON with the same resolved configuration, dimensions and parameter
// bits, the same given flags and places — so a relative data path still resolves against the
// experiment's directory — without the experiment file.
#include "experiment/case_json.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/toml_case.h"

namespace bench {
namespace case_json_test {
namespace {

void expect_same(const ResolvedCase& a, const ResolvedCase& b) {
  EXPECT_EQ(resolved_json(a), resolved_json(b));
  const ModelDims &x = a.model.dims, &y = b.model.dims;
  EXPECT_EQ(x.train_seq_len, y.train_seq_len);
  EXPECT_EQ(x.dropout_embedding, y.dropout_embedding);
  EXPECT_EQ(x.dropout_attention, y.dropout_attention);
  EXPECT_EQ(x.dropout_residual, y.dropout_residual);
  EXPECT_EQ(x.loc("d_model").str(), y.loc("d_model").str());
  EXPECT_EQ(a.model.decay_groups, b.model.decay_groups);
  EXPECT_EQ(a.model.backend, b.model.backend);
  for (const Slot s : all_slots()) {
    const SlotChoice& p = s == Slot::kDataset ? a.data : a.model.slot(s);
    const SlotChoice& q = s == Slot::kDataset ? b.data : b.model.slot(s);
    EXPECT_EQ(p.info, q.info) << slot_name(s);
    for (const auto& [name, v] : p.params.values().as_table()) {
      EXPECT_EQ(p.params.given(name), q.params.given(name)) << name;
      EXPECT_EQ(p.params.where(name).str(), q.params.where(name).str()) << name;
    }
  }
  for (const auto& [name, v] : a.runner.values().as_table()) EXPECT_EQ(a.runner.given(name), b.runner.given(name));
}

TEST(CaseJson, EveryShippedCaseComesBackTheSame) {
  size_t checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(BENCH_SOURCE_DIR) + "/experiments")) {
    SCOPED_TRACE(e.path().string());
    const ExperimentFile f = test::read_file_experiment(e.path().string());
    for (const Case& c : expand_cases(f, test::builtin_registry(), "cpu")) {
      ResolvedCase rc = test::resolve(c);
      rc.model.backend = tile::Backend::kGuarded;
      const auto [back, rc2] = case_from_json(case_json(c, rc), test::builtin_registry(), runner_sections());
      EXPECT_EQ(back.ordinal, c.ordinal);
      EXPECT_EQ(back.runner, c.runner);
      EXPECT_EQ(back.variant, c.variant);
      EXPECT_EQ(back.label, c.label);
      EXPECT_EQ(back.axes.json(), c.axes.json());
      expect_same(rc, rc2);
      ++checked;
    }
  }
  EXPECT_GT(checked, 100u);
}

TEST(CaseJson, NumbersKeepTheirBitsAndPathsTheirDirectory) {
  const auto dir = std::filesystem::temp_directory_path() / ("bench_case_json_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "data");
  std::ofstream(dir / "data" / "corpus.txt") << std::string(4096, 'a') + "bcd\n";
  const std::string path = (dir / "exp.toml").string();
  std::ofstream(path) << "[model]\nd_model = 16\nn_heads = 2\ninit_std = 0.1\ndropout_residual = 0.30000000000000004\n"
                         "[data]\ntype = \"text\"\npath = \"data/corpus.txt\"\n[stability]\nlr = 3e-3\nsteps = 7\n";
  const ExperimentFile f = test::read_file_experiment(path);
  const Case c = expand_cases(f, test::builtin_registry(), "cpu").at(0);
  const ResolvedCase rc = test::resolve(c);
  const auto [back, rc2] = case_from_json(case_json(c, rc), test::builtin_registry(), runner_sections());
  expect_same(rc, rc2);
  EXPECT_EQ(rc2.model.dims.dropout_residual, 0.30000000000000004);
  EXPECT_EQ(rc2.runner.number("lr"), 3e-3);
  EXPECT_EQ(rc2.runner.integer("steps"), 7);
  EXPECT_EQ(rc2.data.params.path("path"), (dir / "data" / "corpus.txt").lexically_normal().string());
  EXPECT_THROW(case_from_json("{}", test::builtin_registry(), runner_sections()), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace case_json_test
}  // namespace bench
