#!/usr/bin/env bash
# On the GPU machine (CUDA 13 at /usr/local/cuda, no LLVM, no package registry): builds kiln
# with the LLVM path off and runs the CUDA tests, then (optionally) compute-sanitizer and the
# CLI. Logs go to $OUT (the device tool brings them back), a summary table is printed last.
#   scripts/device-test.sh [tests|examples|demo|sanitize|cli|bench|fuzz|dist|onnx]...   (default: tests examples demo cli)
# onnx: `kiln onnx-test` on ONNX's four suites compiled for the GPU, and the ONNX tests' GPU cases
# (needs ONNX carried in .devdeps: scripts/device-deps.sh).
# dist: DDP, FSDP and the Trainer over NCCL on every GPU of the machine (one rank each; world
# size 1 on one GPU), checked against one process, then the fault cases where there are two or
# more GPUs. NVLink multicast stays off (NCCL_NVLS_ENABLE=0: the lent machines' rule).
# KILN_SANITIZE_TOOLS="memcheck racecheck" picks the compute-sanitizer tools (default: all three).
# Needs .devdeps/include (scripts/device-deps.sh, run on a Debian machine, carried along).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-/tmp/kiln-device-out}"
mkdir -p "$OUT"
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-cache}"
steps=("$@")
((${#steps[@]})) || steps=(tests examples demo cli)
summary=()

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
t0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DKILN_ENABLE_LLVM=OFF -DKILN_CUDA_ROOT=/usr/local/cuda \
  -DKILN_EXTRA_INCLUDE="$PWD/.devdeps/include" > "$OUT/cmake.log" 2>&1 &&
  cmake --build build-gpu -j "$(nproc)" > "$OUT/build.log" 2>&1
rc=$?
summary+=("build: rc=$rc in $(( $(date +%s) - t0 )) s ($(head -1 "$OUT/gpu.txt"))")
if ((rc != 0)); then
  tail -40 "$OUT/build.log"
  printf '%s\n' "${summary[@]}"
  exit 1
fi

for step in "${steps[@]}"; do
  case "$step" in
    tests)
      for t in runtime codegen backend frontend bench tools dist; do
        [[ -x ./build-gpu/tests/kiln_tests_$t ]] || continue
        t1=$(date +%s)
        filter='*'
        # the CLI's device cases (no LLVM here: the CPU's skip)
        [[ $t == tools ]] && filter='*Cuda*:*cuda*:*Gpu*'
        ./build-gpu/tests/kiln_tests_$t --gtest_brief=1 --gtest_filter="$filter" > "$OUT/tests_$t.log" 2>&1
        r=$?
        line=$(grep -E "^\[  (PASSED|FAILED|SKIPPED) \]" "$OUT/tests_$t.log" | tr '\n' ' ')
        summary+=("kiln_tests_$t: rc=$r $(( $(date +%s) - t1 )) s: $line")
      done
      ;;
    sanitize)
      # Every CUDA backend test, the frontend's device tests, and the runtime's GPU tests but the
      # three that provoke errors on purpose (an illegal address, an impossible allocation, a
      # missing kernel name and a bad launch, which the sanitizer reports as API errors), under
      # each tool. Every (tool, suite) runs in KILN_SANITIZE_SHARDS gtest shards (default 3) at
      # once, each stopped after KILN_SANITIZE_SECONDS (default 420): the sanitizer is slow and
      # mostly on the CPU, which has 16 cores.
      t1=$(date +%s)
      shards=${KILN_SANITIZE_SHARDS:-3}
      for tool in ${KILN_SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
        for t in backend runtime frontend; do
          # (not the test over 2^31 elements: under the sanitizer its 4 GB kernels take minutes)
          filter="${KILN_SANITIZE_FILTER:-*/cuda:BackendCuda.*:-*LargeIndex*}"
          [[ $t == runtime ]] && filter="CudaGpu.*:CublasLt.*:-*IllegalAddress*:*OutOfMemory*:*LaunchACompiledKernel*"
          [[ $t == frontend ]] && filter="Device.*:*/cuda"
          for ((k = 0; k < shards; k++)); do
            GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$k timeout "${KILN_SANITIZE_SECONDS:-420}" \
              compute-sanitizer --tool "$tool" --error-exitcode 99 ./build-gpu/tests/kiln_tests_$t --gtest_brief=1 \
              --gtest_filter="$filter" > "$OUT/sanitize_${tool}_${t}_$k.log" 2>&1 &
          done
        done
      done
      wait
      for tool in ${KILN_SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
        for t in backend runtime frontend; do
          logs=("$OUT"/sanitize_${tool}_${t}_*.log)
          ran=$(grep -hE '^\[==========\] [0-9]+ tests? from' "${logs[@]}" | awk '{s += $2} END {print s + 0}')
          passed=$(grep -hE '^\[  PASSED  \] [0-9]+' "${logs[@]}" | awk '{s += $4} END {print s + 0}')
          failed=$(grep -hcE '^\[  FAILED  \] .*\(' "${logs[@]}" | awk '{s += $1} END {print s + 0}')
          errors=$(grep -hE 'ERROR SUMMARY: [0-9]+|RACECHECK SUMMARY: [0-9]+' "${logs[@]}" | grep -oE '[0-9]+ (error|hazard)' | awk '{s += $1} END {print s + 0}')
          unfinished=$(grep -LE 'ERROR SUMMARY|RACECHECK SUMMARY' "${logs[@]}" | wc -l)
          summary+=("compute-sanitizer $tool $t: $ran tests, $passed passed, $failed failed, $errors errors/hazards, $unfinished shards unfinished")
        done
      done
      summary+=("sanitize: $(( $(date +%s) - t1 )) s")
      ;;
    fuzz)
      # kiln fuzz on the GPU for KILN_FUZZ_SECONDS (default 240): rounds of KILN_FUZZ_GRAPHS
      # graphs (default 1000), seeds counting up from KILN_FUZZ_SEED (default 11), each round's
      # summary kept in fuzz.log, reproducers of findings in fuzz_found.tar.gz.
      t1=$(date +%s)
      end=$((t1 + ${KILN_FUZZ_SECONDS:-240}))
      seed=${KILN_FUZZ_SEED:-11}
      graphs=0
      mkdir -p /tmp/fuzz-found
      while (( $(date +%s) + 30 < end )); do
        timeout $((end - $(date +%s))) ./build-gpu/bin/kiln fuzz --graphs "${KILN_FUZZ_GRAPHS:-1000}" --seed "$seed" \
          --device cuda --jobs "$(nproc)" --batch 24 --batch-timeout 100 --save /tmp/fuzz-found >> "$OUT/fuzz.log" 2>&1 &&
          graphs=$((graphs + ${KILN_FUZZ_GRAPHS:-1000}))
        seed=$((seed + 1))
      done
      tar czf "$OUT/fuzz_found.tar.gz" -C /tmp fuzz-found
      summary+=("fuzz: $graphs graphs in completed rounds, $(( $(date +%s) - t1 )) s, seeds ${KILN_FUZZ_SEED:-11}..$((seed - 1)), $(ls /tmp/fuzz-found | wc -l) reproducers")
      ;;
    examples)
      # Every example built in the tree (each picks the GPU when there is one).
      for exe in ./build-gpu/examples/*/kiln_example_custom_op ./build-gpu/examples/*/{linear_softmax,mlp_compile,minigpt_generate,llama_block}; do
        [[ -x $exe ]] || continue
        name=$(basename "$exe")
        t1=$(date +%s)
        "$exe" > "$OUT/example_$name.log" 2>&1
        summary+=("example $name: rc=$? $(( $(date +%s) - t1 )) s: $(grep -E 'loss [0-9.]+ ->|accuracy|FAIL|did not' "$OUT/example_$name.log" | tr '\n' ' ')")
      done
      ;;
    demo)
      t1=$(date +%s)
      ./build-gpu/bin/kiln demo --out /tmp/kiln-demo-out > "$OUT/demo.log" 2>&1
      summary+=("demo: rc=$? $(( $(date +%s) - t1 )) s: $(grep -E 'held-out loss:|completed exactly|done in' "$OUT/demo.log" | tr '\n' ' ')")
      ;;
    onnx)
      t1=$(date +%s)
      export KILN_ONNX_TEST_DATA="$PWD/.devdeps/onnx-testdata"
      for suite in node pytorch-converted pytorch-operator simple; do
        ./build-gpu/bin/kiln onnx-test "$KILN_ONNX_TEST_DATA/$suite" --device cuda --jobs 8 > "$OUT/onnx_test_$suite.log" 2>&1
        summary+=("kiln onnx-test $suite on cuda: rc=$? $(tail -3 "$OUT/onnx_test_$suite.log" | grep -E 'passed,' )")
      done
      # models no one here wrote, exported by the machine's PyTorch (and transformers), run the same way
      rm -rf /tmp/kiln-torch-models
      python3 tools/onnx_check/torch_models.py /tmp/kiln-torch-models > "$OUT/torch_models.log" 2>&1
      ./build-gpu/bin/kiln onnx-test /tmp/kiln-torch-models --device cuda --jobs 8 --verbose > "$OUT/onnx_test_torch_models.log" 2>&1
      summary+=("kiln onnx-test on PyTorch-exported models, cuda: rc=$? $(tail -3 "$OUT/onnx_test_torch_models.log" | grep -E 'passed,')")
      if [[ -x ./build-gpu/tests/kiln_tests_onnx ]]; then
        ./build-gpu/tests/kiln_tests_onnx --gtest_brief=1 > "$OUT/tests_onnx.log" 2>&1
        summary+=("kiln_tests_onnx: rc=$? $(grep -E 'compiled for cuda|^\[  (PASSED|FAILED)' "$OUT/tests_onnx.log" | tr '\n' ' ')")
      else
        summary+=("kiln_tests_onnx: not built (no ONNX in .devdeps: run scripts/device-deps.sh)")
      fi
      summary+=("onnx: $(( $(date +%s) - t1 )) s")
      ;;
    dist)
      t1=$(date +%s)
      export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
      n=$(nvidia-smi -L | wc -l)
      k=./build-gpu/bin/kiln w=./build-gpu/tests/kiln_ddp_worker
      fails=0
      {
        for args in "--steps 6" "--steps 3 --bucket-bytes 1" "--steps 4 --fsdp" "--steps 3 --trainer"; do
          echo "== $n ranks: $args"
          KILN_DIST_TIMEOUT=60 $k launch -n "$n" $w --device cuda $args || fails=$((fails + 1))
        done
        if ((n >= 2)); then
          for fault in "die --fault-rank 1" "die --fault-rank 0" "hang --fault-rank 1" "mismatch --fault-rank 1"; do
            echo "== $n ranks, fault: $fault (must fail, naming the rank)"
            KILN_DIST_TIMEOUT=5 timeout 60 $k launch -n "$n" --grace 8 $w --device cuda --steps 3 --fault-step 1 --fault $fault && fails=$((fails + 1))
          done
        fi
      } > "$OUT/dist.log" 2>&1
      summary+=("dist: $n GPUs, $fails unexpected results, $(( $(date +%s) - t1 )) s (dist.log)")
      ;;
    cli)
      k=./build-gpu/bin/kiln
      {
        for f in tests/passes/cases/*.kir; do :; done
        $k export mlp --out /tmp/mlp.kir && $k run /tmp/mlp.kir --device cuda --check --seed 3
        $k compile /tmp/mlp.kir --device cuda --dump /tmp/mlp-dump && ls -la /tmp/mlp-dump /tmp/mlp-dump/cubin
        $k compile /tmp/mlp.kir --device cuda
      } > "$OUT/cli.log" 2>&1
      summary+=("cli: rc=$? $(grep -c PASS "$OUT/cli.log") PASS, $(grep -c FAIL "$OUT/cli.log") FAIL")
      ;;
    bench)
      if [[ -x ./build-gpu/bench/kiln_bench_cuda ]]; then
        ./build-gpu/bench/kiln_bench_cuda > "$OUT/bench_cuda.log" 2>&1
        summary+=("bench: rc=$?")
      fi
      ;;
  esac
done
for f in "$OUT"/tests_*.log; do grep -E "^\[  FAILED  \]|Failure|error:" "$f" | head -20; done
printf '%s\n' "${summary[@]}"
