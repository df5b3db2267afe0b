// Matched budgets end to end: bench validate prints each case's resolved shape, the target and the
// gap; bench run stores every case's budget (and what it was matched to) as metrics.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "store/store.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace match_cli_test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMatched =
    "name = \"matched\"\nseed = 3\nthreads = 1\nmatch = \"params\"\nmatch_width = \"d_ff\"\nmatch_multiple = 8\n"
    "[model]\nd_model = 32\nn_layers = 1\nn_heads = 2\nseq_len = 16\nbatch_size = 2\n"
    "norm = \"rmsnorm\"\nposition = \"rope\"\n"
    "[data]\ntype = \"synthetic\"\nreference_tokens = 4096\n"
    "[stability]\nsteps = 3\neval_batches = 1\n"
    "[[variant]]\nname = \"mlp\"\nmodel.ffn = \"mlp\"\n"
    "[[variant]]\nname = \"swiglu\"\nmodel.ffn = \"swiglu\"\n";

TEST(MatchCli, ValidatePrintsShapesTargetAndGap) {
  const std::string file = test::write_temp("matched.toml", kMatched);
  const test::Output v = test::bench_cli("validate " + file);
  ASSERT_EQ(v.code, 0) << v.err;
  // mlp: d_ff 128; swiglu: 2/3 of it is 85.3, and 88 (the closest multiple of 8) is 3 d 88 = 8,448
  // FFN parameters against 8,192: non-embedding 1 x (4 d^2 + FFN + 2 d) + d + 256 d.
  EXPECT_NE(v.out.find("match params: reference 'mlp', solving d_ff (multiple of 8, tolerance 5.00%)"),
            std::string::npos)
      << v.out;
  EXPECT_NE(v.out.find("d_model=32 n_layers=1 n_heads=2 d_ff=128 batch=2 steps=3  params 20,576 non-emb"),
            std::string::npos)
      << v.out;
  EXPECT_NE(v.out.find("d_model=32 n_layers=1 n_heads=2 d_ff=88 batch=2 steps=3  params 20,832 non-emb"),
            std::string::npos)
      << v.out;
  EXPECT_NE(v.out.find("(target 20,576, gap +1.24%)"), std::string::npos) << v.out;
}

TEST(MatchCli, RunStoresTheBudgetOfEveryCase) {
  const fs::path dir = fs::path(test::write_temp("x", "")).parent_path() / "match_cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string file = test::write_temp("matched_run.toml", kMatched);
  const std::string db = (dir / "r.db").string();
  const test::Output r = test::bench_cli("-q run " + file + " --db " + db);
  ASSERT_EQ(r.code, 0) << r.err;
  const store::Store s(db, store::Store::Mode::kReadOnly);
  std::map<std::string, double> got;  // "variant/metric" -> value
  for (const auto& row : s.query("SELECT c.variant || '/' || m.name, m.value FROM metrics m JOIN cases c ON "
                                 "c.id = m.case_id WHERE m.name IN ('params_non_embedding', 'params_total', "
                                 "'flops_per_token', 'train_tokens', 'train_flops_total', 'match_target', "
                                 "'match_gap')")
                             .rows)
    got[row.at(0).as_string()] = row.at(1).as_double();
  ASSERT_EQ(got.size(), 14u);
  EXPECT_EQ(got["mlp/params_non_embedding"], 20576);
  EXPECT_EQ(got["mlp/params_total"], 20576 + 256 * 32);
  EXPECT_EQ(got["swiglu/params_non_embedding"], 20832);
  EXPECT_EQ(got["mlp/train_tokens"], 3 * 2 * 16);
  EXPECT_DOUBLE_EQ(got["mlp/train_flops_total"], got["mlp/flops_per_token"] * 96);
  EXPECT_GT(got["mlp/flops_per_token"], 6 * 20576);  // 6 N and attention
  EXPECT_EQ(got["swiglu/match_target"], 20576);
  EXPECT_DOUBLE_EQ(got["swiglu/match_gap"], (20832.0 - 20576.0) / 20576.0);
  EXPECT_EQ(got["mlp/match_gap"], 0);
  // The solved width is in the stored configuration too.
  const auto cfg = s.query("SELECT config_json FROM cases WHERE variant = 'swiglu'").rows.at(0).at(0).as_string();
  EXPECT_NE(cfg.find("\"d_ff\":88"), std::string::npos) << cfg;
}

}  // namespace
}  // namespace match_cli_test
}  // namespace bench
