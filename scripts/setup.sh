#!/usr/bin/env bash
# Installs the Debian packages bench builds and runs with. Idempotent and quiet: packages that
# are already installed are left alone, and apt runs only when something is missing.
#   scripts/setup.sh --list     prints the list instead (tests/scripts/setup_packages_test.py
#                               checks it against what the configure and build read)
set -euo pipefail

packages=(
  build-essential cmake ninja-build git pkg-config  # toolchain (GCC brings OpenMP: libgomp)
  python3-numpy                                     # tests: the float64 NumPy reference of `bench eval`
  libboost-dev                                      # Boost.DLL (header-only)
  libboost-context-dev                              # Boost.Context: the warp emulator's fibers (tests)
  libtomlplusplus-dev                               # TOML++
  libcli11-dev libfmt-dev nlohmann-json3-dev        # CLI11, fmt, nlohmann-json
  libsqlite3-dev sqlite3                            # results database
  libdnnl-dev ocl-icd-opencl-dev                    # oneDNN: the CPU GEMM (its CMake config requires
                                                    # OpenCL, which libdnnl-dev only recommends)
  libbenchmark-dev                                  # Google Benchmark: the timing engine
  libsentencepiece-dev                              # SentencePiece: the text dataset's BPE tokenizer
  python3.11-doc                                    # the English corpus of the shipped text experiments
                                                    # (its reST sources, 11 MB; docs/experiments.md)
  libgtest-dev libgmock-dev                         # GoogleTest
  clang-format clang-tidy                           # house style, checked by the tests
  chromium                                          # headless check of `bench report`'s HTML
  clang libclang-rt-14-dev libomp-14-dev            # libFuzzer build (scripts/fuzz.sh)
  slurm-wlm munge                                   # tests/cluster: a one-node Slurm cluster for bench submit
)

if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" > /tmp/bench-setup.log 2>&1; then
  $sudo apt-get update -qq > /tmp/bench-setup.log 2>&1
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >> /tmp/bench-setup.log 2>&1 || {
    cat /tmp/bench-setup.log >&2
    exit 1
  }
fi
