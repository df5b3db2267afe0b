#!/usr/bin/env bash
# Fuzzes experiment loading and validation with libFuzzer for a bounded time.
# Usage: scripts/fuzz.sh [SECONDS=120] [JOBS=1]
# Seeds: every experiment of experiments/ and the broken-file corpus of tests/cli/bad/. New
# inputs that reach new code go to build/fuzz/corpus/; a crashing input is written to
# build/fuzz/findings/ and the script exits non-zero. A fixed finding joins tests/cli/bad/ (with
# its expected error in tests/cli/bad/EXPECTED) so the test suite keeps it fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
jobs=${2:-1}
cmake --preset fuzz > /dev/null
cmake --build --preset fuzz -j"$(nproc)"
mkdir -p build/fuzz/corpus build/fuzz/findings build/fuzz/seeds
cp experiments/*.toml tests/cli/bad/*.toml build/fuzz/seeds/
# Keys and values of the format, so the fuzzer can build valid files quickly.
dict=build/fuzz/toml.dict
{
  for w in '[model]' '[[variant]]' '[data]' '[stability]' '[throughput]' '[cpu]' '[cuda]' 'name' 'type' \
           'd_model' 'n_layers' 'n_heads' 'n_kv_heads' 'd_head' 'seq_len' 'batch_size' 'norm_position' \
           'norm' 'attention' 'ffn' 'position' 'block' 'window' 'pattern' 'softcap' 'qk_norm' 'scaling' \
           'factor' 'steps' 'lr' 'eval_lengths' 'seed' 'device' '= [' '= {' '"rope"' '"pre"' '"rmsnorm"'; do
    printf '"%s"\n' "${w//\"/\\\"}"
  done
} > "$dict"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
parallel=()
# -jobs > 1 forks workers that log to fuzz-N.log in the current directory: keep those in build/.
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); cd build/fuzz; prefix=; else prefix=build/fuzz/; fi
"${prefix}bin/experiment_fuzz" "${prefix}corpus" "${prefix}seeds" -dict="${prefix}toml.dict" \
  -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=4096 "${parallel[@]}" \
  -artifact_prefix="${prefix}findings/" -print_final_stats=1
