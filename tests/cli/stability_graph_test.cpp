// The stability runner's CUDA graphs through the CLI, on the guarded device (where the replays are
// emulated under the rules of capture): plain and logging steps replayed, dropout included, with
// the stored numbers of uncaptured steps; a step that cannot be captured falls back and says why
// (stderr, the case's notes, `bench results`, `bench export`), or fails the case when asked for.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <utility>

#include "store/store.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace stability_graph_test {
namespace {

using Result = test::Output;

Result run(const std::string& args) { return test::bench_cli(args, ""); }

std::string fresh_db(const std::string& name) {
  const std::string db = test::write_temp(name, "");
  std::filesystem::remove(db);
  return db;
}

// What a stability case stores, as text with every double's bits: its steps (but their times),
// series and metrics (but the graph's own and the throughput).
std::string stored_results(store::Store& s) {
  std::string out;
  for (const char* q :
       {"SELECT step, printf('%.17g %.17g %.17g %.17g %.17g %.17g', lr, loss, grad_norm, max_attn_logit, "
        "z_mean, z_loss) FROM steps ORDER BY case_id, step",
        "SELECT name, ifnull(layer, -1), step, printf('%.17g', value) FROM series ORDER BY case_id, "
        "name, layer, step",
        "SELECT name, printf('%.17g', value) FROM metrics WHERE name NOT IN ('cuda_graph', 'graph_fallback/stability', "
        "'graph_steps', 'train_tokens_per_s') ORDER BY case_id, name"})
    for (const auto& row : s.query(q).rows) {
      for (const auto& v : row) out += v.str() + " ";
      out += "\n";
    }
  return out;
}

// The stability loop's graphs on the guarded device: with log_every = 3 over 8 steps, steps 1
// (uncaptured: the plans) and 0 (uncaptured: a logging step's) warm up, 2 (plain) and 3 (logging) are
// captured and replayed, 4 to 7 replayed from one graph or the other; cuda_graph = false runs them
// all uncaptured. The second experiment has norms.toml's settings (every step a logging step, its
// probes and series; pre and post, LayerNorm and RMSNorm, RoPE, SwiGLU): all steps but the first
// replay the logging graph. The third has dropout everywhere: each replay draws its own step's
// masks. Each time the stored steps, series and metrics are bitwise those of the uncaptured run.
// A step that cannot be captured (dropout with the CPU's tiled attention core, which takes its
// seed as an argument) falls back by default, says why on stderr and in the case's notes
// (`bench results`, `bench export`), and fails the case with that reason when cuda_graph = true
// is given.
TEST(Cli, StabilityStepsAreReplayedFromAGraphUnlessTheyCannotBe) {
  const std::string base =
      "name = \"stab_graph\"\nseed = 3\n"
      "[model]\nd_model = 16\nn_layers = 2\nn_heads = 2\nseq_len = 8\nbatch_size = 2\n"
      "[data]\ntype = \"synthetic\"\nreference_tokens = 1024\n"
      "[stability]\nsteps = 8\nlog_every = 3\neval_batches = 1\n";
  const std::string norms_like =
      "name = \"stab_graph_norms\"\nseed = 5\n"
      "[model]\nd_model = 16\nn_layers = 2\nn_heads = 2\nseq_len = 8\nbatch_size = 4\n"
      "norm_position = [\"post\", \"pre\"]\nnorm = [\"layernorm\", \"rmsnorm\"]\nposition = \"rope\"\n"
      "attention = \"causal\"\nffn = \"swiglu\"\n"
      "[data]\ntype = \"synthetic\"\nreference_tokens = 1024\n"
      "[stability]\nsteps = 6\nlr = [3e-3, 3e-2]\nwarmup_fraction = 0.05\nweight_decay = 0.1\ngrad_clip = 1.0\n"
      "eval_batches = 1\n";
  const auto metric_of = [](store::Store& s, const std::string& name) {
    const auto rows = s.query("SELECT value FROM metrics WHERE name = '" + name + "'").rows;
    return rows.empty() ? NAN : rows.at(0).at(0).as_double();
  };
  // Dropout everywhere (embedding, attention, residual), log_every = 2 over 6 steps: steps 0 and
  // 1 warm up, 2 to 5 are replayed, each drawing its own step's masks.
  const std::string dropout =
      "name = \"stab_graph_dropout\"\nseed = 3\n"
      "[model]\nd_model = 16\nn_layers = 2\nn_heads = 2\nseq_len = 8\nbatch_size = 2\ndropout_embedding = 0.1\n"
      "dropout_attention = 0.1\ndropout_residual = 0.1\n"
      "[data]\ntype = \"synthetic\"\nreference_tokens = 1024\n"
      "[stability]\nsteps = 6\nlog_every = 2\neval_batches = 1\n";
  for (const auto& [exp_text, replayed] : {std::pair<std::string, double>{base, 6}, {norms_like, 5}, {dropout, 4}}) {
    SCOPED_TRACE(exp_text);
    std::string stored[2];
    for (int graphs = 0; graphs < 2; ++graphs) {
      const std::string db = fresh_db("stab_graph.db");
      const std::string exp = exp_text + (graphs == 1 ? "" : "cuda_graph = false\n");
      const Result r = run("--db " + db + " -q run --device guarded " + test::write_temp("stab_graph.toml", exp));
      ASSERT_EQ(r.code, 0) << r.err;
      store::Store s(db, store::Store::Mode::kReadOnly);
      for (const auto& row :
           s.query("SELECT name, value FROM metrics WHERE name IN ('cuda_graph', 'graph_steps')").rows)
        EXPECT_EQ(row.at(1).as_double(), row.at(0).as_string() == "cuda_graph" ? graphs : graphs * replayed);
      EXPECT_TRUE(std::isnan(metric_of(s, "graph_fallback/stability")));
      stored[graphs] = stored_results(s);
    }
    EXPECT_NE(stored[0].find("attn_entropy"), std::string::npos);
    EXPECT_NE(stored[0].find("update_rms"), std::string::npos);
    EXPECT_EQ(stored[0], stored[1]);  // the replays are the same steps
  }

  const std::string with_dropout =
      "name = \"stab_dropout\"\nseed = 3\n"
      "[model]\nd_model = 16\nn_layers = 1\nn_heads = 2\nseq_len = 8\nbatch_size = 2\ndropout_attention = 0.1\n"
      "attention = { type = \"causal\", core = \"tiled\" }\n"
      "[data]\ntype = \"synthetic\"\nreference_tokens = 1024\n"
      "[stability]\nsteps = 4\nlog_every = 2\neval_batches = 1\n";
  const std::string db = fresh_db("stab_dropout.db");
  const Result r = run("--db " + db + " run --device guarded " + test::write_temp("stab_dropout.toml", with_dropout));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string why =
      "stability train step not captured into a CUDA graph, run uncaptured: attention core 'tiled' takes its dropout "
      "seed as an argument fixed at capture";
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  {
    store::Store s(db, store::Store::Mode::kReadOnly);
    EXPECT_EQ(metric_of(s, "graph_fallback/stability"), 1.0);
    EXPECT_EQ(metric_of(s, "graph_steps"), 0.0);
    // The reason is stored with the case, shown under `bench results`' table and exported.
    EXPECT_EQ(s.query("SELECT notes FROM cases").rows.at(0).at(0).as_string().rfind(why, 0), 0U);
  }
  const Result shown = run("--db " + db + " results");
  ASSERT_EQ(shown.code, 0) << shown.err;
  EXPECT_NE(shown.out.find("case 0: " + why), std::string::npos) << shown.out;
  const Result exported = run("--db " + db + " export --format json");
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_NE(exported.out.find("\"notes\": \"" + why), std::string::npos) << exported.out.substr(0, 2000);
  const std::string asked = fresh_db("stab_dropout_asked.db");
  const Result f = run("--db " + asked + " -q run --device guarded " +
                       test::write_temp("stab_dropout_asked.toml", with_dropout + "cuda_graph = true\n"));
  EXPECT_EQ(f.code, 1) << f.err;
  store::Store t(asked, store::Store::Mode::kReadOnly);
  const auto cases = t.query("SELECT status, error FROM cases").rows;
  ASSERT_EQ(cases.size(), 1U);
  EXPECT_EQ(cases[0][0].as_string(), "failed");
  EXPECT_NE(cases[0][1].as_string().find("cuda_graph: the stability train step cannot be captured: attention core "
                                         "'tiled'"),
            std::string::npos)
      << cases[0][1].as_string();
}

// One kind of step that cannot be captured gives up its own graph only: a norm that reads its
// output back to the host when the layers are probed (the logging steps) breaks the logging step's
// capture, not the plain step's. With log_every = 3 over 8 steps the plain steps (1, 2, 4, 5: 1
// warms up, 2 is captured) replay their graph, the logging steps (0, 3, 6 and the last, 7) run
// uncaptured; the stored numbers are bitwise those of the uncaptured run, and the case's note says
// which steps ran uncaptured and why.
TEST(Cli, AStepKindThatCannotBeCapturedLeavesTheOtherKindsGraph) {
  const std::string exp_text =
      "name = \"stab_probe_readback\"\nseed = 3\n"
      "[model]\nd_model = 16\nn_layers = 2\nn_heads = 2\nseq_len = 8\nbatch_size = 2\n"
      "norm = \"reads_back_when_probing\"\n"
      "[data]\ntype = \"synthetic\"\nreference_tokens = 1024\n"
      "[stability]\nsteps = 8\nlog_every = 3\neval_batches = 1\n";
  const std::string plugins = "BENCH_PLUGIN_PATH=" + std::string(BENCH_BINARY_DIR) + "/test_plugins/faulty_forward";
  std::string stored[2];
  for (int graphs = 0; graphs < 2; ++graphs) {
    const std::string db = fresh_db("stab_probe_readback.db");
    const std::string exp = exp_text + (graphs == 1 ? "" : "cuda_graph = false\n");
    const Result r = test::bench_cli(
        "--db " + db + " run --device guarded " + test::write_temp("stab_probe_readback.toml", exp), plugins);
    ASSERT_EQ(r.code, 0) << r.err;
    store::Store s(db, store::Store::Mode::kReadOnly);
    const auto metric = [&](const std::string& name) {
      const auto rows = s.query("SELECT value FROM metrics WHERE name = '" + name + "'").rows;
      return rows.empty() ? NAN : rows.at(0).at(0).as_double();
    };
    if (graphs == 1) {
      EXPECT_EQ(metric("cuda_graph"), 1.0);
      EXPECT_EQ(metric("graph_steps"), 3.0);  // steps 2, 4, 5
      EXPECT_EQ(metric("graph_fallback/stability"), 1.0);
      const std::string why = "copy_bytes between the host and a device while a step is captured";
      EXPECT_NE(r.err.find("stability train step not captured into a CUDA graph, run uncaptured: " + why),
                std::string::npos)
          << r.err;
      const std::string notes = s.query("SELECT notes FROM cases").rows.at(0).at(0).as_string();
      EXPECT_EQ(notes.rfind("stability train step not captured into a CUDA graph for its logging steps, which ran "
                            "uncaptured (the others replayed theirs): " +
                                why,
                            0),
                0U)
          << notes;
      EXPECT_EQ(notes.find("between logging steps"), std::string::npos) << notes;
    } else {
      EXPECT_EQ(metric("graph_steps"), 0.0);
    }
    stored[graphs] = stored_results(s);
  }
  EXPECT_EQ(stored[0], stored[1]);  // the replays are the same steps
}

}  // namespace
}  // namespace stability_graph_test
}  // namespace bench
