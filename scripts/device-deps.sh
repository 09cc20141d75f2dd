#!/usr/bin/env bash
# The GPU machine has CUDA, CMake, ninja and GoogleTest's sources but no package registry:
# this copies the header-only libraries kiln needs there (fmt, CLI11, nlohmann-json, xxHash) into .devdeps/include
# (ignored by git), to be carried along and passed as -DKILN_EXTRA_INCLUDE=$PWD/.devdeps/include.
# For ONNX import there too: ONNX's and protobuf's headers beside them, the two shared libraries
# (Debian's builds, which need glibc 2.34) in .devdeps/lib, where CMake looks beside the
# include folder, and ONNX's test data (libonnx-testdata) in .devdeps/onnx-testdata, for
# `KILN_ONNX_TEST_DATA=.devdeps/onnx-testdata kiln onnx-test` (~37 MB in all).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
kiln_install_missing
mkdir -p "$KILN_ROOT/.devdeps/include"
cp -r /usr/include/fmt /usr/include/CLI /usr/include/nlohmann /usr/include/xxhash.h "$KILN_ROOT/.devdeps/include/"
cp -r /usr/include/onnx "$KILN_ROOT/.devdeps/include/"
mkdir -p "$KILN_ROOT/.devdeps/include/google" "$KILN_ROOT/.devdeps/lib" "$KILN_ROOT/.devdeps/onnx-testdata"
cp -r /usr/include/google/protobuf "$KILN_ROOT/.devdeps/include/google/"
# the files under their sonames (a carried tree keeps no symbolic links)
cp -L /usr/lib/x86_64-linux-gnu/libonnx_proto.so.1 /usr/lib/x86_64-linux-gnu/libprotobuf.so.32 "$KILN_ROOT/.devdeps/lib/"
cp -r /usr/share/libonnx-testdata/data/{node,pytorch-converted,pytorch-operator,simple} "$KILN_ROOT/.devdeps/onnx-testdata/"
echo "wrote $KILN_ROOT/.devdeps: include (fmt, CLI, nlohmann, xxhash, onnx, protobuf), lib (onnx_proto, protobuf), onnx-testdata"
