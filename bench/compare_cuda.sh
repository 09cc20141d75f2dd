#!/usr/bin/env bash
# kiln's CUDA backend beside PyTorch eager and torch.compile, on the same GPU in one run:
# kiln_bench_cuda, then bench/torch_bench.py, then one combined table (bench/compare.py), last.
#   bench/compare_cuda.sh [--quick] [--only ID,ID] [--no-block]
# Outputs (kiln.json, torch.json, *.txt) go to $OUT (default: a new temp folder). The kiln build
# is $BUILD (default build-gpu); where it does not exist it is configured as
# scripts/device-test.sh does (LLVM off, CUDA at /usr/local/cuda, .devdeps/include).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$(mktemp -d /tmp/kiln-compare-XXXXXX)}"
BUILD="${BUILD:-build-gpu}"
mkdir -p "$OUT"

if [[ ! -f "$BUILD/build.ninja" && ! -f "$BUILD/Makefile" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DKILN_ENABLE_LLVM=OFF -DKILN_CUDA_ROOT=/usr/local/cuda \
    -DKILN_EXTRA_INCLUDE="$PWD/.devdeps/include" > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
fi
cmake --build "$BUILD" -j "$(nproc)" --target kiln_bench_cuda > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }

t0=$(date +%s)
"$BUILD/bench/kiln_bench_cuda" --json "$OUT/kiln.json" "$@" 2>&1 | tee "$OUT/kiln.txt"
krc=${PIPESTATUS[0]}
t1=$(date +%s)
python3 bench/torch_bench.py --json "$OUT/torch.json" "$@" 2>&1 | tee "$OUT/torch.txt"
trc=${PIPESTATUS[0]}
t2=$(date +%s)
echo
echo "kiln_bench_cuda: rc=$krc, $((t1 - t0)) s; torch_bench.py: rc=$trc, $((t2 - t1)) s; outputs in $OUT"
if [[ -f "$OUT/kiln.json" && -f "$OUT/torch.json" ]]; then
  python3 bench/compare.py "$OUT/kiln.json" "$OUT/torch.json" | tee "$OUT/compare.txt"
else
  echo "compare: missing $OUT/kiln.json or $OUT/torch.json"
  exit 1
fi
