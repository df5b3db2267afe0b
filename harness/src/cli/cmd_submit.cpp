// `bench submit FILE --slurm`: a Slurm job array with one shard of the sweep per array task, each
// writing its own database, and a merge job that waits for the array (afterany) and merges the
// shards into --db. Re-submitting the same file skips the shards that completed and resumes the
// others (`bench run --resume auto`).
#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "bench/error.h"
#include "bench/sha256.h"
#include "cli/commands.h"
#include "cli/prepare.h"
#include "cli/signals.h"
#include "experiment/shard.h"
#include "store/runs.h"
#include "store/store.h"

namespace bench::cli {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kDefaultMaxShards = 8;

/// A word for a bash script, single-quoted.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

/// Slurm's --array list of shard indices, runs collapsed: "0-3,5,7-8".
std::string array_list(const std::vector<int64_t>& shards) {
  std::string out;
  for (size_t i = 0; i < shards.size();) {
    size_t j = i;
    while (j + 1 < shards.size() && shards[j + 1] == shards[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(shards[i]) + (j > i ? "-" + std::to_string(shards[j]) : "");
    i = j + 1;
  }
  return out;
}

/// Runs `argv` (found on PATH) and returns its standard output; throws naming the command when it
/// cannot start or exits non-zero.
std::string capture(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) throw Error("cannot create a pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (auto& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  pid_t pid = 0;
  const SpawnSignals attrs;
  const int rc = posix_spawnp(&pid, raw[0], &actions, attrs.get(), raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string out;
  if (rc == 0) {
    char buf[4096];
    ssize_t n = 0;
    while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
      if (n > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  if (rc != 0) throw Error(fmt::format("cannot run `{}`: {} (is Slurm installed here?)", cmd, std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error(fmt::format("lost `{}`", cmd));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(fmt::format("`{}` failed (exit status {}); its messages are above", cmd,
                            WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  return out;
}

/// The job id of `sbatch --parsable` output ("123" or "123;cluster").
std::string job_id(const std::string& parsable) {
  std::string id = parsable.substr(0, parsable.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789_") != std::string::npos)
    throw Error(fmt::format("sbatch printed '{}', not a job id", parsable));
  return id;
}

/// Whether shard `index` of `sweep` completed in the database `db`.
bool shard_completed(const fs::path& db, const std::string& sweep, int64_t index) {
  std::error_code ec;
  if (!fs::exists(db, ec)) return false;
  try {
    const store::Store s(db.string(), store::Store::Mode::kReadOnly);
    return store::shard_completed(s, sweep, index);
  } catch (const Error&) {
    return false;  // unreadable or older: the task resumes or starts it, and says why
  }
}

void write_script(const fs::path& path, const std::string& text) {
  write_output(path.string(), text);
  fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add);
}

}  // namespace

int cmd_submit(const GlobalOptions& g, const SubmitArgs& o) {
  try {
    const Prepared p = prepare(o.file, o.device);  // a file that cannot run is refused here, not on the cluster
    const auto n_cases = static_cast<int64_t>(p.cases.size());
    int64_t shards = o.array_size > 0 ? o.array_size : std::min(n_cases, kDefaultMaxShards);
    if (shards > n_cases) {
      if (!g.quiet)
        std::fprintf(
            stderr, "%s\n",
            fmt::format("--array-size {}: the experiment has only {} cases; using {} shards", shards, n_cases, n_cases)
                .c_str());
      shards = n_cases;
    }
    const std::string sweep = o.sweep.empty() ? default_sweep_id(p.file.name, p.file.text, shards) : o.sweep;
    const fs::path out_db = fs::absolute(g.db).lexically_normal();
    const fs::path dir =
        fs::absolute(o.dir.empty() ? out_db.parent_path() / "sweeps" / sweep : fs::path(o.dir)).lexically_normal();
    std::error_code ec;
    fs::create_directories(dir / "logs", ec);
    if (ec) throw Error(fmt::format("cannot create {}: {}", (dir / "logs").string(), ec.message()));
    const fs::path file = fs::absolute(o.file).lexically_normal();
    const fs::path bench = fs::read_symlink("/proc/self/exe", ec);
    if (ec) throw Error("cannot find the bench executable (/proc/self/exe)");

    std::vector<int64_t> pending;
    std::vector<int64_t> done;
    for (int64_t k = 0; k < shards; ++k)
      (shard_completed(dir / fmt::format("shard-{}.db", k), sweep, k) ? done : pending).push_back(k);

    std::string common;  // #SBATCH lines of both jobs
    if (!o.partition.empty()) common += "#SBATCH --partition=" + o.partition + "\n";
    if (!o.account.empty()) common += "#SBATCH --account=" + o.account + "\n";
    for (const auto& a : o.sbatch_args) common += "#SBATCH " + a + "\n";

    std::string run_args = fmt::format("--shard \"$shard/{}\" --sweep {} --resume auto", shards, quoted(sweep));
    if (!o.device.empty()) run_args += " --device " + o.device;
    if (o.gpus_per_task > 1) {
      std::string list;
      for (int64_t d = 0; d < o.gpus_per_task; ++d) list += (d ? "," : "") + std::to_string(d);
      run_args += " --devices " + list;  // CUDA_VISIBLE_DEVICES is the task's GPUs: 0..G-1 among them
    } else {
      run_args += " --threads \"${SLURM_CPUS_PER_TASK:-1}\"";
    }
    const std::string sha = sha256_hex(p.file.text);
    std::string array = fmt::format(
        "#!/bin/bash\n"
        "# Written by `bench submit` for sweep {sweep}: {n} cases of {file} in {shards} shards, one per array\n"
        "# task; each task writes {dir}/shard-<I>.db. Resubmitting skips the completed shards and resumes the\n"
        "# others. The merge job (merge.sbatch) combines them into {out}.\n"
        "#SBATCH --job-name=bench-{name}\n"
        "#SBATCH --array={array}\n"
        "#SBATCH --ntasks=1\n"
        "#SBATCH --output={dir}/logs/shard-%a.out\n",
        fmt::arg("sweep", sweep), fmt::arg("n", n_cases), fmt::arg("file", file.string()), fmt::arg("shards", shards),
        fmt::arg("dir", dir.string()), fmt::arg("out", out_db.string()), fmt::arg("name", p.file.name),
        fmt::arg("array", pending.empty() ? std::string("0") : array_list(pending)));
    if (o.cpus_per_task > 0) array += fmt::format("#SBATCH --cpus-per-task={}\n", o.cpus_per_task);
    if (o.gpus_per_task > 0) array += fmt::format("#SBATCH --gpus-per-task={}\n", o.gpus_per_task);
    if (!o.time.empty()) array += "#SBATCH --time=" + o.time + "\n";
    array += common;
    array += fmt::format(
        "set -euo pipefail\n"
        "shard=${{SLURM_ARRAY_TASK_ID:?submit this script with sbatch: it is a job array}}\n"
        "if [ \"$(sha256sum {file} | cut -d' ' -f1)\" != {sha} ]; then\n"
        "  echo \"bench submit: {file} changed since it was submitted; submit it again\" >&2\n"
        "  exit 2\n"
        "fi\n"
        "exec {bench} --db {dir}/shard-\"$shard\".db run {file} {args}\n",
        fmt::arg("file", quoted(file.string())), fmt::arg("sha", sha), fmt::arg("bench", quoted(bench.string())),
        fmt::arg("dir", quoted(dir.string())), fmt::arg("args", run_args));
    std::string merge = fmt::format(
        "#!/bin/bash\n"
        "# Written by `bench submit` for sweep {sweep}: merges the shards' databases into {out} once the\n"
        "# array job has ended (afterany: also when some task failed; the merged run then says which\n"
        "# shards or cases are missing).\n"
        "#SBATCH --job-name=bench-{name}-merge\n"
        "#SBATCH --ntasks=1\n"
        "#SBATCH --output={dir}/logs/merge.out\n"
        "{common}"
        "set -euo pipefail\n"
        "shopt -s nullglob\n"
        "dbs=({qdir}/shard-*.db)\n"
        "if [ ${{#dbs[@]}} -eq 0 ]; then\n"
        "  echo \"bench submit: no shard database in {dir}: no array task got as far as starting\" >&2\n"
        "  exit 1\n"
        "fi\n"
        "exec {bench} merge {qout} \"${{dbs[@]}}\"\n",
        fmt::arg("sweep", sweep), fmt::arg("out", out_db.string()), fmt::arg("name", p.file.name),
        fmt::arg("dir", dir.string()), fmt::arg("common", common), fmt::arg("qdir", quoted(dir.string())),
        fmt::arg("bench", quoted(bench.string())), fmt::arg("qout", quoted(out_db.string())));
    const fs::path array_path = dir / "array.sbatch", merge_path = dir / "merge.sbatch";
    write_script(array_path, array);
    write_script(merge_path, merge);

    std::printf("%s\n", array_path.c_str());
    if (!g.quiet) {
      std::fprintf(stderr, "%s\n",
                   fmt::format("sweep {}: {} cases in {} shards; {} shard(s) to run{}, {} completed before", sweep,
                               n_cases, shards, pending.size(),
                               pending.empty() ? "" : " (array " + array_list(pending) + ")", done.size())
                       .c_str());
      std::fprintf(stderr, "%s\n", fmt::format("merge job: {} -> {}", merge_path.string(), out_db.string()).c_str());
    }
    if (o.dry_run) {
      if (!g.quiet) std::fprintf(stderr, "--dry-run: nothing submitted\n");
      return kOk;
    }
    std::string dependency;
    if (!pending.empty()) {
      const std::string array_job = job_id(capture({"sbatch", "--parsable", array_path.string()}));
      std::printf("array job %s\n", array_job.c_str());
      dependency = "--dependency=afterany:" + array_job;
    }
    std::vector<std::string> merge_cmd = {"sbatch", "--parsable"};
    if (!dependency.empty()) merge_cmd.push_back(dependency);
    merge_cmd.push_back(merge_path.string());
    const std::string merge_job = job_id(capture(merge_cmd));
    std::printf("merge job %s\n", merge_job.c_str());
    return kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

}  // namespace bench::cli
