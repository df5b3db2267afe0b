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
  /// "" (a new run), a run id to resume (run only its cases that are missing or not finished), or
  /// "auto": resume the latest run of this experiment text (and shard) in the database when it did
  /// not complete, do nothing when it did, start a new run when there is none.
  std::string resume;
  bool isolate = false;          ///< run each case in a child process (a crash fails only that case)
  std::string shard;             ///< "I/N": run only shard I of N (experiment/shard.h)
  std::string sweep;             ///< the sweep id of a shard (default: from the experiment text and N)
  int64_t jobs = 0;              ///< run this many cases at once, each in its own process (CPU)
  std::vector<int64_t> devices;  ///< one process per CUDA device, each seeing only its device
  std::string jsonl;             ///< also write each case's result as a JSON line here ("-": stdout)
};

/// `bench merge OUT IN...`.
struct MergeArgs {
  std::string output;
  std::vector<std::string> inputs;
};

/// `bench submit FILE --slurm ...`: a Slurm job array of shards and a dependent merge job.
struct SubmitArgs {
  std::string file;
  bool slurm = false;
  int64_t array_size = 0;  ///< shards (array tasks); 0: min(cases, 8)
  std::string partition;
  int64_t gpus_per_task = 0;
  int64_t cpus_per_task = 0;
  std::string time;  ///< Slurm's --time
  std::string account;
  std::vector<std::string> sbatch_args;  ///< more #SBATCH lines, verbatim
  std::string dir;                       ///< where scripts, shard databases and logs go
  std::string sweep;                     ///< sweep id (default: from the experiment text and N)
  std::string device;
  bool dry_run = false;
};

/// Which run a reading command shows: `run` when non-zero, else the latest of `experiment` when
/// given, else the latest run.
struct RunChoice {
  int64_t run = 0;
  std::string experiment;
};

/// `bench results --profile`: the per-kernel profile of the throughput cases instead of the
/// results tables (docs/results.md, "The profile").
struct ProfileChoice {
  bool show = false;
  std::string mode = "train_step";
  int64_t top = 10;  ///< kernels per case, the slowest first
  bool all = false;  ///< every kernel (overrides top)
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
/// The child of `bench run --isolate / --jobs / --devices` (hidden `bench run-case TASK RESULT`):
/// runs the one case of the task file and writes its result (runners/child.h).
int cmd_run_case(const std::string& task, const std::string& result);
int cmd_validate(const GlobalOptions& g, const std::string& file, const std::string& device);
int cmd_list(const GlobalOptions& g, const std::string& what, const std::string& experiment);
int cmd_results(const GlobalOptions& g, const RunChoice& run, const std::string& format, const ProfileChoice& profile);
int cmd_query(const GlobalOptions& g, const std::string& sql, const std::string& format);
int cmd_compare(const GlobalOptions& g, const CompareArgs& o);
int cmd_report(const GlobalOptions& g, const ReportArgs& o);
int cmd_calc(const GlobalOptions& g, const CalcArgs& o);
int cmd_export(const GlobalOptions& g, const ExportArgs& o);
/// `bench demo NAME [--store]`: the lecture's numeric stability demos (zloss, qk_norm, softcap,
/// all); with --store also one run of experiment "demo" in the database, a case per demo.
int cmd_demo(const GlobalOptions& g, const std::string& name, bool store);
int cmd_eval(const GlobalOptions& g, const EvalArgs& o);
int cmd_merge(const GlobalOptions& g, const MergeArgs& o);
int cmd_submit(const GlobalOptions& g, const SubmitArgs& o);

/// The default sweep id of `bench run --shard I/N` and `bench submit`: the experiment's name, the
/// first 12 hex digits of its text's SHA-256 and N ("norms-1a2b3c4d5e6f-of4"). Shards of one file
/// and one N find each other by it; another text or another N is another sweep.
std::string default_sweep_id(const std::string& experiment_name, const std::string& experiment_text, int64_t shards);

/// Write `text` to `path` ("" or "-": stdout). Throws bench::Error when the file cannot be written.
void write_output(const std::string& path, const std::string& text);

}  // namespace bench::cli
