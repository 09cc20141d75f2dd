#!/usr/bin/env bash
# kiln as a library, checked the way a user would use it: installs the build into a fresh
# temporary prefix, then configures, builds and runs each standalone example (every
# examples/*/CMakeLists.txt that calls find_package(kiln)) against that prefix, given nothing but
# -DCMAKE_PREFIX_PATH. An example says how it runs with add_test: its ctest must pass.
#
#   ./scripts/check-install.sh              installs what is missing, builds (as setup.sh), checks
#   ./scripts/check-install.sh --no-build   checks the build as it is (test.sh, after the tests)
#
# KILN_BUILD=DIR picks the build to install (default build/), KILN_JOBS=N the examples' build
# jobs (default 2). KILN_KEEP_INSTALL_CHECK=1 keeps the temporary folder and says where it is.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

if [[ "${1:-}" != --no-build ]]; then
  kiln_install_missing
  kiln_build
fi

start=$SECONDS
work="$(mktemp -d "${TMPDIR:-/tmp}/kiln-install-check.XXXXXX")"
if [[ "${KILN_KEEP_INSTALL_CHECK:-0}" == 1 ]]; then
  echo "kiln: the install check works in $work (kept)"
else
  trap 'rm -rf "$work"' EXIT
fi
prefix="$work/prefix"

# Runs a step with its output in a log, shown only when it fails: an install lists every file.
quietly() {
  local log="$work/$1.log"
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log"
    echo "kiln: FAILED: $*" >&2
    exit 1
  fi
}

echo "kiln: installing $KILN_BUILD into $prefix"
quietly install cmake --install "$KILN_BUILD" --prefix "$prefix"

count=0
for list in "$KILN_ROOT"/examples/*/CMakeLists.txt; do
  grep -q "find_package(kiln" "$list" || continue
  dir="$(dirname "$list")"
  name="$(basename "$dir")"
  build="$work/build-$name"
  echo "kiln: example $name: configure, build, run"
  quietly "$name-configure" cmake -S "$dir" -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix"
  quietly "$name-build" cmake --build "$build" -j "${KILN_JOBS:-2}"
  # --no-tests=error: an example that does not say how to run it fails here, not silently.
  ctest --test-dir "$build" --output-on-failure --no-tests=error
  count=$((count + 1))
done
if ((count == 0)); then
  echo "kiln: FAILED: no example under $KILN_ROOT/examples calls find_package(kiln)" >&2
  exit 1
fi
echo "kiln: install check passed: $count examples built and run against the installed kiln in $((SECONDS - start)) s"
