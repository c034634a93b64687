#!/usr/bin/env bash
# Runs one fuzz target (see docs/fuzzing.md) for a while:
#   tools/fuzz.sh <target> [seconds]        # default 600 s
#   tools/fuzz.sh build                     # builds every target, runs none
# Targets: manifest, propstr, pve_response, sops (fuzz/fuzz_targets/).
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). It runs on the
# stable toolchain with RUSTC_BOOTSTRAP=1 (cargo-fuzz passes nightly-only
# -Z flags to rustc).
#
# Choices:
# - `-s none`: no sanitizer. The workspace forbids unsafe code, so
#   AddressSanitizer would find little that Rust's own checks miss, and it
#   halves the executions per second.
# - `--debug-assertions`: integer overflow and debug_assert! panic, as in
#   tests; a release build would wrap silently.
# - `--target-dir target/fuzz`: the instrumented build differs from every
#   other build; keeping it apart leaves the normal build cache untouched.
# - The corpus grows in fuzz/corpus/<target> (ignored by git); the committed
#   seeds in fuzz/seeds/<target> are read as a second corpus directory and
#   never written. A crash lands in fuzz/artifacts/<target>/.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export RUSTC_BOOTSTRAP=1

flags=(--fuzz-dir fuzz --features libfuzzer -s none --debug-assertions --target-dir target/fuzz)

target="${1:?usage: tools/fuzz.sh <target>|build [seconds]}"
if [ "$target" = build ]; then
    exec cargo fuzz build "${flags[@]}"
fi
seconds="${2:-600}"
mkdir -p "fuzz/corpus/$target"
exec cargo fuzz run "${flags[@]}" "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" \
    -- -max_total_time="$seconds" -print_final_stats=1
