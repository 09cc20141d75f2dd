#!/usr/bin/env bash
# Fresh Debian 12 machine -> the kiln demo: installs what is missing, builds into build/,
# then trains a MiniGPT on verb conjugations with kiln::compile (debug folder in ./kiln-demo-out/debug).
# Extra arguments go to `kiln demo` (e.g. --seed 3 --out /tmp/demo).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
kiln_install_missing
kiln_build
"$KILN_BUILD/bin/kiln" demo "$@"
