// defines: the `bench` subcommands and the options they share
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench::cli {

/// Exit codes scripts can rely on.
enum ExitCode : int {
  kOk = 0,
  kFailed = 1,    ///< a case or the run failed at run time
  kBadInput = 2,  ///< invalid experiment, arguments, plugin or database
  kInterrupted = 130,
  kTerminated = 143,
};

struct GlobalOptions {
  std::string db = "results/bench.db";
  bool quiet = false;
};

struct RunOptions {
  std::string file;
  std::string device;  ///< empty: the experiment's
  int64_t threads = -1;
  std::string format = "table";
  int64_t resume = 0;       ///< run id to resume: run only its cases that are missing or not finished
  bool isolate = false;     ///< run each case in a child process (a crash fails only that case)
  int64_t child_run = 0;    ///< (internal, --isolate's child) store one case into this run ...
  int64_t child_case = -1;  ///< ... the case with this ordinal
};

/// Which run a reading command shows: `run` when non-zero, else the latest of `experiment` when
/// given, else the latest run.
struct RunChoice {
  int64_t run = 0;
  std::string experiment;
};

struct CompareArgs {
  std::string a, b;  ///< run ids, or case selectors with `run`
  int64_t run = 0;   ///< compare cases of this run
  std::vector<std::string> metrics;
  std::string format = "table";
  bool fail_if_regression = false;
  double alpha = 0.05;
  double min_effect = 0.02;
};

struct ReportArgs {
  RunChoice run;
  std::string output;  ///< empty: report-<run>.html next to the database; "-": stdout
};

struct CalcArgs {
  std::string file;   ///< an experiment file
  std::string model;  ///< a built-in real model
  bool all = false;   ///< every built-in model
  int64_t context = 0;
  int64_t batch = 0;
  std::string dtype = "bf16";
  std::string device = "auto";
  std::string format = "table";
};

struct ExportArgs {
  RunChoice run;
  std::string format = "csv";
  std::string output;  ///< empty or "-": stdout
};

struct EvalArgs {
  std::string config;  ///< experiment (model) file
  int64_t case_ordinal = 0;
  std::string weights;  ///< safetensors; empty: the seed's initialization
  std::string tokens;
  std::string token_format = "auto";
  int64_t seq_len = 0;  ///< 0: the model's
  int64_t batch_size = 1;
  int64_t threads = -1;
  std::string dump_logits;  ///< .npy of [positions, vocab]
  std::string dump_hidden;  ///< .npy of [n_layers, positions, d_model]
  std::string format = "text";
};

int cmd_run(const GlobalOptions& g, const RunOptions& o);
int cmd_validate(const GlobalOptions& g, const std::string& file, const std::string& device);
int cmd_list(const GlobalOptions& g, const std::string& what, const std::string& experiment);
int cmd_results(const GlobalOptions& g, const RunChoice& run, const std::string& format);
int cmd_query(const GlobalOptions& g, const std::string& sql, const std::string& format);
int cmd_compare(const GlobalOptions& g, const CompareArgs& o);
int cmd_report(const GlobalOptions& g, const ReportArgs& o);
int cmd_calc(const GlobalOptions& g, const CalcArgs& o);
int cmd_export(const GlobalOptions& g, const ExportArgs& o);
/// `bench demo NAME [--store]`: the lecture's numeric stability demos (zloss, qk_norm, softcap,
/// all); with --store also one run of experiment "demo" in the database, a case per demo.
int cmd_demo(const GlobalOptions& g, const std::string& name, bool store);
int cmd_eval(const GlobalOptions& g, const EvalArgs& o);

/// Write `text` to `path` ("" or "-": stdout). Throws bench::Error when the file cannot be written.
void write_output(const std::string& path, const std::string& text);

}  // namespace bench::cli
