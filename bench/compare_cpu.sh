#!/usr/bin/env bash
# kiln's CPU backend beside PyTorch eager and torch.compile on the same CPU, in one run:
# kiln_bench_cpu and bench/torch_bench.py --device cpu at each thread count, then the full
# comparison at the largest count (bench/compare.py) and time against threads
# (bench/compare_threads.py), last.
#   bench/compare_cpu.sh [--quick] [--only ID,ID] [--no-block]       (THREADS="1 2 4 8 16")
# kiln_bench_cpu is $KILN_BENCH_CPU, else .devcpu/kiln_bench_cpu (the GPU machine: packed here
# with ../shared/scripts/device-cpu-pack.sh .devcpu build/bench/kiln_bench_cpu and carried; its
# libraries are unpacked next to it), else build/bench/kiln_bench_cpu. Outputs go to $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$(mktemp -d /tmp/kiln-compare-cpu-XXXXXX)}"
THREADS="${THREADS:-1 2 4 8 16}"
mkdir -p "$OUT"

bin="${KILN_BENCH_CPU:-}"
if [[ -z "$bin" && -x .devcpu/kiln_bench_cpu ]]; then
  bin=.devcpu/kiln_bench_cpu
  if [[ -f .devcpu/libs.tar.xz && ! -d .devcpu/lib ]]; then (cd .devcpu && tar xJf libs.tar.xz); fi
  export LD_LIBRARY_PATH="$PWD/.devcpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
[[ -z "$bin" ]] && bin=build/bench/kiln_bench_cpu
[[ -x "$bin" ]] || { echo "compare_cpu.sh: no kiln_bench_cpu ($bin)"; exit 1; }

# OpenBLAS's CPU detection does not know every model (the GPU machine's VM CPU gets its generic
# "Prescott" kernels, 2-3x slower: bench/NOTES.md); name the core from the CPU's flags unless
# the caller did. PyTorch uses its own BLAS (MKL/oneDNN) and is not affected.
if [[ -z "${OPENBLAS_CORETYPE+x}" ]]; then
  if grep -qw avx512_bf16 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Cooperlake
  elif grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell
  fi
fi
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset, OpenBLAS detects the core}"

jsons=()
for t in $THREADS; do
  echo "== $t threads"
  KILN_NUM_THREADS=$t "$bin" --json "$OUT/kiln_$t.json" "$@" > "$OUT/kiln_$t.txt" 2>&1
  echo "kiln_bench_cpu: rc=$?"; tail -9 "$OUT/kiln_$t.txt"
  python3 bench/torch_bench.py --device cpu --threads "$t" --json "$OUT/torch_$t.json" "$@" > "$OUT/torch_$t.txt" 2>&1
  echo "torch_bench.py: rc=$?"; tail -3 "$OUT/torch_$t.txt"
  jsons+=("$t" "$OUT/kiln_$t.json" "$OUT/torch_$t.json")
done
last=${THREADS##* }
echo
echo "== kiln and PyTorch on the CPU, $last threads (outputs in $OUT)"
python3 bench/compare.py "$OUT/kiln_$last.json" "$OUT/torch_$last.json" | tee "$OUT/compare.txt"
echo
python3 bench/compare_threads.py "${jsons[@]}" | tee "$OUT/threads.txt"
