#!/usr/bin/env bash
# Runs the whole test suite the way CI does: installs the external test tools
# (fakepve, sops, age, promtool; see install-test-tools.sh), then every test
# of the workspace. Arguments replace --workspace, e.g.
#   tools/test.sh -p proxops-pve
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

export PROXOPS_TOOLS_DIR="${PROXOPS_TOOLS_DIR:-$root/.tools}"
tools/install-test-tools.sh
export PATH="$PROXOPS_TOOLS_DIR/bin:$PATH"

if [ "$#" -eq 0 ]; then
    set -- --workspace
fi

if cargo nextest --version >/dev/null 2>&1; then
    # nextest does not run doctests: run them first, so the nextest summary
    # is the last thing printed.
    cargo test --doc "$@"
    cargo nextest run --no-fail-fast "$@"
else
    echo "test.sh: cargo-nextest not found, using cargo test"
    cargo test --no-fail-fast "$@"
fi
