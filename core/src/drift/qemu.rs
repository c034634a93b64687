//! VM and TemplateVM: the table of every qemu key ProxOps owns (`KEYS`),
//! the desired values it is built from, and the fold that compares it with
//! a live `/config` (spec §6, §7, §12).
//!
//! Impact on a running VM, per key (spec §12, refined); each row carries
//! its own:
//! - `StopStart`: `cpu`, `cores`, `memory`, `sockets`, `numa`, `machine`,
//!   `bios`, `scsihw`, `netN`, disks, `efidisk0` (slot), `tpmstate0`,
//!   `serial0`, the cloud-init drive, the CD drive, `hostpciN`: PVE keeps
//!   them pending, and the guest only sees them after a cold start.
//! - `Reboot`: `vga`, `agent`, `acpi`, `tablet`, `hotplug`, `boot`, the
//!   cloud-init data keys (read by the guest at boot), `efidisk0`'s
//!   `pre-enrolled-keys` (enrolment takes effect at next boot [PROBE]) and
//!   `spec.extra` keys (ProxOps cannot know whether PVE hot-applies them, so
//!   they are written and left pending at worst).
//! - `Live`: `name`, `description`, `tags`, `onboot`, `startup`,
//!   `protection`: PVE applies them to the config at once.

use crate::action::{Impact, ParamValue, Params};
use crate::adopt::qemu as inverse;
use crate::live::LiveConfig;
use crate::manifest::{self, VmSpec};
use crate::repo::DesiredObject;
use crate::wire::{Agent, Boot, PropToken, PropertyString, SshKeys};

use super::owned::{
    self, Form, Input, Key, OnChange, Row, either, only_on, plain, same_description, same_dns_set,
    same_exact, same_flag_off_by_default, same_flag_on_by_default, same_memory, same_tags,
    same_trimmed, same_u32, text, write_desired,
};
use super::resolve::{password, ssh_keys};
use super::{Acc, Context, DriftError, desired_tags};
use super::{cloudinit, drives, efi, nic, pci};

pub(crate) const STOP: Impact = Impact::StopStart;
pub(crate) const REBOOT: Impact = Impact::Reboot;
pub(crate) const LIVE: Impact = Impact::Live;

/// Every key a VM owns, in create-form order.
pub(crate) static KEYS: &[Row<VmSpec>] = &[
    Row::Key(Key {
        key: "name",
        field: "spec.pve-name",
        impact: LIVE,
        desired: |i| Ok(plain(name(i.obj, i.spec))),
        same: same_exact,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::name,
    }),
    Row::Key(Key {
        key: "memory",
        field: "spec.memory",
        impact: STOP,
        desired: |i| Ok(plain(memory_mib(i.obj, i.spec)?.to_string())),
        same: same_memory,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::memory,
    }),
    Row::Key(Key {
        key: "cpu",
        field: "spec.cpu.type",
        impact: STOP,
        desired: |i| Ok(plain(cpu(i.obj, i.spec)?)),
        same: same_cpu,
        write: write_cpu,
        on_change: OnChange::Write,
        adopt: inverse::cpu,
    }),
    Row::Key(Key {
        key: "cores",
        field: "spec.cpu.cores",
        impact: STOP,
        desired: |i| Ok(plain(i.spec.cpu.cores.to_string())),
        same: same_u32,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::cores,
    }),
    Row::Key(Key {
        key: "sockets",
        field: "spec.hardware.sockets",
        impact: STOP,
        desired: |i| Ok(hardware(i.spec).sockets.and_then(|s| plain(s.to_string()))),
        same: |live, want| same_u32(Some(live.unwrap_or("1")), want),
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::sockets,
    }),
    Row::Key(Key {
        key: "numa",
        field: "spec.hardware.numa",
        impact: STOP,
        desired: |i| Ok(either(hardware(i.spec).numa)),
        same: same_flag_off_by_default,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::numa,
    }),
    Row::Key(Key {
        key: "machine",
        field: "spec.hardware.machine",
        impact: STOP,
        desired: |i| {
            Ok(hardware(i.spec)
                .machine
                .as_deref()
                .and_then(|m| plain(machine(m))))
        },
        same: same_machine,
        write: |live, want| ParamValue::Plain(with_head(live, want.expose(), "type")),
        on_change: OnChange::Write,
        adopt: inverse::machine,
    }),
    Row::Key(Key {
        key: "bios",
        field: "spec.hardware.bios",
        impact: STOP,
        desired: |i| Ok(hardware(i.spec).bios.and_then(|b| plain(b.as_str()))),
        same: |live, want| live.unwrap_or("seabios") == want,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::bios,
    }),
    Row::Key(Key {
        key: "vga",
        field: "spec.hardware.display",
        impact: REBOOT,
        desired: |i| Ok(text(hardware(i.spec).display.as_ref())),
        same: |live, want| live.and_then(|v| head_of(v, "type")).as_deref() == Some(want),
        write: |live, want| ParamValue::Plain(with_head(live, want.expose(), "type")),
        on_change: OnChange::Write,
        adopt: inverse::vga,
    }),
    Row::Family(drives::DISKS),
    Row::Family(efi::EFIDISK),
    Row::Family(efi::TPMSTATE),
    Row::Key(Key {
        key: "serial0",
        field: "spec.hardware.serial0",
        impact: STOP,
        desired: |i| Ok(text(hardware(i.spec).serial0.as_ref())),
        same: same_trimmed,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::serial0,
    }),
    Row::Family(drives::CLOUD_INIT_DRIVE),
    Row::Family(drives::CDROM),
    Row::Family(pci::HOSTPCI),
    Row::Family(nic::QEMU_NETS),
    Row::Key(Key {
        key: "onboot",
        field: "spec.options.onboot",
        impact: LIVE,
        desired: |i| Ok(only_on(options(i.spec).onboot)),
        same: same_flag_off_by_default,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: |cx, vm| inverse::flag_when_on(cx, "onboot", &mut options_mut(vm).onboot),
    }),
    Row::Key(Key {
        key: "startup",
        field: "spec.options.startup",
        impact: LIVE,
        desired: |i| Ok(text(options(i.spec).startup.as_ref())),
        same: same_trimmed,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: |cx, vm| options_mut(vm).startup = cx.startup(),
    }),
    Row::Key(Key {
        key: "protection",
        field: "spec.options.protection",
        impact: LIVE,
        desired: |i| Ok(only_on(options(i.spec).protection)),
        same: same_flag_off_by_default,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: |cx, vm| inverse::flag_when_on(cx, "protection", &mut options_mut(vm).protection),
    }),
    Row::Key(Key {
        key: "agent",
        field: "spec.options.agent",
        impact: REBOOT,
        desired: |i| Ok(only_on(options(i.spec).agent)),
        same: |live, _| {
            live.and_then(|l| Agent::parse(l).ok())
                .is_some_and(|a| a.enabled)
        },
        write: write_agent,
        on_change: OnChange::Write,
        adopt: inverse::agent,
    }),
    Row::Key(Key {
        key: "acpi",
        field: "spec.options.acpi",
        impact: REBOOT,
        desired: |i| Ok(only_on(options(i.spec).acpi)),
        same: same_flag_on_by_default,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: |cx, vm| inverse::flag_owned_on(cx, "acpi", &mut options_mut(vm).acpi),
    }),
    Row::Key(Key {
        key: "tablet",
        field: "spec.options.tablet",
        impact: REBOOT,
        desired: |i| Ok(only_on(options(i.spec).tablet)),
        same: same_flag_on_by_default,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: |cx, vm| inverse::flag_owned_on(cx, "tablet", &mut options_mut(vm).tablet),
    }),
    Row::Key(Key {
        key: "hotplug",
        field: "spec.options.hotplug",
        impact: REBOOT,
        desired: |i| {
            let o = options(i.spec);
            Ok((!o.hotplug.is_empty()).then(|| ParamValue::Plain(o.hotplug.join(","))))
        },
        same: |live, want| hotplug_set(live) == hotplug_set(Some(want)),
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::hotplug,
    }),
    Row::Key(Key {
        key: "boot",
        field: "spec.options.boot-order",
        impact: REBOOT,
        desired: |i| {
            let o = options(i.spec);
            Ok((!o.boot_order.is_empty())
                .then(|| ParamValue::Plain(Boot::Order(o.boot_order).to_wire())))
        },
        same: |live, want| live.and_then(|l| Boot::parse(l).ok()) == Boot::parse(want).ok(),
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::boot,
    }),
    Row::Key(Key {
        key: "ciuser",
        field: "spec.cloud-init-data.ci-user",
        impact: REBOOT,
        desired: |i| {
            Ok(i.spec
                .cloud_init_data
                .as_ref()
                .and_then(|c| text(c.ci_user.as_ref())))
        },
        same: same_trimmed,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::ciuser,
    }),
    Row::Key(Key {
        key: "sshkeys",
        field: "spec.cloud-init-data.ssh-keys",
        impact: REBOOT,
        desired: |i| match &i.spec.cloud_init_data {
            Some(ci) => Ok(ssh_keys(i.obj, ci, i.ctx)?.and_then(|k| plain(k.to_wire()))),
            None => Ok(None),
        },
        same: |live, want| {
            live.and_then(|l| SshKeys::parse(l).ok()).map(|k| k.ids())
                == SshKeys::parse(want).ok().map(|k| k.ids())
        },
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::sshkeys,
    }),
    Row::Key(Key {
        key: "cipassword",
        field: "spec.cloud-init-data.ci-password-ref",
        impact: REBOOT,
        desired: |i| match &i.spec.cloud_init_data {
            Some(ci) => Ok(password(i.obj, ci, i.ctx)?.map(ParamValue::Secret)),
            None => Ok(None),
        },
        // §6.7.2: PVE reports only a mask; present means satisfied, never
        // rewritten (writing the mask would set it) [PROBE].
        same: |live, _| live.is_some(),
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::cipassword,
    }),
    Row::Key(Key {
        key: "nameserver",
        field: "spec.cloud-init-data.nameservers",
        impact: REBOOT,
        desired: |i| Ok(cloud_init_list(i.spec, |c| &c.nameservers)),
        same: same_dns_set,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::nameserver,
    }),
    Row::Key(Key {
        key: "searchdomain",
        field: "spec.cloud-init-data.search-domains",
        impact: REBOOT,
        desired: |i| Ok(cloud_init_list(i.spec, |c| &c.search_domains)),
        same: same_dns_set,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: inverse::searchdomain,
    }),
    Row::Family(cloudinit::IPCONFIGS),
    Row::Family(cloudinit::CLONE_IDENTITY),
    Row::Key(Key {
        key: "description",
        field: "spec.pve-description",
        impact: LIVE,
        desired: |i| Ok(i.spec.pve_description.clone().and_then(plain)),
        same: same_description,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: |cx, vm| vm.pve_description = cx.take("description").map(str::to_owned),
    }),
    Row::Key(Key {
        key: "tags",
        field: "spec.tags",
        impact: LIVE,
        desired: |i| Ok(plain(desired_tags(i.obj, &i.spec.tags)?.to_wire())),
        same: same_tags,
        write: write_desired,
        on_change: OnChange::Write,
        adopt: |cx, vm| vm.tags = cx.tags(),
    }),
];

// ------------------------------------------------------------ desired values

pub(crate) fn name(obj: &DesiredObject, vm: &VmSpec) -> String {
    vm.pve_name
        .clone()
        .unwrap_or_else(|| obj.metadata.name.to_string())
}

pub(crate) fn memory_mib(obj: &DesiredObject, vm: &VmSpec) -> Result<u64, DriftError> {
    vm.memory
        .whole_mib()
        .filter(|m| *m > 0)
        .ok_or_else(|| DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: "spec.memory".into(),
            message: format!(
                "memory {} is not a whole, non-zero number of MiB",
                vm.memory
            ),
        })
}

pub(crate) fn options(vm: &VmSpec) -> manifest::VmOptions {
    vm.options.clone().unwrap_or_default()
}

pub(crate) fn hardware(vm: &VmSpec) -> manifest::VmHardware {
    vm.hardware.clone().unwrap_or_default()
}

fn options_mut(vm: &mut VmSpec) -> &mut manifest::VmOptions {
    vm.options.get_or_insert_with(Default::default)
}

/// A cloud-init list key (`nameserver`, `searchdomain`): space-joined.
fn cloud_init_list(
    vm: &VmSpec,
    list: fn(&manifest::CloudInitData) -> &Vec<String>,
) -> Option<ParamValue> {
    let l = list(vm.cloud_init_data.as_ref()?);
    (!l.is_empty()).then(|| ParamValue::Plain(l.join(" ")))
}

/// `nested-virt`: PVE 9 has no `nestedvirt` key, and `flags=+vmx`/`+svm`
/// inside `cpu` depends on the host's CPU vendor, which ProxOps does not
/// know. With `cpu.type: host` the host's virtualisation extensions already
/// reach the guest, so nothing is sent; any other type fails closed.
fn check_nested(obj: &DesiredObject, vm: &VmSpec) -> Result<(), DriftError> {
    if options(vm).nested_virt == Some(true) && vm.cpu.cpu_type != "host" {
        return Err(DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: "spec.options.nested-virt".into(),
            message: format!(
                "PVE has no nested-virtualisation key and the cpu flag (+vmx or +svm) depends on the host's CPU vendor: use cpu.type \"host\" (passes the host's extensions through) instead of {:?}",
                vm.cpu.cpu_type
            ),
        });
    }
    Ok(())
}

/// `cpu`: the model, plus `hidden=1` when asked.
pub(crate) fn cpu(obj: &DesiredObject, vm: &VmSpec) -> Result<String, DriftError> {
    check_nested(obj, vm)?;
    let mut v = vm.cpu.cpu_type.clone();
    if options(vm).hidden == Some(true) {
        v.push_str(",hidden=1");
    }
    Ok(v)
}

/// The model and whether `hidden=1` is owned, from the desired `cpu` value.
fn cpu_parts(want: &str) -> (&str, bool) {
    match want.split_once(',') {
        Some((model, rest)) => (model, rest == "hidden=1"),
        None => (want, false),
    }
}

/// `cpu`: the model always; `hidden` only when owned.
fn same_cpu(live: Option<&str>, want: &str) -> bool {
    let (model, hidden) = cpu_parts(want);
    let live_model = live.and_then(|c| head_of(c, "cputype"));
    let live_hidden = live
        .and_then(|c| PropertyString::parse(c).ok())
        .and_then(|p| {
            p.get("hidden")
                .map(|h| crate::wire::parse_bool(h).unwrap_or(false))
        })
        .unwrap_or(false);
    live_model.as_deref() == Some(model) && (!hidden || live_hidden)
}

/// The live `cpu` with the desired model (and `hidden=1`), flags kept.
fn write_cpu(live: Option<&str>, want: ParamValue) -> ParamValue {
    let (model, hidden) = cpu_parts(want.expose());
    let mut v = with_head(live, model, "cputype");
    if hidden {
        let mut p = PropertyString::parse(&v).unwrap_or_default();
        p.set("hidden", "1");
        v = p.to_wire();
    }
    ParamValue::Plain(v)
}

/// PVE's machine schema has no `i440fx`: its name for the family is `pc`.
pub(crate) fn machine(m: &str) -> String {
    if m == "i440fx" {
        "pc".to_owned()
    } else {
        m.to_owned()
    }
}

fn machine_family(m: &str) -> &str {
    if m == "pc" || m.starts_with("pc-i440fx") {
        "pc"
    } else if m == "q35" || m.starts_with("pc-q35") {
        "q35"
    } else {
        m
    }
}

/// A family (`pc`, `q35`) accepts any of its versions; a version is exact.
fn same_machine(live: Option<&str>, want: &str) -> bool {
    let live = live
        .and_then(|v| head_of(v, "type"))
        .unwrap_or_else(|| "pc".to_owned());
    if want == "pc" || want == "q35" {
        machine_family(&live) == want
    } else {
        live == want
    }
}

/// `agent`: the live form keeps PVE's other agent options.
fn write_agent(live: Option<&str>, want: ParamValue) -> ParamValue {
    live.and_then(|l| Agent::parse(l).ok())
        .map(|a| {
            ParamValue::Plain(
                Agent {
                    enabled: true,
                    extra: a.extra,
                }
                .to_wire(),
            )
        })
        .unwrap_or(want)
}

pub(crate) fn hotplug_set(v: Option<&str>) -> std::collections::BTreeSet<String> {
    match v.map(str::trim) {
        None | Some("1") => ["network", "disk", "usb"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        Some("0") => std::collections::BTreeSet::new(),
        Some(s) => s
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect(),
    }
}

/// The leading value of a property string, or its `key=` spelling.
pub(crate) fn head_of(v: &str, key: &str) -> Option<String> {
    let p = PropertyString::parse(v).ok()?;
    p.positional()
        .map(str::to_owned)
        .or_else(|| p.get(key).map(str::to_owned))
}

/// Rebuilds `live` with `head` as its leading value (keeping other tokens),
/// for `cpu`, `vga`, `machine` whose leading value may be spelled `key=`.
fn with_head(live: Option<&str>, head: &str, key: &str) -> String {
    let Some(p) = live.and_then(|l| PropertyString::parse(l).ok()) else {
        return head.to_owned();
    };
    let mut tokens = vec![PropToken::Positional(head.to_owned())];
    for (i, t) in p.into_tokens().into_iter().enumerate() {
        match &t {
            PropToken::Positional(_) if i == 0 => {}
            PropToken::Pair { key: k, .. } if k == key => {}
            _ => tokens.push(t),
        }
    }
    PropertyString::from_tokens(tokens).to_wire()
}

// ------------------------------------------------------------ folds

/// The create form (or post-clone config write) of a VM, `vmid` and
/// `start` aside.
pub(crate) fn config(
    obj: &DesiredObject,
    vm: &VmSpec,
    ctx: &Context<'_>,
    form: Form,
    p: &mut Params,
) -> Result<(), DriftError> {
    let input = Input { obj, spec: vm, ctx };
    owned::create(KEYS, &input, form, p)
}

pub(crate) fn drift(
    obj: &DesiredObject,
    vm: &VmSpec,
    ctx: &Context<'_>,
    cfg: &LiveConfig,
    acc: &mut Acc,
) -> Result<(), DriftError> {
    let input = Input { obj, spec: vm, ctx };
    owned::drift(KEYS, &input, cfg, acc)?;
    super::extra_drift(&vm.extra, cfg, acc);
    Ok(())
}
