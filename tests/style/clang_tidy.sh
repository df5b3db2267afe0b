#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy: warnings are errors) over the harness, the plugins and the
# kernels, two files at a time. Usage: clang_tidy.sh CLANG_TIDY BUILD_DIR SOURCE_DIR
set -euo pipefail
tidy=$1
build=$2
src=$3
cd "$src"
git ls-files 'harness/src/*.cpp' 'plugins/*.cpp' 'kernels/*.cpp' 2>/dev/null > /tmp/bench-tidy-files.$$ ||
  find harness/src plugins kernels -name '*.cpp' > /tmp/bench-tidy-files.$$
status=0
xargs -P2 -n4 "$tidy" -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option < /tmp/bench-tidy-files.$$ \
  > /tmp/bench-tidy-out.$$ 2> /dev/null || status=$?
rm -f /tmp/bench-tidy-files.$$
if [ $status -ne 0 ] || grep -q "error:" /tmp/bench-tidy-out.$$; then
  grep -A3 "error:" /tmp/bench-tidy-out.$$ | head -100
  rm -f /tmp/bench-tidy-out.$$
  exit 1
fi
rm -f /tmp/bench-tidy-out.$$
echo "clang-tidy: clean"
