#!/usr/bin/env bash
# CPU scaling: experiments/cpu_scaling.toml's train step at 1, 2, 4, ... threads up to the CPUs
# this process may use (affinity mask and cgroup quota, as bench counts them), then at 8x them
# (oversubscribed), with the device's copy bandwidth (STREAM copy) and fp32 GEMM rate. One
# markdown table on stdout; the runs stay in the database.
#
#   scripts/cpu-scaling.sh [BENCH] [DB]      (default: build/bin/bench, else build/cpu/bin/bench;
#                                             a fresh database in a temporary directory)
#   CPU_SCALING_MAX=N                          stop the doubling at N threads (and skip 8x)
#   CPU_SCALING_EXPERIMENT=FILE                run FILE instead (gpu-check.sh's dry run: the same
#                                             cases with shorter timings)
#
# The GPU check calls it for its CPU section. Exit status: 0, or 1 when a run failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bench=${1:-}
if [ -z "$bench" ]; then
  if [ -x build/bin/bench ]; then bench=build/bin/bench; else bench=build/cpu/bin/bench; fi
fi
db=${2:-$(mktemp -d)/cpu-scaling.db}
exp=${CPU_SCALING_EXPERIMENT:-experiments/cpu_scaling.toml}
status=0

# One run at THREADS (empty: the default team); prints its run id.
run() {
  local args=()
  [ -n "$1" ] && args=(--threads "$1")
  if ! "$bench" -q --db "$db" run "$exp" "${args[@]}" --format csv >/dev/null; then
    echo "cpu-scaling: bench run $exp ${args[*]} failed" >&2
    status=1
  fi
  q "SELECT max(id) FROM runs"
}

# One query's rows as CSV, without the header (and without CSV's CR).
q() { "$bench" --db "$db" query "$1" --format csv | tr -d '\r' | tail -n +2; }

# The default team first: its size is what the process may use.
default_run=$(run "")
usable=$(q "SELECT json_extract(device_json, '\$.threads') AS threads FROM runs WHERE id = $default_run")
why=$(q "SELECT json_extract(device_json, '\$.threads_why') AS why FROM runs WHERE id = $default_run")
max=${CPU_SCALING_MAX:-$usable}
counts=()
for ((t = 1; t < usable && t <= max; t *= 2)); do counts+=("$t"); done
runs=()
for t in "${counts[@]}"; do runs+=("$t:$(run "$t")"); done
runs+=("$usable:$default_run")
[ -z "${CPU_SCALING_MAX:-}" ] && runs+=("$((8 * usable)):$(run $((8 * usable)))")

echo "### CPU scaling ($why)"
echo
echo "| threads | small d128 train step ms | speed-up | large d256 train step ms | speed-up | copy GB/s | fp32 GEMM GFLOP/s |"
echo "|---|---|---|---|---|---|---|"
base_small="" base_large=""
for entry in "${runs[@]}"; do
  t=${entry%%:*} id=${entry#*:}
  row=$(q "SELECT
      (SELECT t.median_ms FROM throughput t JOIN cases c ON c.id = t.case_id
       WHERE c.run_id = $id AND c.variant LIKE 'small%' AND t.mode = 'train_step') AS small,
      (SELECT t.median_ms FROM throughput t JOIN cases c ON c.id = t.case_id
       WHERE c.run_id = $id AND c.variant LIKE 'large%' AND t.mode = 'train_step') AS large,
      json_extract(device_json, '\$.copy_gbps') AS copy,
      json_extract(device_json, '\$.peak_gflops_fp32_gemm') AS gemm
      FROM runs WHERE id = $id")
  IFS=, read -r small large copy gemm <<<"$row"
  [ -z "$base_small" ] && base_small=$small && base_large=$large
  awk -v t="$t" -v s="$small" -v l="$large" -v bs="$base_small" -v bl="$base_large" -v c="$copy" -v g="$gemm" \
    -v u="$usable" 'BEGIN {
      note = t > u ? " (oversubscribed)" : "";
      printf "| %d%s | %.1f | %.2fx | %.1f | %.2fx | %.1f | %.0f |\n", t, note, s, bs / s, l, bl / l, c, g }'
done
echo
echo "speed-up: against the first row's time; database: $db"
exit $status
