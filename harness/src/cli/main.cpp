// The `bench` command line: run, validate, list, results, query, compare, report, calc, export, demo,
// eval, merge, submit.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "bench/build_info.h"
#include "cli/commands.h"
#include "cli/signals.h"

namespace {

/// --format of a command that prints a sheet: table, csv, json or markdown.
void add_sheet_format(CLI::App* cmd, std::string& format, const std::string& help = "table, csv, json or markdown") {
  cmd->add_option("--format", format, help)
      ->check(CLI::IsMember({"table", "csv", "json", "markdown"}))
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace bench::cli;
  start_signal_thread();  // first: every thread started later inherits the blocked SIGINT and SIGTERM
  CLI::App app{"bench: ablation benchmarks of transformer architecture variants (throughput and stability)"};
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version",
                       std::string("bench ") + bench::build_info().version + " (" + bench::build_info().git_sha + ")");
  GlobalOptions g;
  app.add_option("--db", g.db, "results database (SQLite)")->capture_default_str();
  app.add_flag("-q,--quiet", g.quiet, "no progress or notes on stderr");

  RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "run an experiment and store its results");
  run_cmd->add_option("file", run.file, "experiment file (TOML)")->required();
  run_cmd
      ->add_option("--device", run.device, "auto, cpu, cuda, guarded or emulated (default: the experiment's `device`)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "guarded", "emulated"}));
  run_cmd
      ->add_option("--threads", run.threads,
                   "CPU worker threads (default: the experiment's, else one per CPU the process may use: affinity mask "
                   "and cgroup quota; 0: that default)")
      ->check(CLI::NonNegativeNumber);
  add_sheet_format(run_cmd, run.format, "format of the results printed at the end");
  run_cmd->add_option("--resume", run.resume,
                      "RUN: resume this run (id) of the same experiment file: run only its cases that are missing or "
                      "did not finish (neither completed nor diverged); auto: the latest run of this file (and "
                      "shard) if it did not complete, nothing if it did, else a new run");
  run_cmd->add_flag("--isolate", run.isolate,
                    "run each case in its own child process: a plugin that crashes or aborts fails only its case");
  run_cmd->add_option("--shard", run.shard,
                      "I/N: run only shard I of N (0 <= I < N), a deterministic share of the cases that does not "
                      "depend on their order in the file; combine the shards' databases with `bench merge`");
  run_cmd->add_option("--sweep", run.sweep,
                      "the sweep id of --shard, shared by its shards (default: <experiment>-<sha of the text>-of<N>)");
  auto* jobs_opt =
      run_cmd->add_option("--jobs", run.jobs, "run K cases at once, each in its own process with its own cores (CPU)")
          ->check(CLI::PositiveNumber);
  run_cmd
      ->add_option("--devices", run.devices,
                   "run cases at once, one process per CUDA device of this list (e.g. 0,1,2,3), each seeing only "
                   "its device")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber)
      ->excludes(jobs_opt);
  run_cmd->add_option("--jsonl", run.jsonl,
                      "also write each case's result, as it ends, as one line of JSON to this file (- for stdout, "
                      "instead of the table at the end)");
  // The child of --isolate / --jobs / --devices: one case from a task file (not for direct use).
  std::string case_task, case_result;
  auto* run_case_cmd = app.add_subcommand("run-case", "")->group("");
  run_case_cmd->add_option("task", case_task)->required();
  run_case_cmd->add_option("result", case_result)->required();

  std::string validate_file, validate_device;
  auto* validate_cmd = app.add_subcommand("validate", "check an experiment file without running it");
  validate_cmd->add_option("file", validate_file, "experiment file (TOML)")->required();
  validate_cmd->add_option("--device", validate_device, "auto, cpu, cuda, guarded or emulated")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "guarded", "emulated"}));

  std::string list_what = "components", list_experiment;
  auto* list_cmd =
      app.add_subcommand("list", "list plugins, components (with their parameters), attention cores or kernels");
  list_cmd->add_option("what", list_what, "plugins, components, cores or kernels")
      ->check(CLI::IsMember({"plugins", "components", "cores", "kernels"}))
      ->capture_default_str();
  list_cmd->add_option("--experiment", list_experiment, "also load the plugin_paths of this experiment");

  RunChoice results_run;
  std::string results_format = "table";
  auto* results_cmd = app.add_subcommand("results", "print the results of a run (default: the latest)");
  auto* results_run_opt = results_cmd->add_option("--run", results_run.run, "run id");
  results_cmd->add_option("--experiment", results_run.experiment, "the latest run of this experiment")
      ->excludes(results_run_opt);
  add_sheet_format(results_cmd, results_format);
  ProfileChoice results_profile;
  auto* profile_flag = results_cmd->add_flag(
      "--profile", results_profile.show,
      "instead of the results: each throughput case's slowest kernels against the measured ceilings (GB/s, "
      "GFLOP/s, memory- or compute-bound) and its time by slot");
  results_cmd->add_option("--mode", results_profile.mode, "with --profile: the mode whose profile is shown")
      ->needs(profile_flag)
      ->capture_default_str();
  auto* top_opt = results_cmd->add_option("--top", results_profile.top, "with --profile: kernels shown per case")
                      ->check(CLI::PositiveNumber)
                      ->needs(profile_flag)
                      ->capture_default_str();
  results_cmd->add_flag("--all", results_profile.all, "with --profile: every kernel of each case")
      ->needs(profile_flag)
      ->excludes(top_opt);

  std::string sql, query_format = "table";
  auto* query_cmd = app.add_subcommand("query", "run read-only SQL on the results database");
  query_cmd->add_option("sql", sql, "one SQL statement")->required();
  add_sheet_format(query_cmd, query_format);

  CompareArgs cmp;
  auto* compare_cmd = app.add_subcommand(
      "compare",
      "compare B against the baseline A: two runs (ids), or with --run two sets of cases of one run, selected by "
      "label words (\"norm=rmsnorm\") or ordinal (#3)");
  compare_cmd->add_option("a", cmp.a, "baseline: a run id, or with --run a case selector")->required();
  compare_cmd->add_option("b", cmp.b, "compared: a run id, or with --run a case selector")->required();
  compare_cmd->add_option("--run", cmp.run, "compare cases of this run");
  compare_cmd
      ->add_option("--metric", cmp.metrics,
                   "metrics to compare (repeat or comma-separate): median_ms, tokens_per_s, gflops_per_s, "
                   "mfu_percent, peak_mb, or a stability metric name (final_loss ...); default: median_ms, "
                   "tokens_per_s, final_loss, best_loss, spike_count, max_attn_logit")
      ->delimiter(',');
  add_sheet_format(compare_cmd, cmp.format);
  compare_cmd->add_flag("--fail-if-regression", cmp.fail_if_regression,
                        "exit with status 1 when any compared metric is a clear regression (slower or worse)");
  compare_cmd->add_option("--alpha", cmp.alpha, "significance level of the test")
      ->check(CLI::Range(1e-6, 0.5))
      ->capture_default_str();
  compare_cmd->add_option("--min-effect", cmp.min_effect, "smallest relative change that counts (0.02 = 2 %)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();

  ReportArgs rep;
  auto* report_cmd = app.add_subcommand("report", "write a run as one self-contained HTML file with plots");
  auto* report_run_opt = report_cmd->add_option("run", rep.run.run, "run id (default: the latest)");
  report_cmd->add_option("--experiment", rep.run.experiment, "the latest run of this experiment")
      ->excludes(report_run_opt);
  report_cmd->add_option("-o,--output", rep.output,
                         "HTML file to write (default: report-<run>.html next to the database; - for stdout)");

  CalcArgs calc;
  auto* calc_cmd = app.add_subcommand(
      "calc",
      "parameters, FLOPs per token, KV-cache bytes and shape ratios of an experiment's models or of real "
      "models, without running anything");
  auto* calc_file =
      calc_cmd->add_option("file", calc.file, "experiment file (TOML), or a Hugging Face config.json or its folder");
  auto* calc_model = calc_cmd->add_option("--model", calc.model, "a built-in real model, e.g. \"Llama 2 70B\"");
  auto* calc_all = calc_cmd->add_flag("--all", calc.all, "every built-in real model");
  calc_file->excludes(calc_model, calc_all);
  calc_model->excludes(calc_all);
  calc_cmd->add_option("--context", calc.context, "context length (default: the model's)")->check(CLI::PositiveNumber);
  calc_cmd->add_option("--batch", calc.batch, "sequences in the KV cache (default: 1; experiments: batch_size)")
      ->check(CLI::PositiveNumber);
  calc_cmd->add_option("--kv-dtype", calc.dtype, "KV-cache element type: bf16, fp16, fp32, fp8 or int8")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32", "fp8", "int8"}))
      ->capture_default_str();
  calc_cmd
      ->add_option("--device", calc.device,
                   "which overrides of an experiment apply: auto, cpu, cuda, guarded or emulated")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "guarded", "emulated"}))
      ->capture_default_str();
  add_sheet_format(calc_cmd, calc.format);

  ExportArgs exp;
  auto* export_cmd = app.add_subcommand("export", "a run as long (tidy) tables for pandas or a spreadsheet");
  auto* export_run_opt = export_cmd->add_option("run", exp.run.run, "run id (default: the latest)");
  export_cmd->add_option("--experiment", exp.run.experiment, "the latest run of this experiment")
      ->excludes(export_run_opt);
  export_cmd->add_option("--format", exp.format, "csv or json")
      ->check(CLI::IsMember({"csv", "json"}))
      ->capture_default_str();
  export_cmd->add_option("-o,--output", exp.output, "file to write (default: stdout)");

  std::string demo_name = "all";
  auto* demo_cmd = app.add_subcommand(
      "demo",
      "the lecture's stability demos with our kernels: bf16 cross-entropy under logit drift (z-loss), "
      "attention entropy as q/k grow (QK-norm), soft-capping");
  demo_cmd->add_option("name", demo_name, "zloss, qk_norm, softcap or all")
      ->check(CLI::IsMember({"zloss", "qk_norm", "softcap", "all"}))
      ->capture_default_str();
  bool demo_store = false;
  demo_cmd->add_flag("--store", demo_store, "also store the tables as a run (experiment \"demo\") in --db");

  EvalArgs ev;
  auto* eval_cmd = app.add_subcommand(
      "eval", "loss of a model with given weights over a token file; logits and hidden states as .npy");
  eval_cmd
      ->add_option("--config", ev.config,
                   "experiment file describing the model (TOML), or a Hugging Face config.json or its folder")
      ->required();
  eval_cmd->add_option("--case", ev.case_ordinal, "which case of the file (ordinal) when it has several")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  eval_cmd->add_option("--weights", ev.weights, "safetensors checkpoint (default: the seed's initialization)");
  eval_cmd->add_option("--tokens", ev.tokens, "token file")->required();
  eval_cmd->add_option("--token-format", ev.token_format, "auto, llmc (llm.c/nanoGPT .bin), uint16, uint32 or text")
      ->check(CLI::IsMember({"auto", "llmc", "uint16", "uint32", "text"}))
      ->capture_default_str();
  eval_cmd->add_option("--seq-len", ev.seq_len, "window length (default: the model's seq_len)")
      ->check(CLI::PositiveNumber);
  eval_cmd->add_option("--batch-size", ev.batch_size, "windows per forward")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  eval_cmd->add_option("--threads", ev.threads,
                       "CPU threads (default: one per CPU the process may use: affinity mask and cgroup quota)");
  eval_cmd->add_option("--dump-logits", ev.dump_logits, "write the logits [positions, vocab] to this .npy file");
  eval_cmd->add_option("--dump-hidden", ev.dump_hidden,
                       "write each block's output [n_layers, positions, d_model] to this .npy file");
  eval_cmd->add_option("--format", ev.format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();

  MergeArgs merge;
  auto* merge_cmd = app.add_subcommand(
      "merge",
      "merge results databases into OUT: the shards of a sweep (bench run --shard) become one run, other runs are "
      "copied once; nothing is duplicated, and a mismatch (schema version, experiment text) writes nothing");
  merge_cmd->add_option("output", merge.output, "the database to merge into (created when missing)")->required();
  merge_cmd->add_option("inputs", merge.inputs, "databases to merge")->required();

  SubmitArgs submit;
  auto* submit_cmd = app.add_subcommand(
      "submit",
      "run an experiment on a Slurm cluster: a job array of shards (one per array task) and a merge job into "
      "--db that waits for them");
  submit_cmd->add_option("file", submit.file, "experiment file (TOML)")->required();
  submit_cmd->add_flag("--slurm", submit.slurm, "submit to Slurm (sbatch); the only scheduler so far")->required();
  submit_cmd->add_option("--array-size", submit.array_size, "shards = array tasks (default: min(cases, 8))")
      ->check(CLI::PositiveNumber);
  submit_cmd->add_option("--partition", submit.partition, "Slurm partition");
  submit_cmd
      ->add_option("--gpus-per-task", submit.gpus_per_task,
                   "GPUs of each array task; more than one runs its cases on them at once (--devices)")
      ->check(CLI::NonNegativeNumber);
  submit_cmd->add_option("--cpus-per-task", submit.cpus_per_task, "CPUs of each array task (and its threads)")
      ->check(CLI::PositiveNumber);
  submit_cmd->add_option("--time", submit.time, "time limit of each array task, in Slurm's format (e.g. 2:00:00)");
  submit_cmd->add_option("--account", submit.account, "Slurm account to charge");
  submit_cmd->add_option("--sbatch-arg", submit.sbatch_args,
                         "another #SBATCH option for both scripts, verbatim (repeatable), e.g. --qos=high");
  submit_cmd->add_option("--dir", submit.dir,
                         "directory for the scripts, the shards' databases and the logs, on a file system the "
                         "nodes share (default: sweeps/<sweep id> next to --db)");
  submit_cmd->add_option("--sweep", submit.sweep, "sweep id (default: <experiment>-<sha of the text>-of<N>)");
  submit_cmd
      ->add_option("--device", submit.device,
                   "auto, cpu, cuda, guarded or emulated (default: the experiment's `device`)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "guarded", "emulated"}));
  submit_cmd->add_flag("--dry-run", submit.dry_run,
                       "write the scripts and print what would be submitted; submit nothing");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kBadInput;
  }
  if (run_cmd->parsed()) return cmd_run(g, run);
  if (run_case_cmd->parsed()) return cmd_run_case(case_task, case_result);
  if (validate_cmd->parsed()) return cmd_validate(g, validate_file, validate_device);
  if (list_cmd->parsed()) return cmd_list(g, list_what, list_experiment);
  if (results_cmd->parsed()) return cmd_results(g, results_run, results_format, results_profile);
  if (query_cmd->parsed()) return cmd_query(g, sql, query_format);
  if (compare_cmd->parsed()) return cmd_compare(g, cmp);
  if (report_cmd->parsed()) return cmd_report(g, rep);
  if (calc_cmd->parsed()) return cmd_calc(g, calc);
  if (export_cmd->parsed()) return cmd_export(g, exp);
  if (demo_cmd->parsed()) return cmd_demo(g, demo_name, demo_store);
  if (eval_cmd->parsed()) return cmd_eval(g, ev);
  if (merge_cmd->parsed()) return cmd_merge(g, merge);
  if (submit_cmd->parsed()) return cmd_submit(g, submit);
  return kBadInput;
}
