#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer + UndefinedBehaviorSanitizer (preset "asan": no CUDA,
# build/asan) and runs it. Any ASan report or UBSan finding fails its test (-fno-sanitize-recover).
# The style checks (clang-format, clang-tidy) do not depend on the build, the Slurm cluster test
# exercises job scheduling rather than our code's memory, and the out-of-tree plugin test checks
# the install tree and find_package(bench) (the same plugin runs in tree under the sanitizers, in
# plugins_test): the three run in the main pass only.
# The `guarded` target's kernel cases also run in the main pass only: they run the `cpu` target's
# very launchers and arithmetic, on memory from one mmap reservation (kernels/memory.cpp) that
# ASan does not instrument (no redzones there), so under ASan they repeat the cpu cases with less
# checked. Every warp-emulator flash-attention case runs here (its fibers take the 14 cases about
# 10 s under ASan on 2 cores; with a thread per CUDA thread only the two smallest could).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan --log-level=WARNING > /dev/null
cmake --build --preset asan
export ASAN_OPTIONS=${ASAN_OPTIONS:-strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir build/asan --output-on-failure -j2 \
  -E '^(style\.|cluster\.|cli\.example_plugin_out_of_tree$)|[_/]guarded( |$)' "$@"
