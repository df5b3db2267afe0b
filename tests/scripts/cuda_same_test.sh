#!/usr/bin/env bash
# scripts/cuda_same.py, on the example plugin's CUDA pass (a generated unit of the build, which
# #includes plugins/example/relu2_ffn.cpp by absolute path): against a copy of the source tree
# whose relu2_ffn.cpp has a comment changed, the cubins are the same bytes (exit 0: the same
# source compiled twice, at two paths' worth of trees, compares equal); against one whose
# forward squares relu(x) times itself once more, they differ (exit 1).
#   cuda_same_test.sh BUILD_DIR SOURCE_DIR      exit 0 pass, 1 fail, 77 skipped (no CUDA build)
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
unit=bench_relu2_example_cuda_pass/unit_0.cu
if ! grep -q "$unit" "$build/compile_commands.json" 2> /dev/null; then
  echo "cuda_same_test: this build has no CUDA pass of the example plugin (no nvcc): skipped"
  exit 77
fi
export PATH="$PATH:/usr/local/cuda/bin"
# shellcheck source=tests/scripts/check.sh
source "$(dirname "$0")/check.sh"  # $tmp, check, $fails
# A copy of the tracked and untracked (not ignored) files, as the script's own working-tree copy.
copy() {
  (cd "$src" && git ls-files -z -c -o --exclude-standard | xargs -0 cp --parents -t "$1" 2> /dev/null)
}
file=plugins/example/relu2_ffn.cpp

# against COPY SED_SCRIPT STATUS VERDICT: the script against a copy of the tree with SED_SCRIPT
# applied to relu2_ffn.cpp must exit STATUS and call the cubin VERDICT.
against() {
  local name=$1 status
  mkdir -p "$tmp/$name" && copy "$tmp/$name"
  sed -i "$2" "$tmp/$name/$file"
  check "$name: the copy was changed" bash -c "! cmp -s '$src/$file' '$tmp/$name/$file'"
  python3 "$src/scripts/cuda_same.py" --build "$build" --base-dir "$tmp/$name" "$unit" > "$tmp/$name.txt" 2>&1
  status=$?
  cat "$tmp/$name.txt"
  check "$name: exit $3 (got $status)" [ "$status" -eq "$3" ]
  check "$name: the cubin $4" grep -q "^$4 .*$unit sm_90" "$tmp/$name.txt"
}
against comment 's|^// y = relu(x)^2, one tile of 1024 elements per program.|// y = relu(x) squared, a tile of 1024 a program.|' 0 same
against code 's|tl::store(c, y + off, r \* r, n - off);|tl::store(c, y + off, r * r * r, n - off);|' 1 DIFFERS

if [ $fails -ne 0 ]; then
  echo "cuda_same_test: $fails failed"
  exit 1
fi
echo "cuda_same_test: passed"
