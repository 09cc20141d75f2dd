#!/usr/bin/env bash
# Installs what kiln needs to build on Debian 12 (as root, or with sudo) and configures and
# builds it into build/ (KILN_BUILD=DIR for another folder, KILN_JOBS=N to limit the build).
# Sourced by demo.sh and test.sh; safe to run again: it installs only what is missing and
# rebuilds only what changed.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

KILN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KILN_BUILD="${KILN_BUILD:-$KILN_ROOT/build}"

# llvm-14-dev and libclang-14-dev are for the CPU backend (clang + ORC JIT), libxxhash-dev
# keys its kernel cache, libopenblas-dev (found through pkg-config) does its matmuls.
KILN_PACKAGES=(cmake ninja-build g++ pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev libxxhash-dev
               libgtest-dev graphviz llvm-14-dev libclang-14-dev libopenblas-dev)

kiln_install_missing() {
  local missing=()
  for p in "${KILN_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]} == 0)); then
    return
  fi
  echo "kiln: installing ${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

kiln_build() {
  cmake -S "$KILN_ROOT" -B "$KILN_BUILD" -G Ninja
  cmake --build "$KILN_BUILD" -j "${KILN_JOBS:-$(nproc)}"
}
