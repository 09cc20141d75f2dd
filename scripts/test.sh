#!/usr/bin/env bash
# Fresh Debian 12 machine -> every test: installs what is missing, builds into build/,
# runs the whole suite with ctest, then installs kiln into a temporary prefix and builds and
# runs the standalone examples against it (scripts/check-install.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
kiln_install_missing
kiln_build
ctest --test-dir "$KILN_BUILD" --output-on-failure -j2
"$KILN_ROOT/scripts/check-install.sh" --no-build
