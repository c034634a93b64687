#!/usr/bin/env bash
# Makes fixtures/sops: SOPS files written by the real sops 3.11.0, one
# folder a case, each to be read (or refused) by proxops-sops exactly as
# sops reads or refuses it (adapters/sops/tests/it/fixture_set.rs).
#
#   tools/make-sops-fixtures.sh
#
# Needs sops 3.11.0 and age-keygen: $PROXOPS_TOOLS_DIR/bin (default
# .tools/bin, filled by tools/install-test-tools.sh), else PATH.
#
# Every case is read with one key, fixtures/sops/test-key.txt: a TEST-ONLY
# age identity, committed on purpose. The script makes it with age-keygen
# the first time and reuses it after that. A second recipient, for the cases
# that need one the test key is not, is made afresh on each run and thrown
# away. Each run writes new ciphertexts of the same plaintexts.
#
# Per case it writes plain.yaml (what sops was given), secrets.sops.yaml
# (what sops wrote, then edited for the broken cases) and, for the cases
# that decrypt, expected.json (what `sops decrypt --output-type json`
# prints). cases.txt lists every case with its outcome; before writing a
# line the script checks that the real sops agrees with it (its exit code,
# and for MAC failures which one).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="${PROXOPS_TOOLS_DIR:-$root/.tools}/bin:$PATH"
out="$root/fixtures/sops"
key="$out/test-key.txt"

sops --disable-version-check --version | grep -qx 'sops 3.11.0' || {
    echo "make-sops-fixtures: needs sops 3.11.0 (tools/install-test-tools.sh installs it)" >&2
    exit 1
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# sops with nothing of the caller's environment but PATH (no identity of
# theirs, no version check), run in the scratch folder so no .sops.yaml
# of the repository applies. Arguments: VAR=value… then sops' own.
run_sops() {
    local vars=()
    while [ "$#" -gt 0 ] && [[ "$1" == *=* ]]; do
        vars+=("$1")
        shift
    done
    (cd "$work" && env -i PATH="$PATH" HOME="$work" SOPS_DISABLE_VERSION_CHECK=1 \
        "${vars[@]}" sops --disable-version-check "$@")
}

# encrypt RECIPIENTS IN [sops flags…] > OUT
encrypt() {
    local recipients="$1" in="$2"
    shift 2
    run_sops SOPS_AGE_RECIPIENTS="$recipients" \
        encrypt --input-type yaml --output-type yaml "$@" "$in"
}

# Replaces the line FROM (exactly) by TO in FILE; fails if FROM is absent.
edit_line() {
    awk -v from="$2" -v to="$3" '
        $0 == from && !done { $0 = to; done = 1 }
        { print }
        END { if (!done) exit 1 }' "$1" >"$work/edited" ||
        { echo "make-sops-fixtures: no line '$2' in $1" >&2; exit 1; }
    mv "$work/edited" "$1"
}

# Changes one base64 character of the `data:` of the first ENC[…] on a
# line starting (after its indent) with KEY in FILE.
flip_data() {
    awk -v key="$2" '
        !done && (at = index($0, key ": ENC[AES256_GCM,data:")) && at == match($0, /[^ ]/) {
            i = index($0, "data:") + 7
            c = substr($0, i, 1)
            $0 = substr($0, 1, i - 1) (c == "A" ? "B" : "A") substr($0, i + 1)
            done = 1
        }
        { print }
        END { if (!done) exit 1 }' "$1" >"$work/edited" ||
        { echo "make-sops-fixtures: no encrypted $2 in $1" >&2; exit 1; }
    mv "$work/edited" "$1"
}

# The ENC[…] value of the first line starting with KEY in FILE.
enc_of() {
    grep -m1 -E "^ *$2: ENC\[" "$1" | sed -E 's/^[^:]*: (ENC\[[^]]*\]).*/\1/'
}

# --- the test key --------------------------------------------------------------
mkdir -p "$out"
if [ ! -f "$key" ]; then
    age-keygen -o "$work/new-key.txt" 2>/dev/null
    {
        echo "# TEST ONLY. This age identity is public: it is committed with ProxOps so"
        echo "# the SOPS fixtures in this folder can be read and made again. It protects"
        echo "# nothing. Never encrypt anything real to it."
        cat "$work/new-key.txt"
    } >"$key"
fi
test_recipient="$(age-keygen -y "$key")"
age-keygen -o "$work/other-key.txt" 2>/dev/null
other_recipient="$(age-keygen -y "$work/other-key.txt")"

# --- cases ---------------------------------------------------------------------
manifest="$work/cases.txt"
cat >"$manifest" <<'EOF'
# The SOPS fixture cases, written by tools/make-sops-fixtures.sh.
# One case a line: its folder, what reading its secrets.sops.yaml with
# test-key.txt gives (ok, no-matching-identity, mac-mismatch,
# mac-undecryptable, value-decrypt), what the case is about.
EOF

# begin NAME: starts a case; its plain.yaml is read from stdin.
begin() {
    case_dir="$work/$1"
    mkdir -p "$case_dir"
    cat >"$case_dir/plain.yaml"
    enc_file="$case_dir/secrets.sops.yaml"
}

# seal [sops flags…]: encrypts the case's plain.yaml to the test key.
seal() {
    encrypt "$test_recipient" "$case_dir/plain.yaml" "$@" >"$enc_file"
}

# seal_mac_only: the same under a .sops.yaml rule that sets
# mac_only_encrypted (sops has no flag for it) and encrypts only the keys
# token and password.
seal_mac_only() {
    printf 'creation_rules:\n  - age: %s\n    encrypted_regex: "^(token|password)$"\n    mac_only_encrypted: true\n' \
        "$test_recipient" >"$work/mac-only.sops.yaml"
    run_sops --config "$work/mac-only.sops.yaml" encrypt --input-type yaml --output-type yaml \
        "$case_dir/plain.yaml" >"$enc_file"
}

# The exit code and the message the real sops gives for each outcome.
sops_says() {
    case "$1" in
    ok) echo "0" ;;
    no-matching-identity) echo "128 Failed to get the data key" ;;
    mac-mismatch) echo "51 MAC mismatch" ;;
    mac-undecryptable) echo "51 Cannot decrypt MAC" ;;
    value-decrypt) echo "25 Could not decrypt value" ;;
    *) echo "make-sops-fixtures: unknown outcome $1" >&2; exit 1 ;;
    esac
}

# finish NAME OUTCOME WHAT: checks the real sops reads the case's file as
# OUTCOME says, then files the case away.
finish() {
    local name="$1" outcome="$2" what="$3" want code=0
    want="$(sops_says "$outcome")"
    run_sops SOPS_AGE_KEY_FILE="$key" decrypt --input-type yaml --output-type json \
        "$enc_file" >"$case_dir/expected.json" 2>"$work/stderr" || code=$?
    if [ "$code" != "${want%% *}" ] || { [ "$code" != 0 ] && ! grep -qF "${want#* }" "$work/stderr"; }; then
        echo "make-sops-fixtures: $name: sops exited $code, expected '$want':" >&2
        cat "$work/stderr" >&2
        exit 1
    fi
    [ "$outcome" = ok ] || rm "$case_dir/expected.json"
    printf '%-28s %-21s %s\n' "$name" "$outcome" "$what" >>"$manifest"
}

begin 01-credentials <<'EOF'
secrets:
    pve-user: fixture@pve
    pve-token-id: fixture
    pve-token: not-a-real-token-0001
    pve-password: fake-password-0001
    git-token: fake-git-token-0001
cloud-init:
    ssh-keys:
        main: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZha2Uta2V5LWZvci1wcm94b3BzLXRlc3RzLW9ubHkh test@fixture.invalid
    passwords:
        default: fake-cloud-init-password
EOF
seal
finish 01-credentials ok "a credentials file as ProxOps reads it, sops' default settings"

begin 02-value-types <<'EOF'
# A comment at the top: sops encrypts it too, and leaves it out of the MAC.
lab:
    site: fixture-lab
    hosts:
        - name: alder
          cores: 8
          load: 0.25
          active: true
        - name: birch
          cores: 16
          load: 3.0
          active: false
    # a comment inside a map
    vault:
        unseal:
            - [fake-unseal-1, fake-unseal-2]
            - fake-unseal-3
        nothing-yet: []
        none: {}
blank: ""
unset: null
tilde: ~
large: 9007199254740993
below-zero: -7
fraction: -0.5
thousand: 1e3
note: |
    first line
    second line
folded: >
    one
    two
unicode: "Grüße, 日本 ✓"
quoted-number: "8006"
yes-word: yes
day: 2025-01-31
stamp: 2025-01-31T12:30:00.5+01:00
EOF
seal
finish 02-value-types ok "nested maps and lists, every scalar type, null, empty values, comments"

begin 03-unencrypted-suffix <<'EOF'
pve:
    base-url_unencrypted: https://pve.example.invalid:8006
    port_unencrypted: 8006
    verify-tls_unencrypted: false
    timeout_unencrypted: 2.50
    token: not-a-real-token-0003
labels_unencrypted:
    site: fixture-lab
    rack: 4
    roles:
        - hypervisor
        - storage
EOF
seal
finish 03-unencrypted-suffix ok "keys ending _unencrypted stay plaintext, typed, and in the MAC"

begin 04-encrypted-regex <<'EOF'
pve:
    base-url: https://pve.example.invalid:8006
    user: fixture@pve
    token: not-a-real-token-0004
    password: fake-password-0004
    port: 8006
    verify-tls: true
git:
    token: fake-git-token-0004
    remotes:
        - origin
        - mirror
EOF
seal --encrypted-regex '^(token|password)$'
finish 04-encrypted-regex ok "only keys matching ^(token|password)\$ encrypted; the rest plaintext, in the MAC"

begin 05-second-recipient <<'EOF'
secrets:
    pve-token: not-a-real-token-0005
    git-token: fake-git-token-0005
EOF
encrypt "$other_recipient,$test_recipient" "$case_dir/plain.yaml" >"$enc_file"
[ "$(grep -m1 -oE 'recipient: age1[0-9a-z]+' "$enc_file")" = "recipient: $other_recipient" ] ||
    { echo "make-sops-fixtures: 05: the test key is not the second recipient" >&2; exit 1; }
finish 05-second-recipient ok "two recipients; the test key is the second"

mac_only_plain() {
    cat <<'EOF'
pve:
    base-url: https://pve.example.invalid:8006
    user: fixture@pve
    token: not-a-real-token-0006
    password: fake-password-0006
    port: 8006
EOF
}
begin 06-mac-only-encrypted < <(mac_only_plain)
seal_mac_only
finish 06-mac-only-encrypted ok "mac_only_encrypted (set by a .sops.yaml rule): the MAC covers encrypted values only"

begin 07-other-recipient <<'EOF'
secrets:
    pve-token: not-a-real-token-0007
EOF
encrypt "$other_recipient" "$case_dir/plain.yaml" >"$enc_file"
finish 07-other-recipient no-matching-identity "encrypted to another key only"

begin 08-rolled-back-value <<'EOF'
secrets:
    pve-token: not-a-real-token-0008
    pve-password: fake-password-new
EOF
sed 's/fake-password-new/fake-password-old/' "$case_dir/plain.yaml" >"$work/old.yaml"
encrypt "$test_recipient" "$work/old.yaml" >"$enc_file"
old="$(enc_of "$enc_file" pve-password)"
run_sops SOPS_AGE_KEY_FILE="$key" set "$enc_file" '["secrets"]["pve-password"]' '"fake-password-new"'
new="$(enc_of "$enc_file" pve-password)"
edit_line "$enc_file" "    pve-password: $new" "    pve-password: $old"
finish 08-rolled-back-value mac-mismatch \
    "pve-password set back to its older ciphertext (same data key and path, so only the MAC tells)"

begin 09-tampered-mac <<'EOF'
secrets:
    pve-token: not-a-real-token-0009
EOF
seal
flip_data "$enc_file" mac
finish 09-tampered-mac mac-undecryptable "one character of the encrypted MAC changed"

begin 10-tampered-ciphertext <<'EOF'
secrets:
    pve-user: fixture@pve
    pve-token: not-a-real-token-0010
EOF
seal
flip_data "$enc_file" pve-token
finish 10-tampered-ciphertext value-decrypt "one character of secrets.pve-token's ciphertext changed"

begin 11-edited-plaintext <<'EOF'
pve:
    port_unencrypted: 8006
    token: not-a-real-token-0011
EOF
seal
edit_line "$enc_file" "    port_unencrypted: 8006" "    port_unencrypted: 8007"
finish 11-edited-plaintext mac-mismatch "a plaintext _unencrypted value edited after encryption"

begin 12-mac-only-edited-plaintext < <(mac_only_plain | sed 's/0006/0012/')
seal_mac_only
edit_line "$enc_file" "    port: 8006" "    port: 8007"
finish 12-mac-only-edited-plaintext ok \
    "mac_only_encrypted, a plaintext value edited after encryption: still reads (port 8007)"

begin 13-changed-lastmodified <<'EOF'
secrets:
    pve-token: not-a-real-token-0013
EOF
seal
edit_line "$enc_file" "$(grep -m1 '^    lastmodified: ' "$enc_file")" '    lastmodified: "2001-02-03T04:05:06Z"'
finish 13-changed-lastmodified mac-undecryptable "lastmodified (the MAC's associated data) changed"

# --- file the set away -----------------------------------------------------------
# Only the cases' folders are replaced: the key and README.md stay.
for d in "$out"/[0-9][0-9]-*/; do
    [ -d "$d" ] && rm -r "$d"
done
for d in "$work"/[0-9][0-9]-*/; do
    cp -r "$d" "$out/"
done
cp "$manifest" "$out/cases.txt"
echo "make-sops-fixtures: wrote $(grep -vc '^#' "$out/cases.txt") cases into ${out#"$root"/}"
