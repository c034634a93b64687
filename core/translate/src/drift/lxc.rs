//! LXC and TemplateCT: the table of every container key ProxOps owns
//! (`KEYS`), its create form and drift (spec §8, §9, §12, §22.1).
//!
//! Impact on a running container, per key; each row carries its own.
//! Upstream stopped the container for nearly every change; PVE itself
//! applies much of it to a running container, and a careful operator
//! expects no stop where PVE needs none:
//! - `Live`: `cores`, `memory`, `swap` (cgroup limits, applied at once),
//!   `netN` (PVE re-plugs the veth of a running container: a short link
//!   drop, no stop), `tags`, `description`, `protection`, `onboot`,
//!   `startup` (config only), `hostname` (pve-container
//!   `vmconfig_hotplug_pending` writes it into the running container).
//! - `Reboot`: `nameserver`, `searchdomain`, `console` and
//!   `spec.extra` keys: PVE keeps them pending and writes them into the
//!   container at its next start; nothing forces that start.
//! - `StopStart`: `features` (nesting), `arch`, `rootfs`/`mpN` writes (new
//!   volumes, mount options, guest paths, binds): they only take effect on
//!   a fresh start, so ProxOps stops and starts the container (kept from
//!   upstream; shown in the plan as a stop-start); a new `mpN` is
//!   hot-plugged, so it is `Live` (decided in `hotplug.rs`).

use crate::change::{AnomalyType, Impact, Params};
use crate::inverse::lxc as inverse;
use proxops_model::live::LiveConfig;
use proxops_model::manifest::{self, LxcSpec};
use proxops_model::names::Kind;
use proxops_model::repo::DesiredObject;
use proxops_model::units::Quantity;
use proxops_model::wire::{LxcFeatures, write_bool};

use super::codec::{Absent, Adopt, Count, Doc, Field, Flag, ImpactRule, MiB};
use super::owned::{
    self, Family, Form, Input, Key, Row, either, flag, plain, same_dns_set, same_exact,
    same_flag_off_by_default, same_trimmed, text,
};
use super::resolve::artifact_volid;
use super::{Acc, Context, DriftError, mounts, nic};

pub(crate) const STOP: Impact = Impact::StopStart;
const REBOOT: Impact = Impact::Reboot;
const LIVE: Impact = Impact::Live;

/// Every key a container owns, in create-form order (`vmid` and
/// `ostemplate` come first, `start` and `spec.extra` last).
pub(crate) static KEYS: &[Row<LxcSpec>] = &[
    Row::Key(Key::new(
        "hostname",
        "spec.dns.hostname",
        LIVE,
        |i| Ok(plain(hostname(i.obj, i.spec))),
        same_exact,
        inverse::hostname,
    )),
    Row::Field(&MEMORY),
    Row::Key(Key::new(
        "swap",
        "spec.swap",
        LIVE,
        |i| match i.spec.swap {
            Some(s) => Ok(plain(mib(i, s, "spec.swap")?.to_string())),
            None => Ok(None),
        },
        |live, want| live.and_then(|v| v.trim().parse::<u64>().ok()) == want.parse::<u64>().ok(),
        inverse::swap,
    )),
    Row::Field(&CORES),
    Row::Family(mounts::ROOTFS),
    Row::Family(mounts::MOUNT_POINTS),
    Row::Family(nic::LXC_NETS),
    Row::Key(Key::new(
        "nameserver",
        "spec.dns.nameservers",
        REBOOT,
        |i| {
            let ns = i.spec.dns.as_ref().map(|d| &d.nameservers);
            Ok(ns
                .filter(|n| !n.is_empty())
                .and_then(|n| plain(n.join(" "))))
        },
        same_dns_set,
        inverse::nameserver,
    )),
    Row::Key(Key::new(
        "searchdomain",
        "spec.dns.domain",
        REBOOT,
        |i| {
            Ok(i.spec
                .dns
                .as_ref()
                .and_then(|d| d.domain.as_deref())
                .and_then(|d| plain(space_list(d))))
        },
        same_space_list,
        inverse::searchdomain,
    )),
    Row::Key(Key::new(
        "arch",
        "spec.arch",
        STOP,
        |i| Ok(i.spec.arch.clone().and_then(plain)),
        |live, want| live.unwrap_or("amd64") == want,
        inverse::arch,
    )),
    // Absent means privileged: the schema default is 0 and create stores
    // `unprivileged: 1` only when set (pve-container `API2/LXC.pm`
    // `create_vm`, `LXC/Config.pm` `unprivileged` default 0).
    Row::Key(
        Key::new(
            "unprivileged",
            "spec.options.unprivileged",
            STOP,
            |i| Ok(either(opts(i.spec).unprivileged)),
            same_flag_off_by_default,
            inverse::unprivileged,
        )
        .refusing(unprivileged_refused),
    ),
    Row::Field(&PROTECTION),
    Row::Field(&ONBOOT),
    Row::Field(&CONSOLE),
    Row::Family(FEATURES),
    Row::Key(Key::new(
        "startup",
        "spec.options.startup",
        LIVE,
        |i| Ok(text(opts(i.spec).startup.as_ref())),
        same_trimmed,
        |cx, ct| opts_mut(ct).startup = cx.startup(),
    )),
    owned::description(LIVE),
    owned::tags(LIVE),
];

const MIB: u64 = 1 << 20;

static MEMORY: Field<LxcSpec, MiB> = Field::memory(
    |i| Ok(Some(mib(i, i.spec.memory, "spec.memory")?)),
    |ct, m| ct.memory = Quantity::from_bytes(m * MIB),
    ImpactRule::Fixed(LIVE),
    None,
);

static CORES: Field<LxcSpec, Count> = Field {
    key: "cores",
    path: "spec.cpu.cores",
    codec: Count { min: 1 },
    get: |i| Ok(Some(i.spec.cpu.cores)),
    set: |ct, c| ct.cpu.cores = c,
    absent: Absent::Unset,
    impact: ImpactRule::Fixed(LIVE),
    adopt: Adopt::Always,
    missing: Some(
        "cores not set on PVE (no limit: every host core): the manifest says 1 and the first apply writes it; raise spec.cpu.cores first if the container needs more",
    ),
    unreadable: "cores unreadable: the manifest says 1 and the first apply writes it; raise spec.cpu.cores first if the container needs more",
    doc: Doc {
        default: "— (required)",
        impact_note: None,
    },
};

/// A boolean option PVE defaults to off; an explicit `0` is kept.
const FLAG: Field<LxcSpec, Flag> = Field {
    key: "",
    path: "",
    codec: Flag { default: false },
    get: |_| Ok(None),
    set: |_, _| {},
    absent: Absent::PveDefault("0"),
    impact: ImpactRule::Fixed(LIVE),
    adopt: Adopt::Always,
    missing: None,
    unreadable: "unreadable flag: not adopted",
    doc: Doc {
        default: "not owned",
        impact_note: None,
    },
};

static PROTECTION: Field<LxcSpec, Flag> = Field {
    key: "protection",
    path: "spec.options.protection",
    get: |i| Ok(opts(i.spec).protection),
    set: |ct, b| opts_mut(ct).protection = Some(b),
    ..FLAG
};

static ONBOOT: Field<LxcSpec, Flag> = Field {
    key: "onboot",
    path: "spec.options.onboot",
    get: |i| Ok(opts(i.spec).onboot),
    set: |ct, b| opts_mut(ct).onboot = Some(b),
    ..FLAG
};

static CONSOLE: Field<LxcSpec, Flag> = Field {
    key: "console",
    path: "spec.options.console",
    get: |i| Ok(opts(i.spec).console),
    set: |ct, b| opts_mut(ct).console = Some(b),
    impact: ImpactRule::Fixed(REBOOT),
    ..FLAG
};

/// `features`: nesting is owned; keyctl and fuse cannot be set through
/// PVE 9.2's API (400/403) [PROBE §20.11], so they are anomalies; other
/// features ride along on the live composite.
const FEATURES: Family<LxcSpec> = Family {
    keys: "features",
    field: "spec.options.nesting, keyctl, fuse",
    create: |i, _, p| {
        if let Some(n) = opts(i.spec).nesting {
            p.push("features", format!("nesting={}", write_bool(n)));
        }
        Ok(())
    },
    drift: features_drift,
    adopt: inverse::features,
};

pub(crate) fn hostname(obj: &DesiredObject, ct: &LxcSpec) -> String {
    ct.dns
        .as_ref()
        .and_then(|d| d.hostname.clone())
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| obj.metadata.name.to_string())
}

fn mib(
    i: &Input<'_, LxcSpec>,
    q: proxops_model::units::Quantity,
    field: &str,
) -> Result<u64, DriftError> {
    q.whole_mib()
        .ok_or_else(|| i.unsupported(field, format!("{q} is not a whole number of MiB")))
}

fn opts(ct: &LxcSpec) -> manifest::LxcOptions {
    ct.options.clone().unwrap_or_default()
}

fn opts_mut(ct: &mut LxcSpec) -> &mut manifest::LxcOptions {
    crate::inverse::section(&mut ct.options)
}

fn unprivileged_refused(live: Option<&str>, want: &str) -> String {
    let word = |b: bool| if b { "unprivileged" } else { "privileged" };
    let want = proxops_model::wire::parse_bool(want).unwrap_or(false);
    format!(
        "the container is {} on PVE but the manifest asks for {}: PVE cannot change this on an existing container (recreate required)",
        word(flag(live, false)),
        word(want)
    )
}

/// keyctl/fuse cannot be set through PVE 9.2's API (400/403) [PROBE §20.11].
fn refuse_features(obj: &DesiredObject, ct: &LxcSpec) -> Result<(), DriftError> {
    let o = opts(ct);
    for (name, on) in [("keyctl", o.keyctl), ("fuse", o.fuse)] {
        if on == Some(true) {
            return Err(DriftError::Unsupported {
                object: obj.r#ref.clone(),
                field: format!("spec.options.{name}"),
                message: format!(
                    "PVE refuses {name} through its API: create the container without it, then enable it on the host (pct set {} -features {name}=1)",
                    ct.vmid
                ),
            });
        }
    }
    Ok(())
}

fn features_drift(
    i: &Input<'_, LxcSpec>,
    cfg: &LiveConfig,
    acc: &mut Acc,
) -> Result<(), DriftError> {
    let o = opts(i.spec);
    let features = cfg
        .get("features")
        .and_then(|f| LxcFeatures::parse(f).ok())
        .unwrap_or_default();
    for (name, want, live) in [
        (
            "keyctl",
            o.keyctl,
            features.keyctl.or(cfg.flag("keyctl").and_then(Result::ok)),
        ),
        (
            "fuse",
            o.fuse,
            features.fuse.or(cfg.flag("fuse").and_then(Result::ok)),
        ),
    ] {
        if want == Some(true) && live != Some(true) {
            acc.anomaly(AnomalyType::NeedsPerson, Some("features"), format!("{name} is off on PVE and PVE refuses to turn it on through its API: run `pct set {} -features {name}=1` on the host (keeping the other features)", i.spec.vmid));
        }
    }
    if let Some(want) = o.nesting {
        let live = cfg
            .flag("nesting")
            .and_then(Result::ok)
            .or(features.nesting)
            .unwrap_or(false);
        if live != want {
            // The live composite keeps its other tokens (keyctl, fuse, mknod…).
            let mut next = features.clone();
            next.nesting = Some(want);
            acc.set_plain("features", cfg.get("features"), next.to_wire(), STOP);
        }
    }
    Ok(())
}

pub(crate) fn create(
    obj: &DesiredObject,
    ct: &LxcSpec,
    ctx: &Context<'_>,
) -> Result<Params, DriftError> {
    refuse_features(obj, ct)?;
    let mut p = Params::new();
    p.push("vmid", ct.vmid.to_string());
    p.push(
        "ostemplate",
        artifact_volid(obj, ctx, Kind::CTTemplate, &ct.template, "spec.template")?.to_wire(),
    );
    let input = Input { obj, spec: ct, ctx };
    owned::create(KEYS, &input, Form::Create, &mut p)?;
    p.push("start", super::create::lxc_start(obj, ct));
    for (k, v) in &ct.extra {
        p.push(k.clone(), v.clone());
    }
    Ok(p)
}

pub(crate) fn drift(
    obj: &DesiredObject,
    ct: &LxcSpec,
    ctx: &Context<'_>,
    cfg: &LiveConfig,
    acc: &mut Acc,
) -> Result<(), DriftError> {
    let input = Input { obj, spec: ct, ctx };
    owned::drift(KEYS, &input, cfg, acc)?;
    super::extra_drift(&ct.extra, cfg, acc);
    Ok(())
}

/// A DNS list as pve-container stores it: `PVE::Tools::split_list` (on
/// commas, semicolons and white space), joined with single spaces
/// (`LXC.pm` `verify_searchdomain_list`, `verify_nameserver_list`).
fn space_list(v: &str) -> String {
    v.split([',', ';', ' ', '\t', '\n'])
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The same list in PVE's stored form, in order.
fn same_space_list(live: Option<&str>, want: &str) -> bool {
    live.is_some_and(|l| space_list(l) == space_list(want))
}
