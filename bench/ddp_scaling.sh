#!/usr/bin/env bash
# Data-parallel scaling, kiln beside PyTorch, on one machine with N GPUs: the GPT-2 block and
# MiniGPT training steps (AdamW, the batch per rank fixed) on 1 GPU and on each world size
# given, DDP and FSDP, kiln (kiln launch + kiln_bench_ddp) and PyTorch (torchrun +
# bench/torch_ddp_bench.py, eager and torch.compile). Prints the rows, then the scaling
# efficiency of each (ms per step on 1 GPU / ms on N: 1.0 is perfect weak scaling) last.
#   bench/ddp_scaling.sh [BUILD_DIR] [WORLD...]      (default: build 2; "1" alone checks the
#                                                      scripts on a machine with one GPU)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}; shift || true
WORLDS=("$@"); ((${#WORLDS[@]})) || WORLDS=(2)
ws=(1)
for w in "${WORLDS[@]}"; do [[ $w != 1 ]] && ws+=("$w"); done
# NVLink multicast off (the lent machines' rule; harmless elsewhere).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-30}
rows=$(mktemp)
for model in block minigpt; do
  for w in "${ws[@]}"; do
    for mode in "" --fsdp; do
      "$BUILD/bin/kiln" launch -n "$w" "$BUILD/bench/kiln_bench_ddp" --model "$model" $mode --steps "$STEPS" 2>&1 |
        grep -E "^\[rank 0\] \|" | sed 's/^\[rank 0\] //' | tee -a "$rows"
      for c in "" --compile; do
        torchrun --standalone --nproc-per-node "$w" bench/torch_ddp_bench.py --model "$model" $mode $c --steps "$STEPS" 2>&1 |
          grep -E "^\| torch" | tee -a "$rows"
      done
    done
  done
done
echo
echo "| who | workload | mode | GPUs | ms/step | samples/s | params+state a rank | memory | collectives |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
cat "$rows"
echo
echo "scaling efficiency (ms on 1 GPU / ms on N, same mode):"
python3 - "$rows" <<'PY'
import sys
rows = [[c.strip() for c in l.strip().strip("|").split("|")] for l in open(sys.argv[1]) if l.startswith("|")]
one = {(r[0], r[1], r[2]): float(r[4]) for r in rows if r[3] == "1"}
for r in rows:
    if r[3] != "1" and (r[0], r[1], r[2]) in one:
        print(f"  {r[0]:5} {r[1]:50} {r[2]:13} {r[3]} GPUs: {one[(r[0], r[1], r[2])] / float(r[4]):.2f}")
PY
rm -f "$rows"
