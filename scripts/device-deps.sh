#!/usr/bin/env bash
# The GPU machine has CUDA, CMake, ninja and GoogleTest's sources but no package registry:
# this copies the header-only libraries kiln needs there (fmt, CLI11, nlohmann-json, xxHash) into .devdeps/include
# (ignored by git), to be carried along and passed as -DKILN_EXTRA_INCLUDE=$PWD/.devdeps/include.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
kiln_install_missing
mkdir -p "$KILN_ROOT/.devdeps/include"
cp -r /usr/include/fmt /usr/include/CLI /usr/include/nlohmann /usr/include/xxhash.h "$KILN_ROOT/.devdeps/include/"
echo "wrote $KILN_ROOT/.devdeps/include (fmt, CLI, nlohmann, xxhash)"
