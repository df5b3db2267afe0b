#!/usr/bin/env bash
# compile_log.sh LOG COMMAND...: runs COMMAND (a compile, as a target's RULE_LAUNCH_COMPILE),
# writes its standard error to LOG, and passes that on but for ptxas's "info" lines (-Xptxas -v:
# the registers and spills of every kernel), which tests read from LOG (kernels/CMakeLists.txt).
# LOG is replaced only when the command succeeds. The exit status is the command's.
set -uo pipefail
log=$1
shift
"$@" 2> "$log.tmp"
status=$?
grep -v -e '^ptxas info' -e '^ *[0-9]* bytes stack frame' "$log.tmp" >&2
if [ $status -eq 0 ]; then mv -f "$log.tmp" "$log"; else rm -f "$log.tmp"; fi
exit $status
