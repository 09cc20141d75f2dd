#!/usr/bin/env bash
# Differential check of kiln's reference interpreter against PyTorch, for every case under
# tools/torch_check/cases/ and seeds 1 and 2:
#   1. builds kiln without LLVM (header-only fmt/CLI11 from .devdeps/include when not installed)
#   2. kiln run CASE --seed S --save-inputs DIR/in --save-outputs DIR/out
#   3. python3 tools/torch_check/kir_torch.py CASE DIR ... (one process for all cases)
# Needs cmake, ninja, a C++20 compiler, python3 with numpy and torch.
# Env: KILN_BUILD (build dir, default /tmp/kb), KILN_BIN (use this kiln, skip the build),
#      TORCH_CHECK_WORK (run dir, default /tmp/torch_check), SEEDS (default "1 2"),
#      OUT (if set: torch_check.log and the folders of failing cases are written there).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BUILD=${KILN_BUILD:-/tmp/kb}
WORK=${TORCH_CHECK_WORK:-/tmp/torch_check}
SEEDS=${SEEDS:-"1 2"}
LOG=${OUT:+$OUT/torch_check.log}
LOG=${LOG:-$WORK/torch_check.log}
mkdir -p "$WORK" "$(dirname "$LOG")"
: > "$LOG"
say() { echo "$@" | tee -a "$LOG"; }

say "== torch_check in $ROOT ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
say "== host: $(uname -srm), $(nproc) cpus"
if command -v nvidia-smi >/dev/null 2>&1; then
  say "== gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
fi
say "== $(python3 -c 'import sys, numpy, torch; print("python", sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1)"

if [[ -n "${KILN_BIN:-}" ]]; then
  KILN=$KILN_BIN
else
  say "== building kiln (LLVM off) in $BUILD"
  t0=$(date +%s)
  if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_ENABLE_LLVM=OFF \
        -DKILN_EXTRA_INCLUDE="$ROOT/.devdeps/include" -DKILN_BUILD_TESTS=OFF >"$WORK/cmake.log" 2>&1; then
    say "cmake failed:"; tail -40 "$WORK/cmake.log" | tee -a "$LOG"; exit 2
  fi
  if ! ninja -C "$BUILD" -j"$(nproc)" kiln >"$WORK/ninja.log" 2>&1; then
    say "build failed:"; tail -60 "$WORK/ninja.log" | tee -a "$LOG"; exit 2
  fi
  say "== built in $(( $(date +%s) - t0 ))s"
  KILN=$BUILD/bin/kiln
fi

pairs=()
for case in tools/torch_check/cases/*.kir; do
  name=$(basename "$case" .kir)
  for s in $SEEDS; do
    d="$WORK/runs/$name/seed$s"
    rm -rf "$d"; mkdir -p "$d"
    if ! "$KILN" run "$case" --seed "$s" --save-inputs "$d/in" --save-outputs "$d/out" >"$d/kiln.log" 2>&1; then
      cp "$d/kiln.log" "$d/KILN_FAILED"
    fi
    pairs+=("$case" "$d")
  done
done
say "== kiln ran ${#pairs[@]} case runs; comparing with PyTorch"

python3 tools/torch_check/kir_torch.py "${pairs[@]}" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}

if [[ -n "${OUT:-}" ]]; then  # keep what is needed to look at a failure
  grep -E '^(FAIL) ' "$LOG" | sed -E 's/^FAIL ([^ ]+)\.kir \[(seed[0-9]+)\].*/\1 \2/' | sort -u | while read -r n s; do
    [[ -d "$WORK/runs/$n/$s" ]] || continue
    mkdir -p "$OUT/failed/$n"; cp -r "$WORK/runs/$n/$s" "$OUT/failed/$n/"
  done
fi
exit "$rc"
