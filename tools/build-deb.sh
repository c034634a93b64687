#!/usr/bin/env bash
# Builds the Debian package target/debian/proxops_<version>-1_<arch>.deb
# from a clean checkout: the release binary, then its man page and shell
# completions (made by that binary from the tables of --help) into
# dist/generated (gitignored), then cargo-deb packs what bin/Cargo.toml's
# [package.metadata.deb] lists. Prints the package's path last.
#
# cargo-deb is installed into <tools>/cargo when missing (pinned: a new
# release can change the package's layout); <tools> is $PROXOPS_TOOLS_DIR,
# default <workspace>/.tools. Installing it takes about 3 minutes on 2 cores.
# SOURCE_DATE_EPOCH, when set, dates the changelog entry; otherwise the
# commit date of HEAD does, so the same commit builds the same changelog.
set -euo pipefail

CARGO_DEB_VERSION=3.8.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tools="${PROXOPS_TOOLS_DIR:-$root/.tools}"
say() { printf 'build-deb: %s\n' "$*"; }

cargo_deb="$tools/cargo/bin/cargo-deb"
if [ ! -x "$cargo_deb" ] || [ "$("$cargo_deb" --version 2>/dev/null | awk '{print $NF}')" != "$CARGO_DEB_VERSION" ]; then
    say "cargo install cargo-deb $CARGO_DEB_VERSION into $tools/cargo"
    cargo install cargo-deb --locked --version "=$CARGO_DEB_VERSION" --root "$tools/cargo"
fi

say "cargo build --release -p proxops"
cargo build --release --locked -p proxops
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
proxops="$target_dir/release/proxops"
version="$("$proxops" --version | awk '{print $2}')"

# bin/Cargo.toml names these paths (cargo-deb takes any other path under
# target/ for a build output of its own).
assets="$root/dist/generated"
rm -rf "$assets"
mkdir -p "$assets"
"$proxops" man >"$assets/proxops.1"
"$proxops" completions bash >"$assets/proxops.bash"
"$proxops" completions zsh >"$assets/_proxops"
"$proxops" completions fish >"$assets/proxops.fish"

epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
cat >"$assets/changelog" <<CHANGELOG
proxops ($version-1) unstable; urgency=medium

  * Release $version: see /usr/share/doc/proxops/README.md.

 -- ProxOps maintainers <proxops@example.invalid>  $(LC_ALL=C date -u -R -d "@$epoch")
CHANGELOG

say "cargo deb (version $version)"
# --strip: the release profile keeps line tables for backtraces, six times
# the binary's size; the package ships it stripped.
deb="$(SOURCE_DATE_EPOCH="$epoch" "$cargo_deb" --no-build --strip -p proxops --output "$root/target/debian" | tail -n 1)"
say "built $deb ($(du -k "$deb" | cut -f1) KiB)"
echo "$deb"
