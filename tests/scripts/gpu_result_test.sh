#!/usr/bin/env bash
# scripts/gpu-result.sh files a gpu-check table under DATE_COMMIT_CARD, named from the table
# itself (its header's date and commit, its facts row's GPU), with the JSON and PyTorch's table
# beside it and the log and archive left out; a second filing of the same run is refused, and a
# file that is not gpu-check's table too.
#   gpu_result_test.sh SOURCE_DIR      exit 0 pass, 1 fail
set -uo pipefail
src=$(cd "$1" && pwd)
# shellcheck source=tests/scripts/check.sh
source "$(dirname "$0")/check.sh"  # $tmp, check, $fails
mkdir -p "$tmp/out" "$tmp/results"
cat > "$tmp/out/gpu-check.md" << 'MD'
# gpu-check 2026-12-09T10:11:12Z, commit 0abc123

| section | check | result | value | unit | detail |
|---|---|---|---|---|---|
| facts | gpu | INFO | - | - | NVIDIA H100 80GB HBM3, 570.86.15, 81559 MiB, 1980 MHz |
MD
echo "[]" > "$tmp/out/gpu-check.json"
echo "| torch |" > "$tmp/out/torch-baseline.md"
echo "log" > "$tmp/out/gpu-check.log"
dest=$(GPU_RESULT_DIR="$tmp/results" "$src/scripts/gpu-result.sh" "$tmp/out")
status=$?
check "it files the run (exit $status)" [ "$status" -eq 0 ]
check "named by date, commit and card ($dest)" [ "$dest" = "$tmp/results/2026-12-09_0abc123_nvidia-h100-80gb-hbm3" ]
for f in gpu-check.md gpu-check.json torch-baseline.md; do
  check "$f filed" cmp -s "$tmp/out/$f" "$dest/$f"
done
check "the log left out" [ ! -e "$dest/gpu-check.log" ]
GPU_RESULT_DIR="$tmp/results" "$src/scripts/gpu-result.sh" "$tmp/out" > /dev/null 2>&1
check "a second filing is refused" [ $? -eq 1 ]
echo "# notes" > "$tmp/out/gpu-check.md"
GPU_RESULT_DIR="$tmp/results" "$src/scripts/gpu-result.sh" "$tmp/out" > /dev/null 2> "$tmp/err.txt"
check "a file that is not gpu-check's table is refused ($(cat "$tmp/err.txt"))" grep -q "not gpu-check's header" "$tmp/err.txt"
if [ $fails -ne 0 ]; then
  echo "gpu_result_test: $fails failed"
  exit 1
fi
echo "gpu_result_test: passed"
