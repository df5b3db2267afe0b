#!/usr/bin/env bash
# The prepared device check, for a lent GPU machine (see /work/.library/device). It compiles
# nothing: it runs the prebuilt programs of the bundle that scripts/gpu-bundle.sh made here
# (carried as .gpu-bundle.tar.xz): `kernels_test` (every kernel on every executor, CUDA included,
# against float64 references), `cuda_check` (the timings: GEMM ceilings, copy bandwidth, row
# kernels' GB/s, attention TFLOP/s, ours and cuDNN's), the baseline's `cuda_check` (an earlier
# commit's kernels, timed beside these on the same card: gpu-bundle.sh) and `bench` (the per-kernel profile of a
# model at cuda_check's shapes beside cuda_check's GB/s, the model on the GPU against the CPU,
# cuDNN's attention and our wgmma flash forward inside the model against our mma.sync flash
# kernels, GPT-2-small's MFU with and without CUDA graphs, norms.toml's model at its own size
# against PyTorch eager, torch.compile and CUDA graphs (`small`), experiments/norms.toml with its
# wall time), then PyTorch's figures beside ours
# where python3 has torch, and last the host's CPU path (`cpu`: scripts/cpu-scaling.sh's train
# steps at 1, 2, 4, ... threads, copy bandwidth, GEMM rate). Each section ends with a row of its
# wall time.
#
#   OUT=/tmp/out scripts/gpu-check.sh [--only S,S] [--skip S,S] [--budget SECONDS]
#                                     [--dry-run [--bin BUILD/bin]]
#   scripts/gpu-check.sh --list            the sections, in order
#
# What comes back is at most five files in $OUT, written as the check goes, so that a run killed
# at any point still leaves its table:
#   gpu-check.md          the table: one row per check, appended (and flushed) when it finishes
#   gpu-check.json        the same rows as a JSON array, rewritten after every section
#   gpu-check.log         what every program printed
#   gpu-check-files.tar.xz  everything else (databases, CSV, per-section output), repacked after
#                         every section
#   torch-baseline.md     PyTorch beside us (scripts/torch_baseline.py), where python3 has torch
# Each section runs under `timeout -k` (a graceful SIGTERM, then SIGKILL 10 s later: a first
# SIGTERM only asks `bench` to stop after its case) with min(its cap, the time left), never 0 or
# less; a section that cannot get its minimum is SKIPPED with the reason. A failing or hung section
# is a FAIL or TIMEOUT row and the next one runs; a program's sticky CUDA error is its FAIL row
# naming the check that caused it.
#
# --dry-run drives the same sections without a GPU, from the local build (build/): the model
# sections on the `guarded` device (the CPU executor on memory only kernels may touch),
# cuda_check's timings on the CPU executor at small sizes, kernels_test's CUDA instances (which
# skip themselves). For tests of this script: GPU_CHECK_FAIL=CHECK and GPU_CHECK_HANG=CHECK make
# one of cuda_check's checks throw, or hang ignoring SIGTERM; GPU_CHECK_CAP_<SECTION>=SECONDS
# lowers a section's time cap. tests/scripts/gpu_check_test.sh runs the dry run so in CI.
# shellcheck disable=SC2317  # the sections are called by name ("section_$s"), which shellcheck cannot follow
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

all_sections=(facts kernels timing baseline profile model cudnn mfu small norms targets torch cpu)
only="" skip="" dry=0 budget=460 bin=build/bin
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=",$2," && shift ;;
    --skip) skip=",$2," && shift ;;
    --budget) budget=$2 && shift ;;
    --dry-run) dry=1 ;;
    --bin) bin=$2 && shift ;;
    --list) printf '%s\n' "${all_sections[@]}" && exit 0 ;;
    -h | --help) sed -n '2,40p' "$0" && exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2 && exit 2 ;;
  esac
  shift
done
case $budget in '' | *[!0-9]*) echo "gpu-check: --budget takes whole seconds, got '$budget'" >&2 && exit 2 ;; esac
for s in ${only//,/ } ${skip//,/ }; do
  [[ " ${all_sections[*]} " == *" $s "* ]] || { echo "gpu-check: no section '$s' (--list)" >&2 && exit 2; }
done

out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
work=$(mktemp -d /tmp/gpu-check-work.XXXXXX)
md="$out/gpu-check.md" json="$out/gpu-check.json" log="$out/gpu-check.log" rows="$work/rows.jsonl"
gpt2_flops=""
# The CPU runs (the model section's CPU half, the dry run's) take a fixed small team: a team as
# large as a big machine's cores stalled there once (issue 34); min(nproc, 4) cannot.
cpu_threads=$(nproc 2> /dev/null || echo 1)
[ "$cpu_threads" -gt 4 ] && cpu_threads=4
archive="$out/gpu-check-files.tar.xz"
: > "$rows"
status=0

# --- rows ------------------------------------------------------------------------------------
json_str() {  # a JSON string literal of $1
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/ }
  s=${s//$'\t'/ }
  s=${s//$'\r'/ }
  printf '"%s"' "$s"
}
# row SECTION CHECK RESULT VALUE UNIT DETAIL: one line of the table, now.
row() {
  local value=${4:-}
  [[ $value =~ ^-?[0-9.]+([eE][-+]?[0-9]+)?$ ]] || value=""
  printf '| %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "${value:--}" "${5:--}" "${6:--}" >> "$md"
  printf '{"section": %s, "check": %s, "result": %s, "value": %s, "unit": %s, "detail": %s}\n' \
    "$(json_str "$1")" "$(json_str "$2")" "$(json_str "$3")" "${value:-null}" "$(json_str "${5:-}")" \
    "$(json_str "${6:-}")" >> "$rows"
  echo "gpu-check: $1 / $2: $3${value:+ $value}${5:+ $5}${6:+ ($6)}" | tee -a "$log" >&2
  case $3 in FAIL | TIMEOUT) status=1 ;; esac
}
# An awk function for the rows' JSON lines (rows.jsonl, cuda_check's --json-rows): field(NAME) is
# a string's text or a number's digits, "" for null (a check's name holds no quotes: json_str).
# shellcheck disable=SC2016  # awk's own $0
awk_field='
  function field(name,   m) {
    if (match($0, "\"" name "\": \"[^\"]*\"")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*: "/, "", m); sub(/"$/, "", m); return m }
    if (match($0, "\"" name "\": [-0-9.eE+]+")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*: /, "", m); return m }
    return ""
  }'
# Rewrites the JSON array and the archive from what is there now.
flush() {
  { echo "["; sed '$!s/$/,/' "$rows"; echo "]"; } > "$json.tmp" && mv "$json.tmp" "$json"
  tar -C "$work" -cJf "$archive.tmp" --exclude=rows.jsonl --exclude=bundle . 2> /dev/null && mv "$archive.tmp" "$archive"
}
trap 'row gpu-check interrupted TIMEOUT "" "" "the check itself was stopped by a signal"; flush; exit 1' TERM INT

left() { echo $((budget - SECONDS)); }
# run_capped CAP MIN NAME CMD...: CMD under `timeout -k 10 T`, T = min(CAP, time left - 15 s);
# SKIPPED (exit 75) when T < MIN. The exit status is CMD's, or 124 / 137 for a timeout.
run_capped() {
  local cap=$1 min=$2 name=$3
  shift 3
  local override="GPU_CHECK_CAP_${name^^}"
  if [ -n "${!override:-}" ]; then
    cap=${!override}
    [ "$min" -gt "$cap" ] && min=$cap
  fi
  local t=$(($(left) - 15))
  [ "$t" -gt "$cap" ] && t=$cap
  if [ "$t" -lt "$min" ] || [ "$t" -lt 1 ]; then
    row "$name" "(whole section)" SKIPPED "" "" "no time left: $(left) s of the ${budget} s budget, needs $min"
    return 75
  fi
  # timeout runs the program itself (not a shell function), so that its SIGTERM and the SIGKILL
  # after it reach the program.
  local cmd=("$@")
  case ${cmd[0]} in
    run_bin) cmd=("${launcher[@]}" "$(program "${cmd[1]}")" "${cmd[@]:2}") ;;
    bench) cmd=("${launcher[@]}" "$(program bench)" "${cmd[@]:1}") ;;
  esac
  timeout -k 10 "$t" "${cmd[@]}"
}
# Turns a section's exit status into a row where the section wrote none for it.
timed_out() {  # SECTION STATUS
  if [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then
    row "$1" "(whole section)" TIMEOUT "" "" "killed after its time limit (exit $2); rows above are what finished"
    return 0
  fi
  return 1
}
want() {
  [ -n "$only" ] && [[ $only != *",$1,"* ]] && return 1
  [ -n "$skip" ] && [[ $skip == *",$1,"* ]] && return 1
  return 0
}

{
  echo "# gpu-check $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2> /dev/null || echo unknown)"
  echo
  [ "$dry" -eq 1 ] && echo "**Dry run without a GPU**: guarded device and CPU executor; no figure here is a GPU's." && echo
  echo "| section | check | result | value | unit | detail |"
  echo "|---|---|---|---|---|---|"
} > "$md"
: > "$log"

# --- the programs: the bundle's (a GPU machine), or the local build's (--dry-run) -------------
if [ "$dry" -eq 1 ]; then
  launcher=()
  program() { echo "$bin/$1"; }
  device=guarded
else
  device=cuda
  if [ ! -f .gpu-bundle.tar.xz ]; then
    row gpu-check bundle FAIL "" "" "no .gpu-bundle.tar.xz: run scripts/gpu-bundle.sh on the build machine and carry it"
    flush
    exit 1
  fi
  mkdir -p "$work/bundle" && tar -C "$work/bundle" -xJf .gpu-bundle.tar.xz
  b="$work/bundle/bench-bundle"
  # The bundle's launcher (scripts/gpu-bundle-run.sh): its loader, its libraries, the plugins'
  # CUDA builds, then CUDA's and the driver's; tests/scripts/gpu_bundle_test.sh runs it in CI.
  launcher=("$b/run")
  program() { echo "$1"; }
fi
# A program of the build or the bundle: run_bin NAME ARGS..., bench ARGS... (run_capped runs the
# same command line under its timeout).
run_bin() { local p=$1 && shift && "${launcher[@]}" "$(program "$p")" "$@"; }
bench() { run_bin bench "$@"; }

# --- sections ----------------------------------------------------------------------------------
section_facts() {
  if command -v nvidia-smi > /dev/null; then
    local q
    q=$(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | head -n 1)
    row facts gpu INFO "" "" "$q"
  else
    row facts gpu INFO "" "" "no nvidia-smi on this machine"
  fi
  row facts programs INFO "" "" "$([ "$dry" -eq 1 ] && echo "local build ($bin)" || echo "bundle: $(du -h .gpu-bundle.tar.xz | cut -f1)")"
  bench --version >> "$log" 2>&1
  row facts bench INFO "" "" "$(bench --version 2>&1 | head -n 1)"
}

# Every kernel on every executor against float64 (tests/kernels): the CUDA instances here; the
# CPU and emulated ones ran in CI. One row per test, written by the test program as it finishes.
section_kernels() {
  run_capped 150 20 kernels run_bin kernels_test --gtest_filter='*cuda*:*Cuda*' --gtest_brief=1 \
    --bench_rows="$md" --bench_json_rows="$rows" --bench_section=kernels > "$work/kernels.txt" 2>&1
  local s=$?
  cat "$work/kernels.txt" >> "$log"
  timed_out kernels "$s" && return
  [ "$s" -eq 75 ] && return
  local summary
  summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$work/kernels.txt" | tr '\n' ' ')
  if [ "$s" -eq 0 ]; then
    row kernels "kernels_test (CUDA instances)" PASS "" "" "${summary:-see log}"
  else
    row kernels "kernels_test (CUDA instances)" FAIL "" "" "exit $s; ${summary:-see log}"
  fi
}

# The timings of cuda_check: it writes its own rows, one per check, as each finishes.
section_timing() {
  local extra=()
  [ "$dry" -eq 1 ] && extra=(--backend cpu --small)
  run_capped 180 30 timing run_bin cuda_check --md "$md" --json-rows "$rows" "${extra[@]}" \
    > "$work/cuda_check.txt" 2>&1
  local s=$?
  cat "$work/cuda_check.txt" >> "$log"
  timed_out timing "$s" && return
  case "$s" in
    0 | 75) ;;
    77) row timing cuda_check SKIPPED "" "" "$(tail -n 1 "$work/cuda_check.txt")" ;;
    *) grep -q "| timing |.*| FAIL |" "$md" || row timing cuda_check FAIL "" "" "exit $s: $(tail -n 1 "$work/cuda_check.txt")" ;;
  esac
}

# The kernels of then against now, on this card: the baseline's cuda_check (an earlier commit's,
# bench-bundle/baseline: gpu-bundle.sh --baseline, by default issue 31's ba95147) times the copy,
# the row kernels and the mma.sync flash attention as the timing section timed this commit's; each
# of its rows with a figure of the same name there gets a row here, now / then (GB/s, TFLOP/s:
# above 1 is faster now), both figures in the detail. INFO: a change of speed is a measurement,
# not a verdict; the copy's ratio is the card's own run-to-run spread. The dry run takes the local
# build for both (the path only: ratios near 1).
section_baseline() {
  local base=() extra=() note s
  if [ "$dry" -eq 1 ]; then
    base=("$bin/cuda_check") extra=(--backend cpu --small) note="the local build (dry run)"
  elif [ -x "$b/baseline/bin/cuda_check" ]; then
    base=("$b/run" --baseline cuda_check) note=$(cat "$b/baseline/commit" 2> /dev/null)
  else
    row baseline "(whole section)" SKIPPED "" "" "the bundle has no baseline (gpu-bundle.sh --no-baseline)"
    return
  fi
  row baseline "baseline's commit" INFO "" "" "$note"
  rm -f "$work/baseline.jsonl"
  # (GPU_CHECK_FAIL / GPU_CHECK_HANG are the timing section's test hooks, not the baseline's)
  run_capped 120 20 baseline env -u GPU_CHECK_FAIL -u GPU_CHECK_HANG "${base[@]}" --only "ceiling/copy,bandwidth/,attention/flash forward,attention/flash backward" \
    --json-rows "$work/baseline.jsonl" --md "$work/baseline.md" "${extra[@]}" > "$work/baseline.txt" 2>&1
  s=$?
  cat "$work/baseline.txt" >> "$log"
  [ "$s" -eq 75 ] && return
  case "$s" in
    0) ;;
    124 | 137) row baseline "(whole section)" TIMEOUT "" "" "killed after its time limit (exit $s); the rows below are what it finished" ;;
    77) row baseline "baseline's cuda_check" SKIPPED "" "" "$(tail -n 1 "$work/baseline.txt")" && return ;;
    *) row baseline "baseline's cuda_check" INFO "" "" "exit $s (its FAIL rows are in baseline.md of the archive): $(tail -n 1 "$work/baseline.txt")" ;;
  esac
  local check ratio now before unit
  while IFS=$'\t' read -r check ratio now before unit; do
    if [ "$ratio" = - ]; then
      row baseline "$check" INFO "" "" "at the baseline $before $unit; not timed by this commit's timing section in this run"
    else
      row baseline "$check" INFO "$ratio" "now/then" "now $now $unit, at the baseline $before $unit"
    fi
  done < <(awk "$awk_field"'
    FILENAME == ARGV[1] { if (field("section") == "timing" && field("value") != "") now[field("check")] = field("value"); next }
    {
      c = field("check"); v = field("value")
      if (v == "" || v + 0 <= 0) next
      if (c in now) printf "%s\t%.3f\t%s\t%s\t%s\n", c, now[c] / v, now[c], v, field("unit")
      else printf "%s\t-\t-\t%s\t%s\n", c, v, field("unit")
    }' "$rows" "$work/baseline.jsonl" 2> /dev/null)
}

# The per-kernel profile against cuda_check (issue 31, item 4): tests/cuda/profile_rows.toml's
# one-layer model, whose row kernels run at cuda_check's 16384 x 4096 shapes, is profiled per
# kernel (`bench results --profile`: events around each kernel of the train step, in the model's
# order, the L2 as the step leaves it); each bandwidth row of the timing section above (that
# kernel alone, the L2 flushed, the median) gets the profile's GB/s of the same kernel and dtype
# beside it, and their ratio. Where the model's shape is cuda_check's (the norms, the GLU
# forward, the adds) the two must agree within 15 % on a GPU (PASS / FAIL); RoPE (on fused qkv
# rows), AdamW (the model's parameters) and the cross-entropy (16384 logit rows) run at other
# shapes and are INFO. The dry run checks the path: its figures are the CPU's, always INFO.
section_profile() {
  local dev=$device s
  [ "$dry" -eq 1 ] && dev=cpu
  rm -f "$work/profile-rows.db"
  run_capped 120 20 profile bench --db "$work/profile-rows.db" -q run --device "$dev" --threads "$cpu_threads" \
    tests/cuda/profile_rows.toml > "$work/profile-rows.txt" 2>&1
  s=$?
  timed_out profile "$s" && return
  [ "$s" -eq 75 ] && return
  # A failed case (its row says why) leaves the others' profiles to compare.
  [ "$s" -ne 0 ] && row profile "bench profile_rows" FAIL "" "" "exit $s: $(tail -n 1 "$work/profile-rows.txt")"
  bench --db "$work/profile-rows.db" query "SELECT c.label, p.component, p.pass, p.kernel, p.ms, p.bytes FROM profile p
    JOIN cases c ON c.id = p.case_id WHERE p.mode = 'train_step' AND p.bytes > 0" --format csv \
    > "$work/profile-rows.csv" 2>> "$log"
  local verdict check value detail
  # ("-": an empty value; tabs are whitespace to read, empty fields between them would collapse)
  while IFS=$'\t' read -r verdict check value detail; do
    [ "$value" = - ] && value=""
    row profile "$check" "$verdict" "$value" "x cuda_check" "$detail"
  done < <(python3 - "$work/profile-rows.csv" "$rows" "$dry" << 'PY' 2>> "$log"
import csv, json, re, sys
prof = list(csv.DictReader(open(sys.argv[1], newline="")))
timed = {}  # (kernel, dtype) -> (GB/s, ms) of cuda_check's bandwidth rows
for line in open(sys.argv[2]):
    r = json.loads(line)
    if r["section"] == "timing" and r["check"].startswith("bandwidth/") and r["value"] is not None:
        _, kernel, dt = r["check"].split("/")
        ms = re.search(r"([0-9.]+) ms", r["detail"])
        timed[(kernel, dt)] = (r["value"], ms.group(1) if ms else "?")
dry = sys.argv[3] == "1"
# cuda_check's row: (the case's norm or None for both, component or None, pass or None, kernel
# name prefixes, whether the model runs it at cuda_check's shape)
checks = [
    ("rmsnorm forward", "rmsnorm", "rmsnorm", "forward", ("NormForward",), True),
    ("rmsnorm backward", "rmsnorm", "rmsnorm", "backward", ("NormBackward", "ColumnSum"), True),
    ("layernorm forward", "layernorm", "layernorm", "forward", ("NormForward",), True),
    ("layernorm backward (+dw, db)", "layernorm", "layernorm", "backward", ("NormBackward", "ColumnSum"), True),
    ("swiglu forward", None, "swiglu", "forward", ("GluForward",), True),
    ("swiglu backward", None, "swiglu", "backward", ("GluBackward",), True),
    ("add", None, None, None, ("Add<",), True),
    ("rope (in place)", None, "rope", None, ("Rope",), False),
    ("adamw", None, None, "optimizer", ("AdamW<",), False),
    ("cross_entropy fwd+bwd", None, None, None, ("CrossEntropy<",), False),
]
for dtype, dt in (("float32", "float"), ("bfloat16", "bf16")):
    for name, norm, comp, pas, prefixes, same in checks:
        rows = [r for r in prof if f"dtype={dtype}" in r["label"] and (norm is None or f"norm={norm}" in r["label"])
                and (comp is None or r["component"] == comp) and (pas is None or r["pass"] == pas)
                and r["kernel"].startswith(prefixes)]
        check = f"{name}/{dt}"
        if not rows:
            print(f"FAIL\t{check}\t-\tno kernel {'|'.join(prefixes)} in the profile")
            continue
        ms = sum(float(r["ms"]) for r in rows)
        gbps = sum(float(r["bytes"]) for r in rows) / (ms * 1e-3) * 1e-9
        kernels = ", ".join(sorted({r["kernel"] for r in rows}))
        if (name, dt) not in timed:
            print(f"INFO\t{check}\t-\tprofile {gbps:.4g} GB/s ({ms:.4f} ms a step: {kernels}); no cuda_check row to compare")
            continue
        ref, ref_ms = timed[(name, dt)]
        ratio = gbps / ref if ref > 0 else float("inf")
        verdict = "INFO" if dry or not same else ("PASS" if 0.85 <= ratio <= 1.15 else "FAIL")
        shape = "the dry run's sizes" if dry else "cuda_check's shape" if same else "another shape than cuda_check's"
        print(f"{verdict}\t{check}\t{ratio:.3f}\tprofile {gbps:.4g} GB/s ({ms:.4f} ms a step: {kernels}) against "
              f"cuda_check {ref:.4g} GB/s ({ref_ms} ms a call); {shape}")
PY
  )
}

# The dry run checks the path, not the figures: an experiment it runs times each throughput mode
# in one round of 2 repetitions without warm-up (max_time = 0, as the tests' experiments do),
# instead of repeating rounds for up to 10 s while a busy machine's noise stays above the target
# (a norms.toml case took 13 s so, a cpu_scaling.toml case 40 s). Prints the file to run: a copy
# so cut in $work for the dry run, else the file itself.
dry_experiment() {  # FILE
  [ "$dry" -eq 1 ] || { echo "$1" && return; }
  local cut
  cut="$work/dry-$(basename "$1")"
  sed -E -e 's/^\[throughput\]$/[throughput]\nmax_time = 0/' -e 's/^((throughput\.)?repetitions) = .*/\1 = 2/' \
    -e 's/^((throughput\.)?warmup_time) = .*/\1 = 0.0/' "$1" > "$cut"
  echo "$cut"
}

steps_sql="SELECT c.label, s.step, s.loss, s.grad_norm, s.max_attn_logit FROM steps s
           JOIN cases c ON c.id = s.case_id ORDER BY c.ordinal, s.step"

# compare.py GPU.csv CPU.csv KIND TOL FLOOR: worst relative difference of the logged steps.
compare_steps() {
  python3 - "$@" << 'PY'
import csv, sys
gpu, cpu = (list(csv.reader(open(f))) for f in sys.argv[1:3])
tol, floor = float(sys.argv[4]), float(sys.argv[5])
bad = 0 if len(gpu) == len(cpu) > 1 else 1
worst = 0.0
for g, c in zip(gpu[1:], cpu[1:]):
    for x, y in zip(g[2:], c[2:]):
        rel = abs(float(x) - float(y)) / max(abs(float(y)), floor)
        worst = max(worst, rel)
        bad += rel > tol
print(f"{'PASS' if bad == 0 else 'FAIL'}\t{worst:.2e}\t{max(len(gpu) - 1, 0)} logged steps, {bad} over {tol:g}")
PY
}

# The model on the device against the same model on the CPU: every plugin family, 6 steps;
# float32 (sums in other orders: within 1e-3) and bfloat16 (bf16 roundings: within 3e-2).
section_model() {
  local f32=tests/cuda/every_component.toml
  # The dry run keeps only the stability cases, whose steps are compared: the guarded device's
  # run of all 14 cases, against the CPU bit for bit, is tests/cli/cli_test.cpp's.
  if [ "$dry" -eq 1 ]; then
    awk '/^\[/ { skip = ($0 == "[throughput]") } !skip' "$f32" > "$work/every_component.toml"
    f32="$work/every_component.toml"
  fi
  sed -e 's/^\[model\]$/[model]\ndtype = "bfloat16"/' "$f32" > "$work/every_component_bf16.toml"
  local kind exp tol floor dev s
  for kind in f32 bf16; do
    exp=$f32 tol=1e-3 floor=1e-6
    [ "$kind" = bf16 ] && exp="$work/every_component_bf16.toml" tol=3e-2 floor=1e-3
    for dev in "$device" cpu; do
      rm -f "$work/every-$kind-$dev.db"
      run_capped 120 10 model bench --db "$work/every-$kind-$dev.db" -q run --device "$dev" --threads "$cpu_threads" \
        "$exp" > "$work/every-$kind-$dev.txt" 2>&1
      s=$?
      timed_out model "$s" && return
      [ "$s" -eq 75 ] && return
      [ "$s" -ne 0 ] && row model "every_component $kind on $dev" FAIL "" "" "exit $s: $(tail -n 1 "$work/every-$kind-$dev.txt")"
      bench --db "$work/every-$kind-$dev.db" query "$steps_sql" --format csv > "$work/every-$kind-$dev.csv" 2>> "$log"
    done
    local r
    r=$(compare_steps "$work/every-$kind-$device.csv" "$work/every-$kind-cpu.csv" "$kind" "$tol" "$floor" 2>&1)
    IFS=$'\t' read -r verdict worst what <<< "$r"
    [ "$verdict" = PASS ] || verdict=FAIL
    row model "every_component $kind, $device vs cpu" "$verdict" "$worst" "max rel. diff" "${what:-$r}"
  done
}

# Two attention cores inside the same model: compare_cores NAME FILE A B REFUSED trains
# tests/cuda/FILE.toml's cases (one per core) and compares the logged steps of the case labelled
# with core A against B's (bf16: within 3e-2); compare_run compares another pair of the same run. A missing case is SKIPPED where the model's setup refused the core with
# a message holding REFUSED (the core cannot run on this target), else FAIL.
compare_cores() {
  local name=$1 file=$2 a=$3 b=$4 refused=$5
  rm -f "$work/$file.db"
  run_capped 90 10 cudnn bench --db "$work/$file.db" -q run --device "$device" "tests/cuda/$file.toml" \
    > "$work/$file.txt" 2>&1
  local s=$?
  timed_out cudnn "$s" && return 1
  [ "$s" -eq 75 ] && return 1
  bench --db "$work/$file.db" query "$steps_sql" --format csv > "$work/$file.csv" 2>> "$log"
  compare_run "$name" "$file" "$a" "$b" "$refused"
}

# Row `name`: core a's logged steps against core b's, both from compare_cores' run of `file`
# (one run serves every pair of its cores).
compare_run() {
  local name=$1 file=$2 a=$3 b=$4 refused=$5
  local r
  r=$(python3 - "$work/$file.csv" "$work/$file.txt" "$a" "$b" "$refused" << 'PY'
import csv, os, sys
path, text_path, a, b, refused = sys.argv[1:6]
rows = list(csv.reader(open(path)))[1:] if os.path.getsize(path) > 0 else []
# a label names its core's value as the last word of the axis ("kernel=ours", "core=flash"):
# exact words, so that "flash" does not take "flash_wgmma"'s rows.
def of(core):
    return [r for r in rows if any(w.split("=")[-1] == core for w in r[0].split())]
ra, rb = of(a), of(b)
if not ra or not rb:
    # SKIPPED only where the setup refused a core before any case ran (no steps at all, and its
    # message); a case that ran and one that did not, or any other failure, fails.
    text = open(text_path).read()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    why = [l for l in lines if refused in l][:1] or lines[-1:]
    skipped = not rows and refused in text
    print(("SKIPPED" if skipped else "FAIL") + "\t-\t" + (why[0] if why else f"no step of {a} or {b}"))
    sys.exit(0)
worst, bad = 0.0, 0 if len(ra) == len(rb) else 1
for x_row, y_row in zip(ra, rb):
    for x, y in zip(x_row[2:], y_row[2:]):
        rel = abs(float(x) - float(y)) / max(abs(float(y)), 1e-3)
        worst, bad = max(worst, rel), bad + (rel > 3e-2)
print(f"{'PASS' if bad == 0 else 'FAIL'}\t{worst:.2e}\t{len(ra)} logged steps, {bad} over 3e-2")
PY
)
  IFS=$'\t' read -r verdict worst what <<< "$r"
  case $verdict in PASS | FAIL | SKIPPED) ;; *) verdict=FAIL what="comparison failed: $r" ;; esac
  row cudnn "$name (bf16 model, $device)" "$verdict" "$worst" "max rel. diff" "$what"
}

# cuDNN's SDPA inside the model against our flash kernels (the model's setup refuses kernel =
# "cudnn" where the target cannot run it: the guarded device, a machine whose cuDNN does not
# load); then our wgmma flash forward against the mma.sync one, and the warp-specialized wgmma
# forward against it (tests/cuda/wgmma_vs_flash.toml, run once for both comparisons; refused off
# CUDA and on a GPU that is not compute capability 9.0).
section_cudnn() {
  compare_cores cudnn_vs_ours cudnn_vs_ours cudnn ours "kernel attention_cudnn_forward cannot run on" || return
  compare_cores wgmma_vs_flash wgmma_vs_flash flash_wgmma flash 'core = "flash' || return
  compare_run wgmma_ws_vs_flash wgmma_vs_flash flash_wgmma_ws flash 'core = "flash'
}

# The MFU target: a GPT-2-small train step, bf16 and float32, with and without CUDA graphs.
section_mfu() {
  rm -f "$work/gpt2-small.db"
  run_capped 150 30 mfu bench --db "$work/gpt2-small.db" -q run --device "$device" \
    "$(dry_experiment tests/cuda/gpt2_small.toml)" \
    > "$work/gpt2-small.txt" 2> "$work/gpt2-small.log"
  local s=$?
  timed_out mfu "$s" && return
  [ "$s" -eq 75 ] && return
  if [ "$s" -ne 0 ]; then
    row mfu gpt2_small FAIL "" "" "exit $s: $(tail -n 1 "$work/gpt2-small.log")"
    return
  fi
  # Both MFUs (docs/design.md): against the square GEMM of the device description, and against the
  # model's own GEMMs timed back to back (the case's mfu_model_gemms metric).
  local sql="SELECT c.label, t.mode, t.median_ms, t.tokens_per_s, t.mfu, t.flops_per_iter,
             (SELECT m.value FROM metrics m WHERE m.case_id = t.case_id AND m.name = 'mfu_model_gemms/' || t.mode)
             FROM throughput t JOIN cases c ON c.id = t.case_id ORDER BY c.ordinal"
  while IFS=, read -r label mode ms tps mfu flops mfu_gemms; do
    row mfu "gpt2_small $label $mode" INFO "${mfu:-}" "MFU" \
      "median $ms ms, $tps tokens/s; MFU against the model's own GEMMs: ${mfu_gemms:-none}"
    gpt2_flops=$flops
  done < <(bench --db "$work/gpt2-small.db" query "$sql" --format csv 2>> "$log" | tr -d '\r' | tail -n +2)
}

# norms.toml's model at its own size (tests/cuda/norms_small.toml: pre-norm RMSNorm, RoPE, SwiGLU,
# d_model 256, 4 layers, 4 heads, T 256, batch 16), float32 and bf16: bench's forward, train step
# and 100-step stability case, then the same model in PyTorch eager, torch.compile and CUDA-graph
# replay (scripts/torch_baseline.py --small) where python3 has torch. Its `fused` and
# `materializing` variants run float32 on those attention cores beside auto's (our float32 flash
# kernels on CUDA): the three cores' times at norms.toml's size. The dry run takes the file's [cpu] sizes on
# the CPU (the guarded device costs seconds a step).
section_small() {
  local dev=$device s
  [ "$dry" -eq 1 ] && dev=cpu
  rm -f "$work/small.db"
  run_capped 90 20 small bench --db "$work/small.db" -q run --device "$dev" --threads "$cpu_threads" \
    "$(dry_experiment tests/cuda/norms_small.toml)" > "$work/small.txt" 2>&1
  s=$?
  timed_out small "$s" && return
  [ "$s" -eq 75 ] && return
  [ "$s" -ne 0 ] && row small "bench norms_small" FAIL "" "" "exit $s: $(tail -n 1 "$work/small.txt")"
  local sql="SELECT c.label, t.mode, t.median_ms, t.tokens_per_s, t.mfu FROM throughput t
             JOIN cases c ON c.id = t.case_id ORDER BY c.ordinal"
  while IFS=, read -r label mode ms tps mfu; do
    row small "bench $label $mode" INFO "$ms" ms "$tps tokens/s, MFU (fraction) ${mfu:-none}"
  done < <(bench --db "$work/small.db" query "$sql" --format csv 2>> "$log" | tr -d '\r' | tail -n +2)
  sql="SELECT c.label, c.wall_s, c.status, (SELECT count(*) FROM steps s WHERE s.case_id = c.id)
       FROM cases c WHERE c.runner = 'stability' ORDER BY c.ordinal"
  while IFS=, read -r label wall st logged; do
    row small "bench $label stability" INFO "$wall" s "the whole case (its steps, 100 on a GPU, and evaluations): $st, $logged logged steps"
  done < <(bench --db "$work/small.db" query "$sql" --format csv 2>> "$log" | tr -d '\r' | tail -n +2)
  if [ "$dry" -eq 1 ] || ! python3 -c "import torch" > /dev/null 2>&1; then
    row small "PyTorch norms_small" SKIPPED "" "" "$([ "$dry" -eq 1 ] && echo "dry run: no GPU" || echo "python3 has no torch here")"
    return
  fi
  run_capped 180 30 small python3 scripts/torch_baseline.py --small --budget 90 > "$work/torch-small.txt" 2>&1
  s=$?
  cat "$work/torch-small.txt" >> "$log"
  local tag check value unit detail
  while IFS=$'\t' read -r tag check value unit detail; do
    # "-": an empty field (tabs are whitespace to read: empty fields between them would collapse).
    [ "$unit" = - ] && unit=""
    [ "$tag" = ROW ] && row small "$check" INFO "$value" "$unit" "$detail"
  done < "$work/torch-small.txt"
  timed_out small "$s" && return
  case "$s" in
    0 | 75) ;;
    77) row small "PyTorch norms_small" SKIPPED "" "" "$(tail -n 1 "$work/torch-small.txt")" ;;
    *) row small "PyTorch norms_small" FAIL "" "" "exit $s: $(tail -n 1 "$work/torch-small.txt")" ;;
  esac
}

# experiments/norms.toml on the device, every case, with 100 stability steps instead of 1000 (the
# whole file took about 10 minutes on the H200: more than a check's budget); the row has its wall time.
section_norms() {
  sed -e 's/^steps = 1000\b/steps = 100/' "$(dry_experiment experiments/norms.toml)" > "$work/norms-gpu.toml"
  # The dry run takes the file's [cpu] sizes (the guarded device's), cut to a few steps and
  # short timings: it checks the path, not the figures.
  [ "$dry" -eq 1 ] && sed -i -e 's/^steps = 100\b/steps = 5/' -e 's/^stability\.steps = [0-9]*/stability.steps = 5/' \
    -e 's/^throughput\.repetitions = [0-9]*/throughput.repetitions = 2/' \
    -e 's/^throughput\.min_time = .*/throughput.min_time = 0.01/' -e 's/^modes = .*/modes = ["train_step"]/' \
    -e 's/^lr = \[3e-3, 3e-2\]/lr = 3e-3/' "$work/norms-gpu.toml"
  rm -f "$work/norms-gpu.db"
  # On the guarded device a step costs seconds (every kernel unprotects and protects its memory):
  # the dry run takes the CPU here, the model section having run the guarded device already.
  local dev=$device
  [ "$dry" -eq 1 ] && dev=cpu
  local t0=$SECONDS
  run_capped 240 30 norms bench --db "$work/norms-gpu.db" run --device "$dev" --threads "$cpu_threads" \
    "$work/norms-gpu.toml" > "$work/norms-gpu.txt" 2> "$work/norms-gpu.log"
  local s=$?
  local wall=$((SECONDS - t0))
  timed_out norms "$s" && return
  [ "$s" -eq 75 ] && return
  local n
  # (bench's CSV ends its lines with CRLF, RFC 4180: the CR is dropped before the shell reads it)
  n=$(bench --db "$work/norms-gpu.db" query "SELECT count(*) FROM cases WHERE status = 'completed'" --format csv \
    2>> "$log" | tr -d '\r' | tail -n 1)
  if [ "$s" -eq 0 ]; then
    row norms "bench run norms.toml (100 steps)" PASS "${n:-}" "cases completed" "wall ${wall} s; table in norms-gpu.txt"
  else
    row norms "bench run norms.toml (100 steps)" FAIL "${n:-}" "cases completed" \
      "wall ${wall} s; exit $s: $(tail -n 1 "$work/norms-gpu.log")"
  fi
}

# bench's FLOPs of one train step of tests/cuda/gpt2_small.toml as the file has it (no [cpu]
# overrides: torch_baseline's GPT-2 is 8 x 1024 tokens), from `bench calc`; empty when it fails.
gpt2_step_flops() {
  bench calc tests/cuda/gpt2_small.toml --device cuda --format json 2>> "$log" | python3 -c '
import json, sys
rows = json.load(sys.stdin)
rows = rows if isinstance(rows, list) else next(v for v in rows.values() if isinstance(v, list))
print("%.6g" % (float(rows[0]["flops_declared_train_per_token"]) * 8 * 1024))' 2>> "$log"
}

# PyTorch eager, torch.compile and SDPA on the same shapes, where python3 has torch.
section_torch() {
  if ! python3 -c "import torch" > /dev/null 2>&1; then
    row torch torch_baseline SKIPPED "" "" "python3 has no torch here"
    return
  fi
  # GPT-2-small's FLOPs per step for PyTorch's MFU: the mfu section's, else bench's own count
  # without a run (`bench calc`: declared train FLOP/token x the step's 8 x 1024 tokens), so that
  # the column does not depend on which sections ran.
  [ -z "$gpt2_flops" ] && gpt2_flops=$(gpt2_step_flops)
  run_capped 240 40 torch python3 scripts/torch_baseline.py --bench "$json" --out "$out" ${gpt2_flops:+--gpt2-flops "$gpt2_flops"} \
    > "$work/torch.txt" 2>&1
  local s=$?
  cat "$work/torch.txt" >> "$log"
  timed_out torch "$s" && return
  case "$s" in
    0) row torch torch_baseline PASS "" "" "table in torch-baseline.md" ;;
    75) ;;
    77) row torch torch_baseline SKIPPED "" "" "$(tail -n 1 "$work/torch.txt")" ;;
    *) row torch torch_baseline FAIL "" "" "exit $s: $(tail -n 1 "$work/torch.txt")" ;;
  esac
}

# The host's CPU path (issue 36): scripts/cpu-scaling.sh's train steps at 1, 2, 4, ... threads up
# to the CPUs this process may use, then 8x them, with the STREAM copy bandwidth and the fp32 GEMM
# rate of each run; a row per thread count, the table in cpu-scaling.md of the archive. The dry
# run stops at 1 thread and skips the 8x row (CPU_SCALING_MAX=1): it checks the path.
section_cpu() {
  local wrapper="$work/bench-program"
  printf '#!/bin/sh\nexec %s "$@"\n' "$(printf '%q ' "${launcher[@]}" "$(program bench)")" > "$wrapper"
  chmod +x "$wrapper"
  rm -f "$work/cpu-scaling.db"
  local env_max=()
  [ "$dry" -eq 1 ] && env_max=(CPU_SCALING_MAX=1 "CPU_SCALING_EXPERIMENT=$(dry_experiment experiments/cpu_scaling.toml)")
  run_capped 200 30 cpu env "${env_max[@]}" scripts/cpu-scaling.sh "$wrapper" "$work/cpu-scaling.db" \
    > "$work/cpu-scaling.md" 2> "$work/cpu-scaling.log"
  local s=$?
  timed_out cpu "$s" && return
  [ "$s" -eq 75 ] && return
  local why line t small sx large lx copy gemm
  why=$(sed -n 's/^### CPU scaling (\(.*\))$/\1/p' "$work/cpu-scaling.md")
  while IFS= read -r line; do
    IFS='|' read -r _ t small sx large lx copy gemm _ <<< "${line// /}"
    row cpu "train step at ${t/(/ (} threads" INFO "$large" ms \
      "d256: $lx, d128: $small ms, $sx; copy $copy GB/s, fp32 GEMM $gemm GFLOP/s; $why"
  done < <(grep -E '^\| [0-9]' "$work/cpu-scaling.md")
  [ "$s" -eq 0 ] || row cpu cpu-scaling.sh FAIL "" "" "exit $s: $(tail -n 1 "$work/cpu-scaling.log")"
}

# Issue 31's targets, read from the timing section's rows (no program runs, so no budget is
# needed; before torch, whose table names the fastest of our flash kernels from these rows): every
# row kernel of the timing section at 85 % of the copy or more (the norm backwards 75 %), each
# a row MET or BELOW with its share; then the fastest of our bf16 flash forwards against 300
# TFLOP/s and of our backwards against 240 (B 4, H 16, T 4096, d 128, causal), without dropout
# and with it, cuDNN's beside them. "Ahead of PyTorch" is torch-baseline.md's. The dry run's
# figures are the CPU's: INFO rows, the path only. GPU_CHECK_TARGET_ROWS=FILE (tests): rows of
# the JSON's form read after the run's own, as if the timing section had written them.
section_targets() {
  local check verdict value unit detail
  while IFS=$'\t' read -r check verdict value unit detail; do
    # ("-": an empty field, which read would collapse with the tabs around it)
    [ "$value" = - ] && value=""
    [ "$unit" = - ] && unit=""
    [ "$dry" -eq 1 ] && [ "$verdict" != INFO ] && detail="dry run, the CPU's figures, would be $verdict: $detail" && verdict=INFO
    row targets "$check" "$verdict" "$value" "$unit" "$detail"
  done < <(awk "$awk_field"'
    field("section") == "timing" && field("value") != "" {
      if (!(field("check") in v)) order[n++] = field("check")
      v[field("check")] = field("value") + 0
    }
    function best(re, label, target,   i, c, top, name, line) {
      top = -1
      for (i = 0; i < n; i++) { c = order[i]; if (c ~ re && v[c] > top) { top = v[c]; name = c } }
      if (top < 0) { printf "%s\tINFO\t-\t-\tno figure: none of its rows was timed in this run\n", label; return }
      line = sprintf("target %d TFLOP/s; the fastest: %s", target, name)
      printf "%s\t%s\t%.1f\tTFLOP/s\t%s\n", label, (top >= target ? "MET" : "BELOW"), top, line
    }
    END {
      copy = v["ceiling/copy"]
      met = 0; all = 0
      for (i = 0; i < n; i++) {
        c = order[i]
        if (c !~ /^bandwidth\//) continue
        if (copy <= 0) { printf "%s\tINFO\t-\t-\tno copy ceiling in this run to divide by\n", c; continue }
        t = (c ~ /^bandwidth\/(rmsnorm|layernorm) backward/) ? 75 : 85
        pct = 100 * v[c] / copy; all++; if (pct >= t) met++
        printf "%s\t%s\t%.1f\t%% of copy\ttarget %d %%; %.4g GB/s against the copy'"'"'s %.4g\n", c, (pct >= t ? "MET" : "BELOW"), pct, t, v[c], copy
      }
      if (all > 0) printf "row kernels at their target\tINFO\t%d\tof %d\t85 %% of the copy, the norm backwards 75 %%\n", met, all
      best("^attention/flash (wgmma (ws (tma )?)?)?forward( keys 64)?$", "attention forward, the fastest of ours", 300)
      best("^attention/flash (wgmma (ws (tma )?)?)?forward( keys 64)? dropout 0\\.1$", "attention forward dropout 0.1, the fastest of ours", 300)
      best("^attention/flash (wgmma )?backward( (heaviest first|bulk dq|tma|ws))?$", "attention backward, the fastest of ours", 240)
      best("^attention/flash (wgmma )?backward( (heaviest first|bulk dq|tma|ws))? dropout 0\\.1$", "attention backward dropout 0.1, the fastest of ours", 240)
      if ("attention/cudnn forward" in v) printf "attention forward, cuDNN\tINFO\t%.1f\tTFLOP/s\tthe default where it is faster\n", v["attention/cudnn forward"]
      if ("attention/cudnn backward" in v) printf "attention backward, cuDNN\tINFO\t%.1f\tTFLOP/s\tthe default where it is faster\n", v["attention/cudnn backward"]
    }' "$rows" ${GPU_CHECK_TARGET_ROWS:+"$GPU_CHECK_TARGET_ROWS"})
}

for s in "${all_sections[@]}"; do
  want "$s" || continue
  echo "== section $s at ${SECONDS}s" >> "$log"
  began=$SECONDS
  "section_$s"
  row "$s" "(section wall time)" INFO "$((SECONDS - began))" s "of the ${budget} s budget; $(left) s left"
  flush
done
echo "gpu-check: exit $status after ${SECONDS}s; table in $md" | tee -a "$log" >&2
rm -rf "$work"
exit "$status"
