#!/usr/bin/env bash
# libFuzzer on the .kir parser and verifier, under AddressSanitizer and
# UndefinedBehaviorSanitizer (issue 12). Builds build-libfuzzer/ with Debian's clang, seeds the
# corpus with every .kir file of the tests, and fuzzes for the given time.
#   scripts/fuzz-parser.sh [SECONDS=1800] [extra libFuzzer flags...]
# A finding (crash, hang > 10 s, leak, an exception other than kiln::Error, a diagnostic with
# no location, a graph that does not print back to itself) stops the run and leaves
# crash-*/timeout-*/leak-* in build-libfuzzer/fuzz/. Re-run one with
#   build-libfuzzer/bin/kir_parser_fuzzer build-libfuzzer/fuzz/crash-...
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
seconds="${1:-1800}"
shift || true
KILN_PACKAGES+=(clang-14 libclang-rt-14-dev)  # clang's libFuzzer and sanitizer runtimes
kiln_install_missing
build="$KILN_ROOT/build-libfuzzer"
flags="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "$KILN_ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DKILN_LIBFUZZER=ON -DKILN_ENABLE_LLVM=OFF -DKILN_ENABLE_CUDA=OFF -DKILN_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target kir_parser_fuzzer -j"$(nproc)"

# The seed corpus: every .kir file in the tests (merged into fuzz/corpus, which then grows).
mkdir -p "$build/fuzz/corpus" "$build/fuzz/seeds"
find "$KILN_ROOT/tests" -name '*.kir' -exec cp -t "$build/fuzz/seeds" {} +
# A dictionary of the text form's words: op names, dtypes, attribute names, punctuation.
{
  sed -n 's/^KILN_OP([A-Za-z0-9_]*, "\([a-z0-9_]*\)".*/"\1"/p' "$KILN_ROOT/ir/ops.def"
  for w in graph return f64 f32 f16 bf16 i64 i32 bool cuda cpu dim keepdim dtype true false None inf nan -inf; do
    echo "\"$w\""
  done
  for w in '%' ':' '=' ',' '(' ')' '[' ']' '{' '}' '@' '#' '"'; do printf '"%s"\n' "$w"; done
} | sort -u | awk '{print "kw" NR "=" $0}' > "$build/fuzz/kir.dict"
cd "$build/fuzz"
ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" UBSAN_OPTIONS="print_stacktrace=1" \
  "$build/bin/kir_parser_fuzzer" corpus seeds -dict=kir.dict -max_total_time="$seconds" \
  -timeout=10 -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1 "$@"
