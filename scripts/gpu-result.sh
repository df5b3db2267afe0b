#!/usr/bin/env bash
# Files a gpu-check run's table in the tree, as the guide asks of every GPU check: copies what the
# device tool fetched from $OUT (gpu-check.md, gpu-check.json, torch-baseline.md where there is
# one; the log and the archive stay out of git) into results/gpu/DATE_COMMIT_CARD/, named from the
# table itself: its header's UTC date and commit, and its `facts | gpu` row's card (the GPU's name,
# lower case, runs of other characters one '-'). Prints the folder; refuses to overwrite one.
#
#   scripts/gpu-result.sh FOLDER        FOLDER: where gpu-check.md lies (the run's files_at)
# GPU_RESULT_DIR replaces results/gpu (tests/scripts/gpu_result_test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "gpu-result: usage: scripts/gpu-result.sh FOLDER (where gpu-check.md lies)" >&2 && exit 2; }
md="$1/gpu-check.md"
[ -f "$md" ] || { echo "gpu-result: no $md" >&2 && exit 1; }
# "# gpu-check 2026-12-07T06:17:31Z, commit d95cd4d"
header=$(head -n 1 "$md")
if [[ ! $header =~ ^#\ gpu-check\ ([0-9]{4}-[0-9]{2}-[0-9]{2})T[0-9:]+Z,\ commit\ ([0-9a-f]+|unknown)$ ]]; then
  echo "gpu-result: $md: its first line is not gpu-check's header ('$header')" >&2
  exit 1
fi
date=${BASH_REMATCH[1]} commit=${BASH_REMATCH[2]}
# "| facts | gpu | INFO | - | - | NVIDIA H200, 570.86.15, 143771 MiB, 1980 MHz |": the name is the
# detail's first field.
card=$(awk -F'|' '{for (i = 2; i <= 7; i++) gsub(/^ +| +$/, "", $i)}
  $2 == "facts" && $3 == "gpu" {split($7, f, ","); print f[1]; exit}' "$md")
[[ $card == "no nvidia-smi"* ]] && card=""
card=$(echo "${card:-unknown}" | tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9]+/-/g; s/^-+|-+$//g')
grep -q "^\*\*Dry run without a GPU\*\*" "$md" && card="dry-run-$card"
dest="${GPU_RESULT_DIR:-results/gpu}/${date}_${commit}_${card:-unknown}"
if [ -e "$dest" ]; then
  echo "gpu-result: $dest exists already" >&2
  exit 1
fi
mkdir -p "$dest"
for f in gpu-check.md gpu-check.json torch-baseline.md; do
  [ -f "$1/$f" ] && cp "$1/$f" "$dest/"
done
echo "$dest"
