// The `bench` command line: run, validate, list, results, query.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "bench/build_info.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace bench::cli;
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
  run_cmd->add_option("--device", run.device, "auto, cpu or cuda (default: the experiment's `device`)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  run_cmd->add_option("--threads", run.threads, "CPU worker threads (default: the experiment's, else all cores)")
      ->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--format", run.format, "format of the results printed at the end")
      ->check(CLI::IsMember({"table", "csv", "json", "markdown"}))
      ->capture_default_str();

  std::string validate_file, validate_device;
  auto* validate_cmd = app.add_subcommand("validate", "check an experiment file without running it");
  validate_cmd->add_option("file", validate_file, "experiment file (TOML)")->required();
  validate_cmd->add_option("--device", validate_device, "auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));

  std::string list_what = "components", list_experiment;
  auto* list_cmd = app.add_subcommand("list", "list plugins, components (with their parameters) or kernels");
  list_cmd->add_option("what", list_what, "plugins, components or kernels")
      ->check(CLI::IsMember({"plugins", "components", "kernels"}))
      ->capture_default_str();
  list_cmd->add_option("--experiment", list_experiment, "also load the plugin_paths of this experiment");

  int64_t results_run = 0;
  std::string results_format = "table";
  auto* results_cmd = app.add_subcommand("results", "print the results of a run (default: the latest)");
  results_cmd->add_option("--run", results_run, "run id");
  results_cmd->add_option("--format", results_format, "table, csv, json or markdown")
      ->check(CLI::IsMember({"table", "csv", "json", "markdown"}))
      ->capture_default_str();

  std::string sql, query_format = "table";
  auto* query_cmd = app.add_subcommand("query", "run read-only SQL on the results database");
  query_cmd->add_option("sql", sql, "one SQL statement")->required();
  query_cmd->add_option("--format", query_format, "table, csv, json or markdown")
      ->check(CLI::IsMember({"table", "csv", "json", "markdown"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kBadInput;
  }
  if (run_cmd->parsed()) return cmd_run(g, run);
  if (validate_cmd->parsed()) return cmd_validate(g, validate_file, validate_device);
  if (list_cmd->parsed()) return cmd_list(g, list_what, list_experiment);
  if (results_cmd->parsed()) return cmd_results(g, results_run, results_format);
  if (query_cmd->parsed()) return cmd_query(g, sql, query_format);
  return kBadInput;
}
