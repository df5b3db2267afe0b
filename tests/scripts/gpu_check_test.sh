#!/usr/bin/env bash
# scripts/gpu-check.sh --dry-run end to end, without a GPU (the script's header says how): every
# section runs, on the guarded device and the CPU executor; $OUT holds at most six files; every row
# is in the markdown table and in the JSON; a check made to fail (GPU_CHECK_FAIL) is a FAIL row
# with its message and the checks after it still run; a check made to hang with SIGTERM ignored
# (GPU_CHECK_HANG) is killed by `timeout -k` within its section's cap, the rows its program wrote
# before stay, the section gets its TIMEOUT row and the sections after it run; the exit status
# says that something failed. The baseline section's now / then rows (the same build as the
# baseline) and the targets section, on the dry run's rows and then on a GPU's figures given
# through GPU_CHECK_TARGET_ROWS (MET and BELOW, by name).
#   gpu_check_test.sh BUILD_DIR SOURCE_DIR      exit 0 pass, 1 fail, 77 skipped (no CUDA build)
set -uo pipefail
build=$(cd "$1" && pwd)
src=$2
if [ ! -x "$build/bin/cuda_check" ]; then
  echo "gpu_check_test: this build has no cuda_check (no CUDA toolkit): skipped"
  exit 77
fi
# shellcheck source=tests/scripts/check.sh
source "$(dirname "$0")/check.sh"  # $tmp, check, $fails

fail_check="bandwidth/add/float"     # made to throw
hang_check="bandwidth/adamw/bf16"    # made to hang, after it (bf16 rows come after float ones)
# The timing section's cap: long enough for the rows before the failing check (the copy and GEMM
# ceilings, six bandwidth rows: about 6 s on an idle 2-core machine) on a loaded one; at 12 s a
# machine at load 8 killed the section before it reached the failing check.
cap=20
start=$SECONDS
OUT="$tmp/out" GPU_CHECK_FAIL="$fail_check" GPU_CHECK_HANG="$hang_check" GPU_CHECK_CAP_TIMING=$cap \
  "$src/scripts/gpu-check.sh" --dry-run --bin "$build/bin" --budget 600 > "$tmp/stdout.txt" 2> "$tmp/stderr.txt"
status=$?
took=$((SECONDS - start))
md="$tmp/out/gpu-check.md"
echo "gpu-check --dry-run: exit $status after ${took}s"
sed -n '1,200p' "$md"

check "exit status 1 (a check failed on purpose)" [ "$status" -eq 1 ]
n_files=$(find "$tmp/out" -type f | wc -l)
check "at most 6 files in \$OUT (got $n_files: $(find "$tmp/out" -type f -printf '%f ')))" [ "$n_files" -le 6 ]
for f in gpu-check.md gpu-check.json gpu-check.log gpu-check-files.tar.xz; do
  check "\$OUT/$f exists" [ -s "$tmp/out/$f" ]
done
for s in facts kernels timing baseline profile model cudnn mfu small norms torch cpu targets; do
  check "a row of section $s" grep -q "^| $s | " "$md"
  check "the wall time row of section $s" grep -Eq "^\| $s \| \(section wall time\) \| INFO \| [0-9]+ \| s \|" "$md"
done
# The small section: bench's forward and train step of norms.toml's model in both dtypes, and its
# stability case's wall time; PyTorch's half is skipped in a dry run, with the reason.
for dt in float32 bfloat16; do
  check "small: bench's $dt train step timed" grep -Eq "^\| small \| bench .*$dt.* train_step \| INFO \| [0-9.]+ \| ms \|" "$md"
  check "small: bench's $dt forward timed" grep -Eq "^\| small \| bench .*$dt.* forward \| INFO \| [0-9.]+ \| ms \|" "$md"
  check "small: bench's $dt stability case's wall time" \
    grep -Eq "^\| small \| bench .*$dt.* stability \| INFO \| [0-9.]+ \| s \| .*completed" "$md"
done
check "small: PyTorch SKIPPED in the dry run, with the reason" grep -q "^| small | PyTorch norms_small | SKIPPED | .*dry run" "$md"
# The cpu section: scripts/cpu-scaling.sh's rows, at 1 thread and at the default team in a dry run.
check "cpu: the train step at 1 thread, with copy bandwidth and GEMM rate" \
  grep -Eq "^\| cpu \| train step at 1 threads \| INFO \| [0-9.]+ \| ms \| d256: 1\.00x, d128: [0-9.]+ ms, 1\.00x; copy [0-9.]+ GB/s, fp32 GEMM [0-9]+ GFLOP/s; [0-9]+ threads" "$md"
check "cpu: no failed scaling run" bash -c "! grep -q '^| cpu | cpu-scaling.sh | FAIL' '$md'"
# The profile section: the model's per-kernel GB/s beside every bandwidth row of cuda_check, in
# both dtypes; INFO in a dry run, with the ratio where cuda_check's row finished (the float rows
# before the hung check; not the failed one).
for k in "rmsnorm forward" "rmsnorm backward" "layernorm forward" "layernorm backward (+dw, db)" "swiglu forward" \
  "swiglu backward" add \
  "rope (in place)" adamw "cross_entropy fwd+bwd"; do
  for dt in float bf16; do
    check "profile: the row of $k/$dt" grep -Fq "| profile | $k/$dt | INFO | " "$md"
  done
done
check "profile: the ratio to cuda_check's row" \
  grep -Eq "^\| profile \| rmsnorm backward/float \| INFO \| [0-9.]+ \| x cuda_check \| profile [0-9.]+ GB/s \(.*NormBackward.*\) against cuda_check [0-9.]+ GB/s" "$md"
check "profile: no ratio to the failed check" grep -Eq "^\| profile \| add/float \| INFO \| - \| .*no cuda_check row" "$md"
# The baseline section: the baseline's cuda_check (in a dry run the same build, without the test
# hooks) beside every timing row of the same name, now / then; a row the timing section did not
# time (the failed check) has the baseline's figure alone.
check "baseline: the baseline's commit" grep -q "^| baseline | baseline's commit | INFO | - | - | the local build (dry run) |" "$md"
check "baseline: now / then of a row both timed" \
  grep -Eq "^\| baseline \| bandwidth/rmsnorm forward/float \| INFO \| [0-9.]+ \| now/then \| now [0-9.e+-]+ GB/s, at the baseline [0-9.e+-]+ GB/s \|" "$md"
check "baseline: the failed check has the baseline's figure alone" \
  grep -Eq "^\| baseline \| $fail_check \| INFO \| - \| - \| at the baseline [0-9.e+-]+ GB/s; not timed by this commit" "$md"
check "baseline: the hung check ran there (no hook)" grep -Eq "^\| baseline \| $hang_check \| INFO \| - \| - \| at the baseline" "$md"
check "norms: the row has the run's wall time" grep -Eq "^\| norms \| .*\| wall [0-9]+ s" "$md"
check "the failed check's FAIL row, with its message" grep -q "^| timing | $fail_check | FAIL | .*failed on purpose" "$md"
# shellcheck disable=SC2016  # awk's own $0
check "a timing row after the failed check (the next check ran)" \
  awk -v f="| timing | $fail_check |" 'index($0, f) == 1 {seen = 1; next} seen && /^\| timing \| bandwidth\// {ok = 1} END {exit !ok}' "$md"
check "no row of the hung check (it never finished)" bash -c "! grep -q '^| timing | $hang_check |' '$md'"
check "the timing section's TIMEOUT row" grep -q "^| timing | (whole section) | TIMEOUT |" "$md"
check "sections after the hung one ran (model rows)" grep -q "^| model | every_component f32, guarded vs cpu | PASS |" "$md"
check "every_component bf16 on the guarded device matches the CPU" \
  grep -q "^| model | every_component bf16, guarded vs cpu | PASS |" "$md"
check "cuDNN on the guarded device is SKIPPED with the reason" \
  grep -q "^| cudnn | cudnn_vs_ours (bf16 model, guarded) | SKIPPED | .*cannot run on guarded" "$md"
check "the wgmma forward on the guarded device is SKIPPED with the reason" \
  grep -q '^| cudnn | wgmma_vs_flash (bf16 model, guarded) | SKIPPED | .*core = "flash.*run on CUDA' "$md"
check "the warp-specialized wgmma forward on the guarded device is SKIPPED with the reason" \
  grep -q '^| cudnn | wgmma_ws_vs_flash (bf16 model, guarded) | SKIPPED | .*core = "flash.*run on CUDA' "$md"
# The timing section starts within seconds; the next one must start within its cap (20 s), the
# 10 s between timeout's SIGTERM and its SIGKILL, and some slack for a loaded machine.
timing_at=$(sed -n 's/^== section timing at \([0-9]*\)s$/\1/p' "$tmp/out/gpu-check.log")
next_at=$(sed -n 's/^== section profile at \([0-9]*\)s$/\1/p' "$tmp/out/gpu-check.log")
gap=$((${next_at:-9999} - ${timing_at:-0}))
check "the hung check was killed within its cap plus the grace period (timing at ${timing_at}s, next at ${next_at}s)" \
  [ "$gap" -lt 53 ]
rows_md=$(grep '^| [a-z-]* | ' "$md" | grep -vc '^| section | check |')
rows_json=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$tmp/out/gpu-check.json" 2>&1)
check "the JSON parses and has every row of the table ($rows_md rows, JSON: $rows_json)" [ "$rows_md" = "$rows_json" ]
check "the archive holds the sections' files" \
  bash -c "tar -tJf '$tmp/out/gpu-check-files.tar.xz' | grep -q 'every-f32-guarded.db'"

check "targets: a row kernel against its target" \
  grep -Eq "^\| targets \| bandwidth/rmsnorm forward/float \| INFO \| [0-9.]+ \| % of copy \| dry run, the CPU's figures, would be (MET|BELOW): target 85 %" "$md"
check "targets: the row kernels' count" grep -Eq "^\| targets \| row kernels at their target \| INFO \| [0-9]+ \| of [0-9]+ \|" "$md"
check "targets: no attention figure in a dry run" \
  grep -q "^| targets | attention forward, the fastest of ours | INFO | - | - | no figure" "$md"

# A baseline that runs out of its cap: its TIMEOUT row, then the rows it finished compared. (A
# cuda_check that runs the real one, then sleeps when called with the baseline's --only.)
mkdir -p "$tmp/slow-bin"
for p in bench kernels_test; do ln -s "$build/bin/$p" "$tmp/slow-bin/$p"; done
printf '#!/bin/sh\n"%s" "$@"\ncase "$*" in *"ceiling/copy,bandwidth/"*) exec sleep 60 ;; esac\n' "$build/bin/cuda_check" \
  > "$tmp/slow-bin/cuda_check"
chmod +x "$tmp/slow-bin/cuda_check"
OUT="$tmp/slow" GPU_CHECK_CAP_BASELINE=8 "$src/scripts/gpu-check.sh" --dry-run --bin "$tmp/slow-bin" --only timing,baseline \
  > /dev/null 2>&1
check "baseline: out of its cap, a TIMEOUT row" grep -q "^| baseline | (whole section) | TIMEOUT | .*the rows below" "$tmp/slow/gpu-check.md"
check "baseline: out of its cap, the rows it finished compared" \
  grep -Eq "^\| baseline \| bandwidth/rmsnorm forward/float \| INFO \| [0-9.]+ \| now/then \|" "$tmp/slow/gpu-check.md"

# The targets section on figures as a GPU's timing section would write them (GPU_CHECK_TARGET_ROWS):
# a norm backward at 77.5 % of the copy meets its 75, the add at 82.5 % is below its 85; the
# fastest forward (320 TFLOP/s, the warp-specialized one) meets 300, the backward (230) is below 240.
cat > "$tmp/target-rows.jsonl" << 'ROWS'
{"section": "timing", "check": "ceiling/copy", "result": "INFO", "value": 4000, "unit": "GB/s", "detail": ""}
{"section": "timing", "check": "bandwidth/rmsnorm backward/bf16", "result": "INFO", "value": 3100, "unit": "GB/s", "detail": ""}
{"section": "timing", "check": "bandwidth/add/bf16", "result": "INFO", "value": 3300, "unit": "GB/s", "detail": ""}
{"section": "timing", "check": "attention/flash forward", "result": "INFO", "value": 200, "unit": "TFLOP/s", "detail": ""}
{"section": "timing", "check": "attention/flash wgmma ws forward", "result": "INFO", "value": 320, "unit": "TFLOP/s", "detail": ""}
{"section": "timing", "check": "attention/flash wgmma backward tma", "result": "INFO", "value": 230, "unit": "TFLOP/s", "detail": ""}
ROWS
OUT="$tmp/targets" GPU_CHECK_TARGET_ROWS="$tmp/target-rows.jsonl" \
  "$src/scripts/gpu-check.sh" --dry-run --bin "$build/bin" --only targets > /dev/null 2>&1
t="$tmp/targets/gpu-check.md"
check "targets: the norm backward at 77.5 % meets its 75" \
  grep -q "^| targets | bandwidth/rmsnorm backward/bf16 | INFO | 77.5 | % of copy | .*would be MET: target 75 %; 3100 GB/s against the copy's 4000 |" "$t"
check "targets: the add at 82.5 % is below its 85" \
  grep -q "^| targets | bandwidth/add/bf16 | INFO | 82.5 | % of copy | .*would be BELOW: target 85 %" "$t"
check "targets: 1 of 2 row kernels" grep -q "^| targets | row kernels at their target | INFO | 1 | of 2 |" "$t"
check "targets: the fastest forward, by name, meets 300" \
  grep -q "^| targets | attention forward, the fastest of ours | INFO | 320.0 | TFLOP/s | .*would be MET: target 300 TFLOP/s; the fastest: attention/flash wgmma ws forward |" "$t"
check "targets: the backward below 240" \
  grep -q "^| targets | attention backward, the fastest of ours | INFO | 230.0 | TFLOP/s | .*would be BELOW: target 240 TFLOP/s; the fastest: attention/flash wgmma backward tma |" "$t"

# --only reruns just what is named; a wrong section name is refused.
OUT="$tmp/only" "$src/scripts/gpu-check.sh" --dry-run --bin "$build/bin" --only facts,cudnn > /dev/null 2>&1
only_status=$?
check "--only facts,cudnn passes (exit $only_status)" [ "$only_status" -eq 0 ]
check "--only ran only those sections" bash -c "! grep -q '^| model ' '$tmp/only/gpu-check.md' && grep -q '^| facts ' '$tmp/only/gpu-check.md'"
"$src/scripts/gpu-check.sh" --dry-run --only nosuch > /dev/null 2>&1
check "an unknown section is refused (exit 2)" [ $? -eq 2 ]

if [ $fails -ne 0 ]; then
  echo "gpu_check_test: $fails failed; the script's stderr:"
  tail -n 40 "$tmp/stderr.txt"
  exit 1
fi
echo "gpu_check_test: all passed"
