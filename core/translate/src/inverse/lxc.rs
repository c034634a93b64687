//! LXC and TemplateCT: the inverses of the scalar rows of
//! `drift::lxc::KEYS`, each reading one live container key back into an
//! `LxcSpec`.

use proxops_model::manifest::LxcSpec;
use proxops_model::units::Quantity;
use proxops_model::wire::{self, LxcFeatures};

use super::{GuestCx, section};

const MIB: u64 = 1 << 20;

pub(crate) fn hostname(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) {
    let missing = format!("no hostname on PVE: the first apply sets it to {}", cx.name);
    section(&mut ct.dns).hostname = cx.name_override("hostname", missing);
}

pub(crate) fn swap(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) {
    let Some(s) = cx.take("swap") else { return };
    match s
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(MIB))
    {
        Some(bytes) => ct.swap = Some(Quantity::from_bytes(bytes)),
        None => cx.gap("swap", Some(s), "unreadable: not adopted"),
    }
}

pub(crate) fn arch(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) {
    let Some(a) = cx.take("arch") else { return };
    if proxops_model::manifest::LXC_ARCHES.contains(&a.trim()) {
        ct.arch = Some(a.trim().to_owned());
    } else {
        cx.gap(
            "arch",
            Some(a),
            "an architecture ProxOps does not know: not adopted",
        );
    }
}

pub(crate) fn nameserver(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) {
    if let Some(ns) = cx.nameservers() {
        section(&mut ct.dns).nameservers = ns;
    }
}

pub(crate) fn searchdomain(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) {
    if let Some(sd) = cx.take("searchdomain")
        && !sd.trim().is_empty()
    {
        section(&mut ct.dns).domain = Some(sd.to_owned());
    }
}

/// `unprivileged`, always declared: absent on PVE means privileged (the
/// schema default is 0; pve-container `API2/LXC.pm` stores
/// `unprivileged: 1` only when set), so a rebuild from the manifest keeps
/// the container's privilege.
pub(crate) fn unprivileged(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) {
    let slot = &mut section(&mut ct.options).unprivileged;
    match cx.take("unprivileged") {
        None => *slot = Some(false),
        Some(v) => match wire::parse_bool(v) {
            Ok(b) => *slot = Some(b),
            Err(_) => cx.gap("unprivileged", Some(v), "unreadable flag: not adopted"),
        },
    }
}

/// `features` (nesting, keyctl, fuse; the rest is a gap) and the bare
/// `nesting` / `keyctl` / `fuse` keys older configs hold.
pub(crate) fn features(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) -> bool {
    if let Some(f) = cx.take("features") {
        match LxcFeatures::parse(f) {
            Ok(feat) => {
                let o = section(&mut ct.options);
                o.nesting = feat.nesting;
                o.keyctl = feat.keyctl;
                o.fuse = feat.fuse;
                let mut rest = feat.extra.clone();
                if let Some(m) = feat.mknod {
                    rest.push(wire::PropToken::Pair {
                        key: "mknod".into(),
                        value: wire::write_bool(m).into(),
                    });
                }
                cx.token_gap("features", &rest, &super::key_note("features"));
            }
            Err(e) => cx.gap(
                "features",
                Some(f),
                format!("unreadable ({e}): left to PVE"),
            ),
        }
    }
    for key in ["nesting", "keyctl", "fuse"] {
        if let Some(v) = cx.take(key) {
            match (key, wire::parse_bool(v)) {
                ("nesting", Ok(b)) => section(&mut ct.options).nesting = Some(b),
                ("keyctl", Ok(b)) => section(&mut ct.options).keyctl = Some(b),
                ("fuse", Ok(b)) => section(&mut ct.options).fuse = Some(b),
                _ => cx.gap(key, Some(v), "unreadable flag: not adopted"),
            }
        }
    }
    true
}
