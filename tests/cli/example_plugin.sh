#!/usr/bin/env bash
# The documented path of docs/plugins.md, as a test: install bench, build plugins/example out of
# tree against it with find_package(bench), and run an experiment that loads it through
# plugin_paths, with its FFN and its attention core. Usage: example_plugin.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/plugins/example" -B "$work/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/example" > "$work/build.log"
test -f "$work/example/libbench_relu2.so"
test -f "$work/example/libbench_rowwise_core.so"
# Where bench has CUDA, the plugin's CUDA pass built its programs' CUDA builds beside it.
if [ -f "$work/prefix/lib/libbench_cuda.so" ] || [ -f "$work/prefix/lib64/libbench_cuda.so" ]; then
  test -f "$work/example/cuda/libbench_relu2_cuda.so" || { echo "no CUDA pass for the example plugin" >&2; exit 1; }
fi

cat > "$work/relu2.toml" <<TOML
name = "relu2-test"
plugin_paths = ["example"]
[model]
d_model = 32
n_layers = 2
n_heads = 2
seq_len = 16
batch_size = 4
ffn = ["swiglu", "relu2"]
[data]
reference_tokens = 4096
[throughput]
modes = ["train_step"]
repetitions = 2
min_time = 0.01
warmup_time = 0.0
max_time = 0
[stability]
steps = 20
lr = 1e-2
eval_batches = 1
TOML

"$work/prefix/bin/bench" list components --experiment "$work/relu2.toml" > "$work/list.txt"
grep -q "relu2 .*squared-ReLU" "$work/list.txt"
OMP_WAIT_POLICY=PASSIVE "$work/prefix/bin/bench" -q --db "$work/r.db" run "$work/relu2.toml" > "$work/out.txt"
grep -q "ffn=relu2" "$work/out.txt"
n=$("$work/prefix/bin/bench" --db "$work/r.db" query \
    "SELECT count(*) FROM cases WHERE label = 'ffn=relu2' AND status = 'completed'" --format csv | tail -n 1 | tr -d '\r')
if [ "$n" != "2" ]; then
  echo "expected 2 completed relu2 cases, found $n" >&2
  cat "$work/out.txt" >&2
  exit 1
fi
# The attention core of the other example plugin, chosen by the causal attention's core key.
"$work/prefix/bin/bench" list cores --experiment "$work/relu2.toml" > "$work/cores.txt"
grep -q "^rowwise .*exact softmax attention" "$work/cores.txt"
grep -q "example/libbench_rowwise_core.so" "$work/cores.txt"
sed 's/^ffn = .*/attention = { type = "causal", core = "rowwise" }/' "$work/relu2.toml" > "$work/rowwise.toml"
OMP_WAIT_POLICY=PASSIVE "$work/prefix/bin/bench" -q --db "$work/r.db" run "$work/rowwise.toml" > "$work/out2.txt"
n=$("$work/prefix/bin/bench" --db "$work/r.db" query \
    "SELECT count(*) FROM cases WHERE run_id = (SELECT max(id) FROM runs) AND status = 'completed'
     AND config_json LIKE '%rowwise%'" --format csv | tail -n 1 | tr -d '\r')
if [ "$n" != "2" ]; then
  echo "expected 2 completed cases with the rowwise core, found $n" >&2
  cat "$work/out2.txt" >&2
  exit 1
fi
# A plugin built against other headers is refused with the file named.
grep -q "bench-abi-" "$work/prefix/include/bench/abi_tag.h"
echo "example plugins: built out of tree, loaded through plugin_paths, 2 relu2 cases and 2 rowwise-core cases completed"
