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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() {  # DESCRIPTION CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what" && fails=$((fails + 1)); fi
}
# A copy of the tracked and untracked (not ignored) files, as the script's own working-tree copy.
copy() {
  (cd "$src" && git ls-files -z -c -o --exclude-standard | xargs -0 cp --parents -t "$1" 2> /dev/null)
}
file=plugins/example/relu2_ffn.cpp

mkdir -p "$tmp/comment" && copy "$tmp/comment"
sed -i 's|^// y = relu(x)^2, one tile of 1024 elements per program.|// y = relu(x) squared, a tile of 1024 a program.|' "$tmp/comment/$file"
check "the comment was changed in the copy" bash -c "! cmp -s '$src/$file' '$tmp/comment/$file'"
python3 "$src/scripts/cuda_same.py" --build "$build" --base-dir "$tmp/comment" "$unit" > "$tmp/comment.txt" 2>&1
status=$?
cat "$tmp/comment.txt"
check "a comment changed: exit 0 (got $status)" [ "$status" -eq 0 ]
check "a comment changed: the cubin the same" grep -q "^same .*$unit sm_90" "$tmp/comment.txt"

mkdir -p "$tmp/code" && copy "$tmp/code"
sed -i 's|tl::store(c, y + off, r \* r, n - off);|tl::store(c, y + off, r * r * r, n - off);|' "$tmp/code/$file"
check "the forward was changed in the copy" bash -c "! cmp -s '$src/$file' '$tmp/code/$file'"
python3 "$src/scripts/cuda_same.py" --build "$build" --base-dir "$tmp/code" "$unit" > "$tmp/code.txt" 2>&1
status=$?
cat "$tmp/code.txt"
check "the forward changed: exit 1 (got $status)" [ "$status" -eq 1 ]
check "the forward changed: the cubin differs" grep -q "^DIFFERS .*$unit sm_90" "$tmp/code.txt"

if [ $fails -ne 0 ]; then
  echo "cuda_same_test: $fails failed"
  exit 1
fi
echo "cuda_same_test: passed"
