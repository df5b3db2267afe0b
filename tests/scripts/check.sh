# shellcheck shell=bash
# Sourced by the script tests of this folder: $tmp, a temporary folder removed when the test exits,
# and `check DESCRIPTION CONDITION...`, which prints ok / FAIL and counts the failures in $fails.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() {
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what" && fails=$((fails + 1)); fi
}
