#!/usr/bin/env bash
# End to end on a real Slurm cluster (one node on loopback, tests/cluster/slurm_cluster.sh): `bench
# submit --slurm` runs tests/cluster/sweep.toml as a job array of 3 shards and a dependent merge
# job; the merged database must equal a single-process run of the same file case for case (the
# same cases and statuses; the stability losses, gradient norms and metrics bit for bit, the seeds
# being the same; throughput within a loose factor, since the tasks share the machine). Submitting
# again must skip the completed shards and change nothing.
# Usage: tests/cluster/slurm_test.sh BUILD_DIR     (exit 77: Slurm is not installed)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: slurm_test.sh BUILD_DIR}" && pwd)
bench=$build/bin/bench
work=$(mktemp -d /tmp/bench-slurm.XXXXXX)
chmod 755 "$work"
cluster=$work/c
ok=0
cleanup() {
  "$here/slurm_cluster.sh" down "$cluster" > /dev/null 2>&1 || true
  if [ "$ok" = 1 ]; then rm -rf "$work"; else echo "slurm_test: kept $work for inspection" >&2; fi
}
trap cleanup EXIT
fail() {
  echo "slurm_test: FAILED: $*" >&2
  for f in "$work"/results/sweeps/*/logs/*.out; do [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
  exit 1
}
start=$(date +%s)

rc=0
up=$("$here/slurm_cluster.sh" up "$cluster") || rc=$?
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || fail "the Slurm cluster did not come up"
eval "$up"
cp "$here/sweep.toml" "$work/sweep.toml"
db=$work/results/bench.db

# Wait (up to 5 minutes) until none of the given jobs is in the queue.
wait_jobs() {
  for _ in $(seq 1 600); do
    [ -z "$(squeue -h -j "$(IFS=,; echo "$*")" 2> /dev/null)" ] && return 0
    sleep 0.5
  done
  fail "jobs $* still queued after 5 minutes"
}

"$bench" --db "$db" submit "$work/sweep.toml" --slurm --array-size 3 > "$work/submit.out" 2> "$work/submit.err" ||
  { cat "$work/submit.err" >&2; fail "bench submit"; }
array=$(sed -n 's/^array job //p' "$work/submit.out")
merge=$(sed -n 's/^merge job //p' "$work/submit.out")
if [ -z "$array" ] || [ -z "$merge" ]; then fail "bench submit printed no job ids: $(cat "$work/submit.out")"; fi
echo "slurm_test: submitted array job $array (3 tasks) and merge job $merge"
wait_jobs "$array" "$merge"
for job in "$array" "$merge"; do
  state=$(scontrol show job "$job" | grep -o 'JobState=[A-Z_]*' | sort -u | tr '\n' ' ')
  [ "$state" = "JobState=COMPLETED " ] || fail "job $job ended with $state"
done
tasks=$(scontrol show job "$array" | grep -c 'ArrayTaskId=')
[ "$tasks" -ge 3 ] || fail "array job $array had $tasks tasks"

"$bench" -q --db "$work/single.db" run "$work/sweep.toml" > /dev/null

q() { sqlite3 -batch -noheader "$db" "ATTACH '$work/single.db' AS one; $1"; }
# One run of 9 finished cases made of three shards.
[ "$(q "SELECT status || ' ' || n_cases FROM runs")" = "completed 9" ] || fail "merged run: $(q 'SELECT status, error FROM runs')"
[ "$(q "SELECT count(DISTINCT shard_index) FROM run_sources")" = 3 ] || fail "run_sources"
# The same cases, with the same status.
cases="SELECT ordinal, runner, label, status FROM cases"
[ "$(q "SELECT count(*) FROM ($cases EXCEPT SELECT ordinal, runner, label, status FROM one.cases)")" = 0 ] || fail "cases differ"
[ "$(q "SELECT count(*) FROM (SELECT ordinal, runner, label, status FROM one.cases EXCEPT $cases)")" = 0 ] || fail "cases differ"
n_cases=$(q "SELECT count(*) FROM cases")
# Every step of every stability case bit for bit.
steps="SELECT c.ordinal, s.step, s.loss, s.grad_norm, s.max_attn_logit, s.z_mean FROM %s.steps s JOIN %s.cases c ON c.id = s.case_id"
# shellcheck disable=SC2059
diff_steps=$(q "SELECT count(*) FROM ($(printf "$steps" main main) EXCEPT $(printf "$steps" one one))")
n_steps=$(q "SELECT count(*) FROM steps")
if [ "$diff_steps" != 0 ] || [ "$n_steps" != "$(q 'SELECT count(*) FROM one.steps')" ]; then
  fail "$diff_steps of $n_steps steps differ"
fi
# Stability metrics that do not depend on timing, bit for bit.
metrics="SELECT c.ordinal, m.name, m.value FROM %s.metrics m JOIN %s.cases c ON c.id = m.case_id WHERE c.runner = 'stability' AND m.unit NOT IN ('s', 'ms') AND m.name NOT LIKE '%%tokens_per_s%%'"
# shellcheck disable=SC2059
diff_metrics=$(q "SELECT count(*) FROM ($(printf "$metrics" main main) EXCEPT $(printf "$metrics" one one))")
# shellcheck disable=SC2059
n_metrics=$(q "SELECT count(*) FROM ($(printf "$metrics" main main))")
[ "$diff_metrics" = 0 ] || fail "$diff_metrics of $n_metrics stability metrics differ"
# Throughput: the ratio of medians, merged over single.
echo "slurm_test: forward median ms, Slurm shard / single process:"
q "SELECT '  ' || c.label || ': ' || printf('%.4f / %.4f = %.2f', t.median_ms, u.median_ms, t.median_ms / u.median_ms)
   FROM throughput t JOIN cases c ON c.id = t.case_id JOIN one.cases d ON d.ordinal = c.ordinal
   JOIN one.throughput u ON u.case_id = d.id AND u.mode = t.mode ORDER BY c.ordinal"
bad=$(q "SELECT count(*) FROM throughput t JOIN cases c ON c.id = t.case_id JOIN one.cases d ON d.ordinal = c.ordinal
         JOIN one.throughput u ON u.case_id = d.id AND u.mode = t.mode WHERE t.median_ms / u.median_ms NOT BETWEEN 0.25 AND 4")
[ "$bad" = 0 ] || fail "$bad throughput medians differ by more than 4x"

# Submitting again: every shard completed, so only a merge job, and nothing changes.
rows() { q "SELECT (SELECT count(*) FROM cases) || ' ' || (SELECT count(*) FROM steps) || ' ' || (SELECT count(*) FROM metrics) || ' ' || (SELECT count(*) FROM samples)"; }
before=$(rows)
"$bench" --db "$db" submit "$work/sweep.toml" --slurm --array-size 3 > "$work/submit2.out" 2> "$work/submit2.err" ||
  { cat "$work/submit2.err" >&2; fail "second bench submit"; }
grep -q '0 shard(s) to run' "$work/submit2.err" || fail "resubmission ran shards again: $(cat "$work/submit2.err")"
grep -q '^array job' "$work/submit2.out" && fail "resubmission submitted an array job"
merge2=$(sed -n 's/^merge job //p' "$work/submit2.out")
wait_jobs "$merge2"
[ "$(rows)" = "$before" ] || fail "resubmission changed the rows: $before -> $(rows)"

ok=1
echo "slurm_test: ok: $n_cases cases in 3 array tasks merged = single run ($n_steps steps, $n_metrics stability metrics identical); resubmission skipped 3 of 3 shards; $(($(date +%s) - start)) s"
