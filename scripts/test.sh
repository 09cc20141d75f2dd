#!/usr/bin/env bash
# Fresh Debian 12 machine -> every test: installs what is missing, builds into build/,
# then runs the whole suite with ctest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
kiln_install_missing
kiln_build
ctest --test-dir "$KILN_BUILD" --output-on-failure -j2
