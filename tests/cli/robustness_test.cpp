// End to end, when things go wrong: signals, a run killed with SIGKILL and resumed, a plugin whose
// forward throws, two runs writing one database at once,
// and a learning rate that makes training diverge.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "bench/error.h"
#include "store/store.h"
#include "support/shell.h"
#include "support/toml_case.h"

namespace bench {
namespace robustness_test {
namespace {

const std::string kBench = test::bench_program();
const std::string kFaultyPlugins = std::string(BENCH_BINARY_DIR) + "/test_plugins/faulty_forward";

/// Two throughput cases, then two stability cases of `steps` steps.
std::string tiny(int steps) {
  return "name = \"tiny\"\nseed = 11\n"
         "[model]\nd_model = 32\nn_layers = 2\nn_heads = 2\nseq_len = 16\nbatch_size = 4\n"
         "norm_position = [\"post\", \"pre\"]\n"
         "[data]\ntype = \"synthetic\"\nreference_tokens = 4096\n"
         "[throughput]\nmodes = [\"forward\"]\nrepetitions = 3\nmin_time = 0.01\nwarmup_time = 0.0\nmax_time = 0\n"
         "[stability]\nsteps = " +
         std::to_string(steps) + "\nlr = 1e-2\neval_batches = 2\n";
}

std::string fresh_db(const std::string& name) {
  const std::string db = test::write_temp(name, "");
  std::filesystem::remove(db);
  return db;
}

/// Starts `bench -q --db DB run FILE [EXTRA...]` as a child process.
pid_t start_run(const std::string& db, const std::string& file, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {kBench, "-q", "--db", db, "run", file};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  {
    const test::ChildrenGetTheProcessCpus cpus;
    pid = fork();  // the child execs inside the scope: the guard's destructor runs in the parent only
    if (pid == 0) {
      execv(kBench.c_str(), argv.data());
      _exit(127);
    }
  }
  return pid;
}

int64_t count(const store::Store& s, const std::string& sql) { return s.query(sql).rows.at(0).at(0).as_int(); }

/// Waits (up to a minute) until `db` holds at least `n` cases.
void wait_for_cases(const std::string& db, int64_t n) {
  for (int i = 0; i < 600; ++i) {
    usleep(100 * 1000);
    if (!std::filesystem::exists(db)) continue;
    try {
      store::Store s(db, store::Store::Mode::kReadOnly);
      if (count(s, "SELECT count(*) FROM cases") >= n) return;
    } catch (const Error&) {
    }
  }
}

/// The child processes of `pid` (from /proc).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  for (pid_t c = 0; children >> c;) out.push_back(c);
  return out;
}

/// CPU seconds (user + system) that process `pid` has used so far, from /proc/PID/stat.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// Waits (up to two minutes) until `pid` has `n` children, each with at least `cpu` seconds of
/// CPU time since it started: a condition, not a sleep, so a loaded machine only makes it slower.
/// Returns the children.
std::vector<pid_t> wait_for_busy_children(pid_t pid, size_t n, double cpu) {
  std::vector<pid_t> kids;
  for (int i = 0; i < 1200; ++i) {
    kids = children_of(pid);
    if (kids.size() == n && std::all_of(kids.begin(), kids.end(), [&](pid_t c) { return cpu_seconds(c) >= cpu; }))
      return kids;
    usleep(100 * 1000);
  }
  return kids;
}

/// The wait status of `pid`, as 128 + signal when a signal ended it.
int exit_code(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(Robustness, TerminateMarksTheRunInterruptedAndExits143) {
  const std::string exp = test::write_temp("term.toml", tiny(100000));
  const std::string db = fresh_db("term.db");
  const pid_t pid = start_run(db, exp);
  wait_for_cases(db, 2);
  usleep(300 * 1000);
  {
    // A live bench process: opening the database for writing does not take its run for stale.
    store::Store rw(db);
    EXPECT_TRUE(rw.stale_runs_failed().empty());
    EXPECT_EQ(rw.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "running");
  }
  kill(pid, SIGTERM);
  EXPECT_EQ(exit_code(pid), 143);
  store::Store s(db, store::Store::Mode::kReadOnly);
  EXPECT_EQ(s.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "interrupted");
  EXPECT_EQ(s.query("SELECT error FROM runs").rows.at(0).at(0).as_string(), "interrupted by signal");
  EXPECT_EQ(count(s, "SELECT count(*) FROM cases WHERE status = 'completed'"), 2);
  EXPECT_EQ(count(s, "SELECT count(*) FROM cases WHERE status = 'interrupted'"), 1);
}

/// The signals blocked by thread `tid` of process `pid`, from /proc (SigBlk, a hex mask: bit n-1
/// is signal n).
uint64_t blocked_signals(pid_t pid, const std::string& tid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + tid + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("SigBlk:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  return 0;
}

/// Debian's oneDNN runs its JIT GEMM kernels with rsp pointing into the heap, so a signal handled
/// on a thread running one corrupts the heap (oneDNN issue #4845; it made Ctrl-C abort the
/// process about once in thirty). No thread of a training run, parent or --jobs child, may
/// handle SIGINT or SIGTERM: every one blocks them and one thread takes them with sigwait.
TEST(Robustness, NoThreadOfATrainingRunHandlesTheStopSignals) {
  const std::string exp = test::write_temp("mask.toml", tiny(100000));
  const std::string db = fresh_db("mask.db");
  const pid_t pid = start_run(db, exp, {"--jobs", "1", "--threads", "2"});
  wait_for_cases(db, 2);
  // The child trains its stability case: it has used CPU time well past its start-up.
  std::vector<pid_t> processes = {pid};
  for (const pid_t c : wait_for_busy_children(pid, 1, 1.0)) processes.push_back(c);
  constexpr uint64_t kStop = (uint64_t{1} << (SIGINT - 1)) | (uint64_t{1} << (SIGTERM - 1));
  ASSERT_EQ(processes.size(), 2U) << "the --jobs child is not running";
  for (const pid_t p : processes) {
    size_t threads = 0, waiting = 0;
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(p) + "/task")) {
      const std::string tid = t.path().filename().string();
      ++threads;
      if ((blocked_signals(p, tid) & kStop) == kStop) continue;
      // While a thread waits in sigwait the kernel shows the signals it waits for as unblocked.
      std::ifstream sys("/proc/" + std::to_string(p) + "/task/" + tid + "/syscall");
      long nr = -1;
      sys >> nr;
      EXPECT_EQ(nr, SYS_rt_sigtimedwait) << "process " << p << " thread " << tid << " can run a signal handler";
      ++waiting;
    }
    EXPECT_GE(threads, 3U) << "process " << p;  // main, the signal thread, an OpenMP worker
    EXPECT_EQ(waiting, 1U) << "process " << p;
  }
  kill(pid, SIGINT);
  EXPECT_EQ(exit_code(pid), 130);
  store::Store s(db, store::Store::Mode::kReadOnly);
  EXPECT_EQ(count(s, "SELECT count(*) FROM cases WHERE status = 'interrupted'"), 1);
}

TEST(Robustness, TerminateWithJobsStoresEveryCaseInFlightAsInterrupted) {
  const std::string exp = test::write_temp("term_jobs.toml", tiny(100000));
  const std::string db = fresh_db("term_jobs.db");
  const pid_t pid = start_run(db, exp, {"--jobs", "2"});
  wait_for_cases(db, 2);  // the two throughput cases; then both stability cases train at once
  EXPECT_EQ(wait_for_busy_children(pid, 2, 1.0).size(), 2U) << "the two --jobs children are not training";
  kill(pid, SIGTERM);  // to the parent only: it passes the stop on to its children
  EXPECT_EQ(exit_code(pid), 143);
  store::Store s(db, store::Store::Mode::kReadOnly);
  EXPECT_EQ(s.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "interrupted");
  EXPECT_EQ(count(s, "SELECT count(*) FROM cases WHERE status = 'completed'"), 2);
  // Each child stored its own case, with the steps it had made: nothing lost, nothing twice.
  EXPECT_EQ(count(s, "SELECT count(*) FROM cases WHERE error LIKE 'killed%'"), 0);
  EXPECT_EQ(count(s, "SELECT count(*) FROM cases WHERE status = 'interrupted'"), 2);
  EXPECT_EQ(count(s, "SELECT count(DISTINCT ordinal) FROM cases"), 4);
  EXPECT_GT(count(s, "SELECT min(n) FROM (SELECT count(*) AS n FROM steps GROUP BY case_id)"), 0);
}

/// The stability cases' steps of the killed run: enough that the kill, 200 ms after the two
/// throughput cases are stored, finds the first stability case in flight and the second not yet
/// begun (each takes about 0.9 s of 200 steps on this project's two-core machine, 4 s under the
/// sanitizers), and few enough that the resumed run, which trains both again, stays short (with
/// 600 steps the sanitizer pass took 52 s for this test).
constexpr int kSteps = 200;

TEST(Robustness, KilledRunIsFoundStaleAndResumes) {
  const std::string text = tiny(kSteps);
  const std::string exp = test::write_temp("killed.toml", text);
  const std::string db = fresh_db("killed.db");
  const pid_t pid = start_run(db, exp);
  wait_for_cases(db, 2);
  usleep(200 * 1000);
  kill(pid, SIGKILL);
  EXPECT_EQ(exit_code(pid), 128 + SIGKILL);

  std::vector<int64_t> kept_ids;
  {
    store::Store ro(db, store::Store::Mode::kReadOnly);
    EXPECT_EQ(ro.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "running");
    EXPECT_EQ(ro.query("SELECT pid FROM runs").rows.at(0).at(0).as_int(), pid);
    const int64_t stored = count(ro, "SELECT count(*) FROM cases");
    ASSERT_GE(stored, 2);
    ASSERT_LT(stored, 4) << "the run finished before it was killed";
    for (const auto& r : ro.query("SELECT id FROM cases ORDER BY ordinal").rows) kept_ids.push_back(r[0].as_int());
  }
  // Any read-write opening finds the run stale: this host, and its process is gone.
  {
    store::Store rw(db);
    EXPECT_EQ(rw.stale_runs_failed(), std::vector<int64_t>{1});
    EXPECT_EQ(rw.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "failed");
    const std::string error = rw.query("SELECT error FROM runs").rows.at(0).at(0).as_string();
    EXPECT_NE(error.find("stale: its process (pid " + std::to_string(pid) + " on "), std::string::npos) << error;
    EXPECT_FALSE(rw.query("SELECT finished_at FROM runs").rows.at(0).at(0).is_null());
  }
  // Another experiment text cannot resume it.
  const std::string other = test::write_temp("killed_other.toml", tiny(kSteps + 1));
  const test::Output refused = test::bench_cli("-q --db " + db + " run " + other + " --resume 1");
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("was made from another experiment text"), std::string::npos) << refused.err;
  EXPECT_EQ(test::bench_cli("-q --db " + db + " run " + exp + " --resume 7").code, 2);

  const test::Output resumed = test::bench_cli("-q --db " + db + " run " + exp + " --resume 1");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  store::Store s(db, store::Store::Mode::kReadOnly);
  EXPECT_EQ(count(s, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(s.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "completed");
  EXPECT_TRUE(s.query("SELECT error FROM runs").rows.at(0).at(0).is_null());
  EXPECT_EQ(count(s, "SELECT count(*) FROM cases"), 4);
  EXPECT_EQ(count(s, "SELECT count(DISTINCT ordinal) FROM cases"), 4);
  EXPECT_EQ(count(s, "SELECT count(*) FROM cases WHERE status = 'completed'"), 4);
  EXPECT_EQ(count(s, "SELECT count(*) FROM steps"), 2 * kSteps);
  // The cases finished before the kill were kept, not run again; the one in flight was redone.
  const auto ids = s.query("SELECT id FROM cases ORDER BY ordinal").rows;
  for (size_t i = 0; i < kept_ids.size(); ++i) EXPECT_EQ(ids.at(i).at(0).as_int(), kept_ids[i]);
  // Every step of both stability cases, each exactly once.
  EXPECT_EQ(
      count(s, "SELECT count(*) FROM (SELECT case_id, step FROM steps GROUP BY case_id, step HAVING count(*) > 1)"), 0);
  EXPECT_EQ(count(s,
                  "SELECT count(*) FROM metrics m JOIN cases c ON c.id = m.case_id WHERE m.name = 'steps_done' "
                  "AND m.value = " +
                      std::to_string(kSteps)),
            2);
}

TEST(Robustness, ThrowingForwardFailsOnlyItsCase) {
  const std::string exp = test::write_temp(
      "throws.toml",
      "name = \"throws\"\n[model]\nd_model = 16\nn_layers = 1\nn_heads = 2\nseq_len = 8\nbatch_size = 2\n"
      "norm = [\"throws_in_forward\", \"rmsnorm\"]\n[data]\ntype = \"synthetic\"\nreference_tokens = 1024\n"
      "[stability]\nsteps = 3\neval_batches = 1\n");
  const std::string db = fresh_db("throws.db");
  const test::Output r = test::bench_cli("-q --db " + db + " run " + exp, "BENCH_PLUGIN_PATH=" + kFaultyPlugins);
  EXPECT_EQ(r.code, 1) << r.err;
  store::Store s(db, store::Store::Mode::kReadOnly);
  EXPECT_EQ(s.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "failed");
  EXPECT_EQ(s.query("SELECT error FROM runs").rows.at(0).at(0).as_string(), "1 case(s) failed");
  const auto cases = s.query("SELECT label, status, error FROM cases ORDER BY ordinal").rows;
  ASSERT_EQ(cases.size(), 2U);
  EXPECT_NE(cases[0][0].as_string().find("throws_in_forward"), std::string::npos);
  EXPECT_EQ(cases[0][1].as_string(), "failed");
  EXPECT_NE(cases[0][2].as_string().find("forward of throws_in_forward failed on purpose"), std::string::npos)
      << cases[0][2].as_string();
  EXPECT_EQ(cases[1][1].as_string(), "completed");
  EXPECT_TRUE(cases[1][2].is_null());
}

// --isolate: each case in its own process, so a plugin that segfaults or aborts fails only its
// case (with the signal as the reason) and the others complete; without --isolate the same crash
// takes the whole run down.
#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer handles the SEGV itself: it reports and exits with status 1.
const char* const kSegfaultReason = "its process exited with status 1";
constexpr int kSegfaultExit = 1;
#else
const char* const kSegfaultReason = "killed by signal 11 (SIGSEGV)";
constexpr int kSegfaultExit = 128 + 11;
#endif

TEST(Robustness, IsolateFailsOnlyTheCrashingCases) {
  const std::string exp = test::write_temp(
      "crashes.toml",
      "name = \"crashes\"\n[model]\nd_model = 16\nn_layers = 1\nn_heads = 2\nseq_len = 8\nbatch_size = 2\n"
      "norm = [\"segfaults_in_forward\", \"rmsnorm\", \"aborts_in_forward\", \"throws_in_forward\"]\n"
      "[data]\ntype = \"synthetic\"\nreference_tokens = 1024\n[stability]\nsteps = 3\neval_batches = 1\n");
  const std::string db = fresh_db("crashes.db");
  const test::Output r =
      test::bench_cli("-q --db " + db + " run " + exp + " --isolate", "BENCH_PLUGIN_PATH=" + kFaultyPlugins);
  EXPECT_EQ(r.code, 1) << r.err;
  {
    store::Store s(db, store::Store::Mode::kReadOnly);
    EXPECT_EQ(s.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "failed");
    EXPECT_EQ(s.query("SELECT error FROM runs").rows.at(0).at(0).as_string(), "3 case(s) failed");
    const auto cases = s.query("SELECT ordinal, status, error FROM cases ORDER BY ordinal").rows;
    ASSERT_EQ(cases.size(), 4U);
    EXPECT_EQ(cases[0][1].as_string(), "failed");
    EXPECT_EQ(cases[0][2].as_string(), kSegfaultReason);
    EXPECT_EQ(cases[1][1].as_string(), "completed");
    EXPECT_EQ(cases[2][1].as_string(), "failed");
    EXPECT_EQ(cases[2][2].as_string(), "killed by signal 6 (SIGABRT)");
    EXPECT_EQ(cases[3][1].as_string(), "failed");
    EXPECT_NE(cases[3][2].as_string().find("failed on purpose"), std::string::npos) << cases[3][2].as_string();
    // The completed case stored its steps from the child.
    EXPECT_EQ(s.query("SELECT count(*) FROM steps JOIN cases ON cases.id = steps.case_id WHERE cases.ordinal = 1")
                  .rows.at(0)
                  .at(0)
                  .as_int(),
              3);
  }
  // Without --isolate the segfault ends the process.
  const std::string db2 = fresh_db("crashes_inline.db");
  const test::Output inline_run =
      test::bench_cli("-q --db " + db2 + " run " + exp, "BENCH_PLUGIN_PATH=" + kFaultyPlugins);
  EXPECT_EQ(inline_run.code, kSegfaultExit) << inline_run.err;
}

TEST(Robustness, TwoProcessesWritingOneDatabaseLoseNoRows) {
  const std::string a = test::write_temp("conc_a.toml", tiny(40));
  const std::string b = test::write_temp("conc_b.toml", tiny(41));
  const std::string db = fresh_db("conc.db");
  const pid_t pa = start_run(db, a);
  const pid_t pb = start_run(db, b);
  EXPECT_EQ(exit_code(pa), 0);
  EXPECT_EQ(exit_code(pb), 0);
  store::Store s(db, store::Store::Mode::kReadOnly);
  EXPECT_EQ(count(s, "SELECT count(*) FROM runs WHERE status = 'completed'"), 2);
  EXPECT_EQ(count(s, "SELECT count(*) FROM cases WHERE status = 'completed'"), 8);
  EXPECT_EQ(count(s, "SELECT count(DISTINCT run_id || '/' || ordinal) FROM cases"), 8);
  EXPECT_EQ(count(s, "SELECT count(*) FROM throughput"), 4);
  EXPECT_EQ(count(s, "SELECT count(*) FROM samples"), 12);
  // Both stability cases of both runs with every logged step: 40 + 41 steps, twice.
  EXPECT_EQ(count(s, "SELECT count(*) FROM steps"), 2 * (40 + 41));
}

TEST(Robustness, HugeLearningRateIsStoredAsDivergedAndTheSweepGoesOn) {
  const std::string exp = test::write_temp(
      "diverge.toml",
      "name = \"diverge\"\nseed = 5\n[model]\nd_model = 16\nn_layers = 2\nn_heads = 2\nseq_len = 8\nbatch_size = 2\n"
      "[data]\ntype = \"synthetic\"\nreference_tokens = 1024\n"
      "[stability]\nsteps = 30\nlr = [1e6, 1e-3]\neval_batches = 1\n");
  const std::string db = fresh_db("diverge.db");
  const test::Output r = test::bench_cli("-q --db " + db + " run " + exp);
  ASSERT_EQ(r.code, 0) << r.err;
  store::Store s(db, store::Store::Mode::kReadOnly);
  EXPECT_EQ(s.query("SELECT status FROM runs").rows.at(0).at(0).as_string(), "completed");
  const auto cases = s.query("SELECT id, status, error FROM cases ORDER BY ordinal").rows;
  ASSERT_EQ(cases.size(), 2U);
  const int64_t id = cases[0][0].as_int();
  EXPECT_EQ(cases[0][1].as_string(), "diverged");
  EXPECT_EQ(cases[1][1].as_string(), "completed");
  const auto metric = [&](int64_t case_id, const std::string& name) {
    return s
        .query("SELECT value FROM metrics WHERE case_id = ?1 AND name = ?2",
               {Value::integer(case_id), Value::string(name)})
        .rows.at(0)
        .at(0);
  };
  const auto k = static_cast<int64_t>(metric(id, "diverged_step").as_double());
  EXPECT_EQ(cases[0][2].as_string(), "non-finite loss or gradient at step " + std::to_string(k));
  // The divergent step is the last one stored, with its non-finite values as NULL ...
  EXPECT_EQ(count(s, "SELECT max(step) FROM steps WHERE case_id = " + std::to_string(id)), k);
  const auto last = s.query("SELECT loss, grad_norm FROM steps WHERE case_id = ?1 AND step = ?2",
                            {Value::integer(id), Value::integer(k)})
                        .rows.at(0);
  EXPECT_TRUE(last[0].is_null() || last[1].is_null());
  // ... and the metrics up to it are finite numbers.
  EXPECT_EQ(metric(id, "steps_done").as_double(), static_cast<double>(k + 1));
  EXPECT_GT(metric(id, "best_loss").as_double(), 0.0);
  EXPECT_GT(metric(id, "initial_loss").as_double(), 0.0);
  EXPECT_EQ(count(s, "SELECT count(*) FROM steps WHERE case_id = " + std::to_string(id) + " AND step < " +
                         std::to_string(k) + " AND loss IS NULL"),
            0);
}

}  // namespace
}  // namespace robustness_test
}  // namespace bench
