#!/usr/bin/env bash
# The prepared device check (run on a lent GPU machine, see /work/.library/device): builds the
# CUDA executor's kernels and tests/cuda/cuda_check.cu with nvcc alone (the GPU machine has CUDA
# but not the project's Debian packages), checks every CUDA launcher against the CPU executor in
# float and bf16, the cuBLASLt GEMM and the flash attention forward and backward against float64
# references, the caching allocator, event timing and L2 flush; measures the GEMM ceiling, the
# flash attention rates, and the bandwidth of the row kernels, RoPE and AdamW at hidden 4096, and
# writes the table to $OUT; then, where python3 has PyTorch, scripts/torch_baseline.py puts
# PyTorch eager, torch.compile and SDPA's flash and cuDNN attention beside those figures
# ($OUT/torch-baseline.md); and with the bundle of scripts/gpu-bundle.sh carried, it runs the
# model on the GPU: tests/cuda/every_component.toml on CUDA and on the CPU, in float32 and in
# bfloat16, compared step by step (every-compare.txt; a failure fails the check), the model with
# cuDNN's SDPA against our flash kernels (tests/cuda/cudnn_vs_ours.toml; cudnn-compare.txt), the GPT-2-small
# train step's MFU in bf16 and float32 (tests/cuda/gpt2_small.toml; gpt2-small.txt), and `bench
# run experiments/norms.toml` (100 stability steps; norms-gpu.txt). Bounded at about 8 minutes by
# its timeouts.
#
#   OUT=/tmp/out scripts/gpu-check.sh      (after scripts/gpu-bundle.sh here; carry .gpu-bundle.tar.xz)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
log="$out/gpu-check.log"
{
  echo "== $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  nvcc --version | tail -n 2
} > "$log" 2>&1

build="$out/build"
mkdir -p "$build"
sources=(kernels/norm.cpp kernels/softmax.cpp kernels/cross_entropy.cpp kernels/rope.cpp kernels/activation.cpp
         kernels/adamw.cpp kernels/elementwise.cpp kernels/softcap.cpp kernels/caching_allocator.cpp
         kernels/memory.cpp kernels/dropout.cpp kernels/tile/parallel.cpp)
cuda_sources=(kernels/cuda/*.cu tests/cuda/cuda_check.cu)
pids=()
objs=()
for f in "${sources[@]}" "${cuda_sources[@]}"; do
  o="$build/$(echo "$f" | tr '/' '_').o"
  objs+=("$o")
  if [[ $f == *.cu ]]; then
    nvcc -std=c++20 -O3 -arch=sm_90 -DBENCH_HAVE_CUDA=1 -Xcompiler=-fopenmp -c "$f" -o "$o" >> "$log" 2>&1 &
  else
    g++ -std=c++20 -O3 -march=native -fopenmp -DBENCH_HAVE_CUDA=1 -Ikernels -I. -c "$f" -o "$o" >> "$log" 2>&1 &
  fi
  pids+=($!)
done
ok=1
for p in "${pids[@]}"; do wait "$p" || ok=0; done
if [ $ok -ne 1 ] || ! nvcc -arch=sm_90 "${objs[@]}" -o "$build/cuda_check" -lcublasLt -lgomp -ldl >> "$log" 2>&1; then
  echo "gpu-check: build failed, see $log" | tee -a "$log"
  tail -n 40 "$log"
  exit 1
fi
# cuDNN (opened with dlopen by the cuDNN SDPA baseline): the system's, else the pip wheel's that
# PyTorch brings (nvidia-cudnn-cu13; only its folder is added, so CUDA's own libraries stay the
# system's).
extra_libs=$(python3 - << 'PY' 2> /dev/null
import glob, os, site
seen = []
for d in site.getsitepackages():
    for f in glob.glob(os.path.join(d, "nvidia", "**", "libcudnn.so.9"), recursive=True):
        if os.path.dirname(f) not in seen:
            seen.append(os.path.dirname(f))
print(":".join(seen))
PY
)
echo "gpu-check: libraries from Python wheels: ${extra_libs:-none}" >> "$log"
# cuDNN's runtime-compiled engines (its flash attention among them) load NVRTC: the toolkit's.
[ -d /usr/local/cuda/lib64 ] && extra_libs="${extra_libs:+$extra_libs:}/usr/local/cuda/lib64"
LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$extra_libs" timeout 240 "$build/cuda_check" \
  "$out/gpu-check.md" "$out/gpu-check.json" 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}
rm -rf "$build"
# `bench run` on the GPU: experiments/norms.toml with 100 stability steps instead of 1000, from the
# bundle scripts/gpu-bundle.sh made here (carried as .gpu-bundle.tar.xz: this machine lacks the
# project's Debian packages), through the bundle's own loader and C library; CUDA's libraries are
# this machine's.
left() { echo $((460 - SECONDS)); }  # the whole check stays under 8 minutes
cap() { local l=$(($(left) - 10)); echo $((l < $1 ? (l > 1 ? l : 1) : $1)); }  # min(N, time left)
if [ -f .gpu-bundle.tar.xz ] && [ "$(left)" -gt 60 ]; then
  rm -rf /tmp/gpu-bundle && mkdir -p /tmp/gpu-bundle && tar -C /tmp/gpu-bundle -xJf .gpu-bundle.tar.xz
  b=/tmp/gpu-bundle/bench-bundle
  libs="$b/lib"
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/nvidia/lib64; do
    [ -d "$d" ] && libs="$libs:$d"
  done
  for l in libcublasLt.so.13 libcudart.so.13 libcuda.so.1; do
    p=$(ldconfig -p 2> /dev/null | awk -v l="$l" '$1 == l {print $NF; exit}')
    [ -n "$p" ] && libs="$libs:$(dirname "$p")"
  done
  [ -n "$extra_libs" ] && libs="$libs:$extra_libs"
  bench=("$b/lib/ld-linux-x86-64.so.2" --library-path "$libs" "$b/bin/bench")
  # 1. The model on the GPU against the same model on the CPU: every plugin family, 6 steps;
  #    float32 both (sums in other orders: losses, grad norms and max logits within 1e-3
  #    relative), then bfloat16 both (bf16 roundings of values that differ in the last float
  #    bits: within 3e-2, and 1e-3 absolute for values near zero).
  steps_sql="SELECT c.label, s.step, s.loss, s.grad_norm, s.max_attn_logit FROM steps s
             JOIN cases c ON c.id = s.case_id ORDER BY c.ordinal, s.step"
  sed -e 's/^\[model\]$/[model]\ndtype = "bfloat16"/' tests/cuda/every_component.toml > "$out/every_component_bf16.toml"
  : > "$out/every-compare.txt"
  for kind in f32 bf16; do
    exp=tests/cuda/every_component.toml tol=1e-3 floor=1e-6
    [ $kind = bf16 ] && exp="$out/every_component_bf16.toml" tol=3e-2 floor=1e-3
    for dev in cuda cpu; do
      rm -f "$out/every-$kind-$dev.db"
      timeout "$(cap 120)" "${bench[@]}" --db "$out/every-$kind-$dev.db" -q run --device "$dev" "$exp" \
        > "$out/every-$kind-$dev.txt" 2>&1
      echo "gpu-check: every_component $kind on $dev exit $?" | tee -a "$log"
      "${bench[@]}" --db "$out/every-$kind-$dev.db" query "$steps_sql" --format csv > "$out/every-$kind-$dev.csv" \
        2>> "$log"
    done
    python3 - "$out/every-$kind-cuda.csv" "$out/every-$kind-cpu.csv" "$kind" "$tol" "$floor" << 'PY' 2>&1 |
import csv, sys
gpu, cpu = (list(csv.reader(open(f))) for f in sys.argv[1:3])
kind, tol, floor = sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
bad = 0 if len(gpu) == len(cpu) > 1 else 1
worst = 0.0
for g, c in zip(gpu[1:], cpu[1:]):
    for x, y in zip(g[2:], c[2:]):
        rel = abs(float(x) - float(y)) / max(abs(float(y)), floor)
        worst = max(worst, rel)
        bad += rel > tol
print(f"every_component {kind}, CUDA vs CPU: {max(len(gpu) - 1, 0)} logged steps, worst relative difference "
      f"{worst:.2e}, {bad} over {tol:g}: {'PASS' if bad == 0 else 'FAIL'}")
PY
      tee -a "$log" "$out/every-compare.txt"
  done
  grep -q FAIL "$out/every-compare.txt" && status=1
  [ "$(grep -c PASS "$out/every-compare.txt")" -eq 2 ] || status=1
  # 1b. The cuDNN SDPA baseline inside the model against our flash kernels: the same bf16 model
  #     trained with kernel = "ours" and "cudnn" (tests/cuda/cudnn_vs_ours.toml), the two cases'
  #     logged steps within 3e-2 (cudnn-compare.txt; SKIPPED where cuDNN does not load).
  rm -f "$out/cudnn-vs-ours.db"
  timeout "$(cap 90)" "${bench[@]}" --db "$out/cudnn-vs-ours.db" -q run --device cuda tests/cuda/cudnn_vs_ours.toml \
    > "$out/cudnn-vs-ours.txt" 2>&1
  echo "gpu-check: cudnn_vs_ours exit $?" | tee -a "$log"
  "${bench[@]}" --db "$out/cudnn-vs-ours.db" query "$steps_sql" --format csv > "$out/cudnn-vs-ours.csv" 2>> "$log"
  python3 - "$out/cudnn-vs-ours.csv" "$out/cudnn-vs-ours.txt" << 'PY' 2>&1 | tee -a "$log" "$out/cudnn-compare.txt"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))[1:]
labels = sorted({r[0] for r in rows})
ours = [r for r in rows if "ours" in r[0]]
cudnn = [r for r in rows if "cudnn" in r[0]]
if not cudnn:  # SKIPPED only where cuDNN does not load; any other failure fails
    text = open(sys.argv[2]).read()
    why = [l.strip() for l in text.splitlines() if "cudnn" in l.lower()][:1]
    skip = "cuDNN cannot be used here" in text
    print(f"cudnn_vs_ours: {'SKIPPED' if skip else 'FAIL'} (no cuDNN step: {why[0] if why else 'see cudnn-vs-ours.txt'})")
    sys.exit(0)
worst, bad = 0.0, 0 if len(ours) == len(cudnn) > 0 else 1
for o, c in zip(ours, cudnn):
    for x, y in zip(o[2:], c[2:]):
        rel = abs(float(x) - float(y)) / max(abs(float(x)), 1e-3)
        worst, bad = max(worst, rel), bad + (rel > 3e-2)
print(f"cudnn_vs_ours ({', '.join(labels)}): {len(ours)} logged steps, worst relative difference {worst:.2e}, "
      f"{bad} over 3e-2: {'PASS' if bad == 0 else 'FAIL'}")
PY
  grep -q FAIL "$out/cudnn-compare.txt" && status=1
  # The MFU target: a GPT-2-small-sized train step, bf16 and float32 (tests/cuda/gpt2_small.toml).
  rm -f "$out/gpt2-small.db"
  timeout "$(cap 150)" "${bench[@]}" --db "$out/gpt2-small.db" run --device cuda tests/cuda/gpt2_small.toml \
    > "$out/gpt2-small.txt" 2> "$out/gpt2-small.log"
  echo "gpu-check: gpt2_small exit $?; table in $out/gpt2-small.txt" | tee -a "$log"
  grep -A8 "^throughput" "$out/gpt2-small.txt" | tee -a "$log"
  # 2. experiments/norms.toml on the GPU, with 100 stability steps instead of 1000.
  sed -e 's/^steps = 1000\b/steps = 100/' experiments/norms.toml > "$out/norms-gpu.toml"
  timeout "$(($(left) - 40))" "${bench[@]}" --db "$out/norms-gpu.db" run --device cuda "$out/norms-gpu.toml" \
    > "$out/norms-gpu.txt" 2> "$out/norms-gpu.log"
  echo "gpu-check: bench run norms on the GPU exit $?; table in $out/norms-gpu.txt, progress in norms-gpu.log" |
    tee -a "$log"
  tail -n 5 "$out/norms-gpu.log"
else
  echo "gpu-check: no .gpu-bundle.tar.xz (scripts/gpu-bundle.sh) or no time left: bench run skipped" | tee -a "$log"
fi
# PyTorch eager / torch.compile / SDPA (flash, cuDNN) on the same shapes, where python3 has torch.
if python3 -c "import torch" > /dev/null 2>&1 && [ "$(left)" -gt 60 ]; then
  timeout "$(left)" python3 scripts/torch_baseline.py --bench "$out/gpu-check.json" --out "$out" 2>&1 |
    tail -n 40 >> "$log"
  echo "gpu-check: torch_baseline exit ${PIPESTATUS[0]}; table in $out/torch-baseline.md" | tee -a "$log"
fi
echo "gpu-check: exit $status; table in $out/gpu-check.md" | tee -a "$log"
exit "$status"
