#!/usr/bin/env bash
# Runs the performance benches (docs/performance.md) with one command:
#
#   tools/bench.sh           the sizes docs/performance.md reports (long: the
#                            soak alone runs the daemon for 1,000 cycles)
#   tools/bench.sh --quick   small sizes and one round each, as CI runs them:
#                            it keeps the benches working and asserts no timing
#
# The benches, by the goal each measures: plan (planning in core),
# diff_replay (a whole diff --replay at 1,000 to 20,000 guests), live_cycle
# (a converged cycle at 20 ms per answer, by read-concurrency), soak (the
# daemon over many cycles), rollout (a stop-start change through the
# disruption budget), apply_memory (memory by actions in flight). Each
# prints its numbers; their environment variables are in each bench's
# header. PROXOPS_BENCH_BIN=/path/to/proxops measures another build with
# the whole-process benches.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Quick mode builds with the dev profile the tests already built: its
# dependencies are compiled, where a release build from nothing took CI
# nine minutes. It times nothing, so optimisation does not matter.
profile=()
if [ "${1:-}" = "--quick" ]; then
    export PROXOPS_BENCH_QUICK=1
    profile=(--profile dev)
    shift
fi
if [ "$#" -gt 0 ]; then
    echo "usage: tools/bench.sh [--quick]" >&2
    exit 2
fi

export PROXOPS_TOOLS_DIR="${PROXOPS_TOOLS_DIR:-$root/.tools}"
tools/install-test-tools.sh
export PATH="$PROXOPS_TOOLS_DIR/bin:$PATH"

echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
# One cargo invocation for all of them: two would build the dependencies
# twice, once per feature set (minutes in CI).
cargo bench "${profile[@]}" -p proxops-core --bench plan -p proxops \
    --bench diff_replay --bench live_cycle --bench rollout --bench apply_memory --bench soak
