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
# keys its kernel cache, libopenblas-dev (found through pkg-config) does its f32 and f64 matmuls and
# libdnnl-dev (oneDNN) its bf16 and f16 ones on the CPU's 16-bit units, libgloo-dev
# carries collectives between processes on the CPU (kiln launch, DDP). libonnx-dev and
# libprotobuf-dev are for ONNX import (frontend/onnx/), libonnx-testdata for the ONNX test
# suite it is checked by (tests/onnx/).
# nvidia-cuda-dev (CUDA 11.8, Debian's non-free component) is for the CUDA backend: headers,
# NVRTC, cuBLASLt and the driver's user-space library, so that every generated CUDA kernel is
# compiled with NVRTC even on a machine with no GPU. KILN_NO_CUDA=1 leaves it out.
KILN_PACKAGES=(cmake ninja-build g++ pkg-config libfmt-dev libcli11-dev nlohmann-json3-dev libxxhash-dev
               libgtest-dev graphviz llvm-14-dev libclang-14-dev libopenblas-dev libdnnl-dev libgloo-dev
               libonnx-dev libprotobuf-dev libonnx-testdata)
if [[ "${KILN_NO_CUDA:-0}" != 1 ]]; then
  KILN_PACKAGES+=(nvidia-cuda-dev)
fi

# Debian ships CUDA in its non-free component, which a fresh Debian 12 has off: turn it on
# (contrib and non-free for bookworm) when nvidia-cuda-dev is wanted and no source offers it.
kiln_enable_nonfree() {
  if grep -rqsE "^[^#]*(Components:.*|deb .*)non-free( |$)" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    return
  fi
  echo "kiln: enabling Debian's contrib and non-free components (for nvidia-cuda-dev)"
  "$@" tee /etc/apt/sources.list.d/kiln-debian-nonfree.sources >/dev/null <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
}

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
  if [[ " ${missing[*]} " == *" nvidia-cuda-dev "* ]]; then
    kiln_enable_nonfree "${sudo[@]}"
  fi
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

kiln_build() {
  cmake -S "$KILN_ROOT" -B "$KILN_BUILD" -G Ninja
  cmake --build "$KILN_BUILD" -j "${KILN_JOBS:-$(nproc)}"
}
