#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer (issue 12):
# builds build-asan/ with g++ -fsanitize=address,undefined (the LLVM CPU path and the CUDA
# compile path on, as in build/) and runs every test with ctest. Code the CPU JIT compiles at
# run time is not instrumented; everything of kiln's own that calls it is.
#   scripts/sanitize-suite.sh [ctest arguments...]     e.g. -R Fuzz
# Takes about an hour on 2 cores, so CI does not run it; the closing note of issue 12 records
# a run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
kiln_install_missing
build="$KILN_ROOT/build-asan"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "$KILN_ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j "${KILN_JOBS:-$(nproc)}"
# Leaks are checked; a second sanitizer report in one process is not worth stopping for less
# than the first, so the first ends the test (halt_on_error).
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_odr_violation=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir "$build" --output-on-failure -j "${KILN_JOBS:-$(nproc)}" --timeout 1800 "$@"
