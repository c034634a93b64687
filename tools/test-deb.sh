#!/usr/bin/env bash
# Checks a built proxops .deb (tools/build-deb.sh) the way an installation
# would meet it, without touching this machine's own system:
#   - lintian reports nothing (every tag fixed or overridden with its reason
#     in dist/debian/lintian-overrides);
#   - the maintainer scripts pass `sh -n`;
#   - the file list holds the binary, unit, man page, completions and docs;
#   - `dpkg --root` into a throwaway root (maintainer scripts run without
#     chroot, with DPKG_ROOT set, as on a system where systemd is not
#     running): the proxops user and group are made in that root's
#     /etc/passwd and /etc/group, /etc/proxops is 0750 root:proxops, the unit
#     is enabled (not started), the installed binary runs, and
#     `systemd-analyze verify` accepts the installed unit;
#   - a newer package keeps the administrator's /etc/proxops/proxops.env;
#   - purge removes the user and what the package put in /etc/proxops, never
#     a file the package did not create (an administrator's age key stays,
#     with its folder, and purge says so), keeps /var/lib/proxops and says
#     so; with nothing else there, /etc/proxops goes.
# Usage: tools/test-deb.sh [path/to/proxops_*.deb]   (default: the newest
# in target/debian)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deb="${1:-$(ls -t "$root"/target/debian/proxops_*.deb | head -n 1)}"
deb="$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")"
say() { printf 'test-deb: %s\n' "$*"; }
fail() { printf 'test-deb: FAILED: %s\n' "$*" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# --- lintian -------------------------------------------------------------------
say "lintian $(basename "$deb")"
lintian_out="$work/lintian.txt"
# Everything lintian says, overridden tags too, for the log (--show-overrides
# makes lintian 2.116 exit 2 even when no tag fails); the verdict is the
# second run's.
lintian --display-info --pedantic --show-overrides "$deb" >"$lintian_out" 2>&1 || true
sed 's/^/  lintian: /' "$lintian_out"
if grep -q '^[EW]: ' "$lintian_out" || ! lintian --fail-on error,warning "$deb" >/dev/null 2>&1; then
    fail "lintian reported errors or warnings"
fi

# --- control scripts and file list ----------------------------------------------
dpkg-deb -e "$deb" "$work/control"
for script in preinst postinst prerm postrm; do
    if [ -f "$work/control/$script" ]; then
        sh -n "$work/control/$script" || fail "$script does not pass sh -n"
    fi
done
for script in postinst prerm postrm; do
    [ -f "$work/control/$script" ] || fail "the package has no $script"
done
grep -qx '/etc/proxops/proxops.env' "$work/control/conffiles" ||
    fail "/etc/proxops/proxops.env is not a conffile"

dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|' >"$work/files"
for f in /usr/bin/proxops \
    /usr/lib/systemd/system/proxops.service \
    /usr/share/man/man1/proxops.1.gz \
    /usr/share/bash-completion/completions/proxops \
    /usr/share/zsh/vendor-completions/_proxops \
    /usr/share/fish/vendor_completions.d/proxops.fish \
    /usr/share/doc/proxops/copyright \
    /usr/share/doc/proxops/changelog.Debian.gz \
    /usr/share/doc/proxops/README.md \
    /usr/share/doc/proxops/docs/operations.md \
    /etc/proxops/proxops.env; do
    grep -qx "$f" "$work/files" || fail "the package lacks $f"
done
say "file list, conffiles and sh -n: ok"

# --- install into a throwaway root ------------------------------------------------
r="$work/root"
mkdir -p "$r/etc" "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/var/lib/dpkg/triggers"
touch "$r/var/lib/dpkg/status" "$r/var/lib/dpkg/available"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$r/etc/passwd"
printf 'root:x:0:\n' >"$r/etc/group"
printf 'root:*:19000:0:99999:7:::\n' >"$r/etc/shadow"
printf 'root:*::\n' >"$r/etc/gshadow"
chmod 0640 "$r/etc/shadow" "$r/etc/gshadow"

# The root has no libc or passwd package of its own: their files come from
# this machine, which is what --force-depends stands for.
dpkg_root() {
    dpkg --root="$r" --force-script-chrootless --force-depends \
        --force-not-root --log=/dev/null "$@"
}

say "dpkg --root install"
dpkg_root -i "$deb" >"$work/install.log" 2>&1 || {
    cat "$work/install.log" >&2
    fail "dpkg --root -i failed"
}

grep -q '^proxops:x:[0-9]*:[0-9]*:[^:]*:/var/lib/proxops:/usr/sbin/nologin$' "$r/etc/passwd" ||
    fail "postinst made no proxops system user: $(cat "$r/etc/passwd")"
gid="$(awk -F: '$1 == "proxops" { print $3 }' "$r/etc/group")"
[ -n "$gid" ] || fail "postinst made no proxops group"
[ "$(stat -c '%a %u %g' "$r/etc/proxops")" = "750 0 $gid" ] ||
    fail "/etc/proxops is $(stat -c '%a %u:%g' "$r/etc/proxops"), not 750 root:proxops"
[ "$(stat -c '%a %u %g' "$r/etc/proxops/proxops.env")" = "640 0 $gid" ] ||
    fail "proxops.env is $(stat -c '%a %u:%g' "$r/etc/proxops/proxops.env"), not 640 root:proxops"
[ -L "$r/etc/systemd/system/multi-user.target.wants/proxops.service" ] ||
    fail "postinst did not enable proxops.service"
say "user, group, /etc/proxops and the enabled unit: ok"

version="$("$r/usr/bin/proxops" --version)"
case "$version" in
    "proxops "*) say "installed binary: $version" ;;
    *) fail "the installed binary printed $version" ;;
esac
[ "$(zcat "$r/usr/share/man/man1/proxops.1.gz" | head -n 1 | cut -c1-14)" = ".TH PROXOPS 1 " ] ||
    fail "the installed man page is not proxops(1)"
bash -n "$r/usr/share/bash-completion/completions/proxops" ||
    fail "the installed bash completion does not pass bash -n"

# verify resolves ExecStart's program and the unit's dependencies inside the
# root: give it this machine's targets and slices (not the package's files).
for unit in /usr/lib/systemd/system/*.target /usr/lib/systemd/system/*.slice; do
    [ -e "$r$unit" ] || cp "$unit" "$r/usr/lib/systemd/system/"
done
verify_out="$(systemd-analyze verify --root="$r" /usr/lib/systemd/system/proxops.service 2>&1)" ||
    fail "systemd-analyze verify: $verify_out"
[ -z "$verify_out" ] || fail "systemd-analyze verify had something to say: $verify_out"
say "systemd-analyze verify of the installed unit: ok"

# --- upgrade: the administrator's env file stays ------------------------------------
printf 'PROXOPS_PVE_TOKEN_VALUE=kept-by-the-upgrade\n' >>"$r/etc/proxops/proxops.env"
chmod 0600 "$r/etc/proxops/proxops.env"
dpkg-deb -R "$deb" "$work/next"
old_version="$(awk '/^Version:/ {print $2}' "$work/next/DEBIAN/control")"
sed -i "s/^Version: .*/Version: ${old_version}+next/" "$work/next/DEBIAN/control"
echo "changed" >>"$work/next/usr/share/doc/proxops/README.md"
dpkg-deb --root-owner-group -b "$work/next" "$work/next.deb" >/dev/null
say "dpkg --root upgrade to $old_version+next"
dpkg_root -i "$work/next.deb" </dev/null >"$work/upgrade.log" 2>&1 || {
    cat "$work/upgrade.log" >&2
    fail "the upgrade failed"
}
grep -qx 'PROXOPS_PVE_TOKEN_VALUE=kept-by-the-upgrade' "$r/etc/proxops/proxops.env" ||
    fail "the upgrade overwrote /etc/proxops/proxops.env"
[ "$(stat -c '%a' "$r/etc/proxops/proxops.env")" = "600" ] ||
    fail "the upgrade changed the mode of /etc/proxops/proxops.env"
[ "$(stat -c '%a %u %g' "$r/etc/proxops")" = "750 0 $gid" ] ||
    fail "after the upgrade /etc/proxops is $(stat -c '%a %u:%g' "$r/etc/proxops")"
[ "$(grep -c '^proxops:' "$r/etc/passwd")" = 1 ] || fail "the upgrade made a second proxops user"
say "upgrade kept the env file, its mode and the user: ok"

# --- purge ------------------------------------------------------------------------
mkdir -p "$r/var/lib/proxops/git"
echo cache >"$r/var/lib/proxops/git/state"
# The administrator's own file, which the package did not create.
echo "AGE-SECRET-KEY-1ADMINISTRATORSOWN" >"$r/etc/proxops/age.key"
dpkg_root -P proxops >"$work/purge.log" 2>&1 || {
    cat "$work/purge.log" >&2
    fail "purge failed"
}
! grep -q '^proxops:' "$r/etc/passwd" || fail "purge kept the proxops user"
! grep -q '^proxops:' "$r/etc/group" || fail "purge kept the proxops group"
grep -qx 'AGE-SECRET-KEY-1ADMINISTRATORSOWN' "$r/etc/proxops/age.key" ||
    fail "purge deleted /etc/proxops/age.key, a file the package did not create"
[ ! -e "$r/etc/proxops/proxops.env" ] || fail "purge kept the package's proxops.env"
grep -q '/etc/proxops holds files the package did not install (age.key' "$work/purge.log" ||
    fail "purge did not say it kept /etc/proxops: $(cat "$work/purge.log")"
say "purge kept the administrator's age.key and said so: ok"
rm "$r/etc/proxops/age.key"
dpkg_root -i "$deb" >"$work/install2.log" 2>&1 || {
    cat "$work/install2.log" >&2
    fail "the second install failed"
}
dpkg_root -P proxops >"$work/purge2.log" 2>&1 || {
    cat "$work/purge2.log" >&2
    fail "the second purge failed"
}
[ ! -e "$r/etc/proxops" ] || fail "purge kept an /etc/proxops that held only the package's files"
[ ! -e "$r/usr/bin/proxops" ] || fail "purge kept /usr/bin/proxops"
[ ! -e "$r/etc/systemd/system/multi-user.target.wants/proxops.service" ] ||
    fail "purge kept the unit enabled"
[ -f "$r/var/lib/proxops/git/state" ] || fail "purge removed /var/lib/proxops"
grep -q '/var/lib/proxops .* was kept' "$work/purge2.log" ||
    fail "purge did not say it kept /var/lib/proxops: $(cat "$work/purge2.log")"
say "purge removed the user and /etc/proxops, kept /var/lib/proxops and said so: ok"

say "ok: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
