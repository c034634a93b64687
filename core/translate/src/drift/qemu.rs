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
//!   cloud-init data keys (read by the guest at boot) and
//!   `spec.extra` keys (ProxOps cannot know whether PVE hot-applies them, so
//!   they are written and left pending at worst).
//! - `Live`: `name`, `description`, `tags`, `onboot`, `startup`,
//!   `protection`: PVE applies them to the config at once; `cpulimit`:
//!   PVE changes the running guest's CPU quota.
//!
//! The column is the cost when PVE cannot apply a change live; `hotplug.rs`
//! lowers it to `Live` where PVE hot-applies it from the guest's own
//! `hotplug` and `numa` (NIC bridge/tag/firewall/rate always, model/MAC and
//! new NICs with network hotplug, a CD-ROM medium, a new scsi/virtio disk
//! with disk hotplug, memory with memory hotplug and NUMA, cores with cpu
//! hotplug).

use crate::adopt::qemu as inverse;
use crate::change::{Impact, ParamValue, Params};
use proxops_model::live::LiveConfig;
use proxops_model::manifest::{self, VmSpec};
use proxops_model::repo::DesiredObject;
use proxops_model::wire::{Agent, Boot, PropToken, PropertyString, SshKeys};

use super::owned::{
    self, Form, Input, Key, Row, either, plain, same_dns_set, same_exact, same_flag_off_by_default,
    same_flag_on_by_default, same_memory, same_trimmed, same_u32, text,
};
use super::resolve::{password, ssh_keys};
use super::{Acc, Context, DriftError, rate_text, same_rate};
use super::{cloudinit, drives, efi, nic, pci};

pub(crate) const STOP: Impact = Impact::StopStart;
pub(crate) const REBOOT: Impact = Impact::Reboot;
pub(crate) const LIVE: Impact = Impact::Live;

/// Every key a VM owns, in create-form order.
pub(crate) static KEYS: &[Row<VmSpec>] = &[
    Row::Key(Key::new(
        "name",
        "spec.pve-name",
        LIVE,
        |i| Ok(plain(name(i.obj, i.spec))),
        same_exact,
        inverse::name,
    )),
    Row::Key(Key::new(
        "memory",
        "spec.memory",
        STOP,
        |i| Ok(plain(memory_mib(i.obj, i.spec)?.to_string())),
        same_memory,
        inverse::memory,
    )),
    Row::Key(
        Key::new(
            "cpu",
            "spec.cpu.type",
            STOP,
            |i| Ok(plain(cpu(i.obj, i.spec)?)),
            same_cpu,
            inverse::cpu,
        )
        .writing(write_cpu),
    ),
    Row::Key(Key::new(
        "cores",
        "spec.cpu.cores",
        STOP,
        |i| Ok(plain(i.spec.cpu.cores.to_string())),
        same_u32,
        inverse::cores,
    )),
    Row::Key(Key::new(
        "cpulimit",
        "spec.cpu.limit",
        // qemu-server's vmconfig_hotplug_pending changes the cgroup quota.
        LIVE,
        |i| Ok(i.spec.cpu.limit.and_then(|l| plain(rate_text(l)))),
        // Absent is 0, unlimited; `2` = `2.0`.
        |live, want| same_rate(Some(live.unwrap_or("0")), want.parse().unwrap_or(-1.0)),
        inverse::cpulimit,
    )),
    Row::Key(Key::new(
        "sockets",
        "spec.hardware.sockets",
        STOP,
        |i| Ok(hardware(i.spec).sockets.and_then(|s| plain(s.to_string()))),
        |live, want| same_u32(Some(live.unwrap_or("1")), want),
        inverse::sockets,
    )),
    Row::Key(Key::new(
        "numa",
        "spec.hardware.numa",
        STOP,
        |i| Ok(either(hardware(i.spec).numa)),
        same_flag_off_by_default,
        inverse::numa,
    )),
    Row::Key(
        Key::new(
            "machine",
            "spec.hardware.machine",
            STOP,
            |i| {
                Ok(hardware(i.spec)
                    .machine
                    .as_deref()
                    .and_then(|m| plain(machine(m))))
            },
            same_machine,
            inverse::machine,
        )
        .writing(write_type_head),
    ),
    Row::Key(Key::new(
        "bios",
        "spec.hardware.bios",
        STOP,
        |i| Ok(hardware(i.spec).bios.and_then(|b| plain(b.as_str()))),
        |live, want| live.unwrap_or("seabios") == want,
        inverse::bios,
    )),
    Row::Key(
        Key::new(
            "vga",
            "spec.hardware.display",
            REBOOT,
            |i| Ok(text(hardware(i.spec).display.as_ref())),
            |live, want| live.and_then(|v| head_of(v, "type")).as_deref() == Some(want),
            inverse::vga,
        )
        .writing(write_type_head),
    ),
    Row::Family(drives::DISKS),
    Row::Family(efi::FIRMWARE),
    Row::Key(Key::new(
        "serial0",
        "spec.hardware.serial0",
        STOP,
        |i| Ok(text(hardware(i.spec).serial0.as_ref())),
        same_trimmed,
        inverse::serial0,
    )),
    Row::Family(drives::CLOUD_INIT_DRIVE),
    Row::Family(drives::CDROM),
    Row::Family(pci::HOSTPCI),
    Row::Family(nic::QEMU_NETS),
    Row::Key(Key::new(
        "onboot",
        "spec.options.onboot",
        LIVE,
        |i| Ok(either(options(i.spec).onboot)),
        same_flag_off_by_default,
        |cx, vm| inverse::flag_when_on(cx, "onboot", &mut options_mut(vm).onboot),
    )),
    Row::Key(Key::new(
        "startup",
        "spec.options.startup",
        LIVE,
        |i| Ok(text(options(i.spec).startup.as_ref())),
        same_trimmed,
        |cx, vm| options_mut(vm).startup = cx.startup(),
    )),
    Row::Key(Key::new(
        "protection",
        "spec.options.protection",
        LIVE,
        |i| Ok(either(options(i.spec).protection)),
        same_flag_off_by_default,
        |cx, vm| inverse::flag_when_on(cx, "protection", &mut options_mut(vm).protection),
    )),
    Row::Key(
        Key::new(
            "agent",
            "spec.options.agent",
            REBOOT,
            |i| Ok(either(options(i.spec).agent)),
            |live, want| {
                live.and_then(|l| Agent::parse(l).ok())
                    .is_some_and(|a| a.enabled)
                    == (want == "1")
            },
            inverse::agent,
        )
        .writing(write_agent),
    ),
    Row::Key(Key::new(
        "acpi",
        "spec.options.acpi",
        REBOOT,
        |i| Ok(either(options(i.spec).acpi)),
        same_flag_on_by_default,
        |cx, vm| inverse::flag_owned_on(cx, "acpi", &mut options_mut(vm).acpi),
    )),
    Row::Key(Key::new(
        "tablet",
        "spec.options.tablet",
        REBOOT,
        |i| Ok(either(options(i.spec).tablet)),
        same_flag_on_by_default,
        |cx, vm| inverse::flag_owned_on(cx, "tablet", &mut options_mut(vm).tablet),
    )),
    Row::Key(Key::new(
        "hotplug",
        "spec.options.hotplug",
        REBOOT,
        |i| {
            let o = options(i.spec);
            Ok((!o.hotplug.is_empty()).then(|| ParamValue::Plain(o.hotplug.join(","))))
        },
        |live, want| hotplug_set(live) == hotplug_set(Some(want)),
        inverse::hotplug,
    )),
    Row::Key(Key::new(
        "boot",
        "spec.options.boot-order",
        REBOOT,
        |i| {
            let o = options(i.spec);
            Ok((!o.boot_order.is_empty())
                .then(|| ParamValue::Plain(Boot::Order(o.boot_order).to_wire())))
        },
        |live, want| live.and_then(|l| Boot::parse(l).ok()) == Boot::parse(want).ok(),
        inverse::boot,
    )),
    Row::Key(Key::new(
        "ciuser",
        "spec.cloud-init-data.ci-user",
        REBOOT,
        |i| {
            Ok(i.spec
                .cloud_init_data
                .as_ref()
                .and_then(|c| text(c.ci_user.as_ref())))
        },
        same_trimmed,
        inverse::ciuser,
    )),
    Row::Key(Key::new(
        "sshkeys",
        "spec.cloud-init-data.ssh-keys",
        REBOOT,
        |i| match &i.spec.cloud_init_data {
            Some(ci) => Ok(ssh_keys(i.obj, ci, i.ctx)?.and_then(|k| plain(k.to_wire()))),
            None => Ok(None),
        },
        |live, want| {
            live.and_then(|l| SshKeys::parse(l).ok()).map(|k| k.ids())
                == SshKeys::parse(want).ok().map(|k| k.ids())
        },
        inverse::sshkeys,
    )),
    // §6.7.2: PVE reports only a mask; present means satisfied, never
    // rewritten (writing the mask would set it) [PROBE].
    Row::Key(Key::new(
        "cipassword",
        "spec.cloud-init-data.ci-password-ref",
        REBOOT,
        |i| match &i.spec.cloud_init_data {
            Some(ci) => Ok(password(i.obj, ci, i.ctx)?.map(ParamValue::Secret)),
            None => Ok(None),
        },
        |live, _| live.is_some(),
        inverse::cipassword,
    )),
    Row::Key(Key::new(
        "nameserver",
        "spec.cloud-init-data.nameservers",
        REBOOT,
        |i| Ok(cloud_init_list(i.spec, |c| &c.nameservers)),
        same_dns_set,
        inverse::nameserver,
    )),
    Row::Key(Key::new(
        "searchdomain",
        "spec.cloud-init-data.search-domains",
        REBOOT,
        |i| Ok(cloud_init_list(i.spec, |c| &c.search_domains)),
        same_dns_set,
        inverse::searchdomain,
    )),
    Row::Family(cloudinit::IPCONFIGS),
    Row::Family(cloudinit::CLONE_IDENTITY),
    owned::description(LIVE),
    owned::tags(LIVE),
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
    crate::adopt::section(&mut vm.options)
}

/// A cloud-init list key (`nameserver`, `searchdomain`): space-joined.
fn cloud_init_list(
    vm: &VmSpec,
    list: fn(&manifest::CloudInitData) -> &Vec<String>,
) -> Option<ParamValue> {
    let l = list(vm.cloud_init_data.as_ref()?);
    (!l.is_empty()).then(|| ParamValue::Plain(l.join(" ")))
}

/// The CPU flag that turns nested virtualisation on for any CPU type, on
/// either vendor (qemu-server >= 9.1, `QemuServer/CPUConfig.pm`).
pub const NESTED_VIRT_FLAG: &str = "+nested-virt";

/// `nested-virt`: with `cpu.type: host` the host's virtualisation
/// extensions already reach the guest, so nothing is sent; any other type
/// gets `flags=+nested-virt`.
fn wants_nested_flag(vm: &VmSpec) -> bool {
    options(vm).nested_virt == Some(true) && vm.cpu.cpu_type != "host"
}

/// `cpu`: the model, plus `hidden=1` and `flags=+nested-virt` when asked.
pub(crate) fn cpu(_obj: &DesiredObject, vm: &VmSpec) -> Result<String, DriftError> {
    let mut v = vm.cpu.cpu_type.clone();
    if options(vm).hidden == Some(true) {
        v.push_str(",hidden=1");
    }
    if wants_nested_flag(vm) {
        v.push_str(",flags=");
        v.push_str(NESTED_VIRT_FLAG);
    }
    Ok(v)
}

/// The model, whether `hidden=1` is owned and whether `+nested-virt` is,
/// from the desired `cpu` value.
fn cpu_parts(want: &str) -> (String, bool, bool) {
    let p = PropertyString::parse(want).unwrap_or_default();
    let model = p.positional().unwrap_or(want).to_owned();
    let hidden = p.get("hidden") == Some("1");
    let nested = p.get("flags") == Some(NESTED_VIRT_FLAG);
    (model, hidden, nested)
}

/// The `;`-separated flags of a live `cpu` value.
fn cpu_flags(live: &PropertyString) -> Vec<String> {
    live.get("flags")
        .map(|f| {
            f.split(';')
                .filter(|x| !x.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `cpu`: the model always; `hidden` and `+nested-virt` only when owned.
fn same_cpu(live: Option<&str>, want: &str) -> bool {
    let (model, hidden, nested) = cpu_parts(want);
    let live_model = live.and_then(|c| head_of(c, "cputype"));
    let parsed = live.and_then(|c| PropertyString::parse(c).ok());
    let live_hidden = parsed
        .as_ref()
        .and_then(|p| {
            p.get("hidden")
                .map(|h| proxops_model::wire::parse_bool(h).unwrap_or(false))
        })
        .unwrap_or(false);
    let live_nested = parsed
        .as_ref()
        .is_some_and(|p| cpu_flags(p).iter().any(|f| f == NESTED_VIRT_FLAG));
    live_model.as_deref() == Some(model.as_str())
        && (!hidden || live_hidden)
        && (!nested || live_nested)
}

/// The live `cpu` with the desired model (and `hidden=1`, and
/// `+nested-virt` added to the live flags), other flags kept.
fn write_cpu(live: Option<&str>, want: ParamValue) -> ParamValue {
    let (model, hidden, nested) = cpu_parts(want.expose());
    let mut v = with_head(live, &model, "cputype");
    if hidden || nested {
        let mut p = PropertyString::parse(&v).unwrap_or_default();
        if hidden {
            p.set("hidden", "1");
        }
        if nested {
            let mut flags = cpu_flags(&p);
            if !flags.iter().any(|f| f == NESTED_VIRT_FLAG) {
                flags.push(NESTED_VIRT_FLAG.to_owned());
            }
            p.set("flags", &flags.join(";"));
        }
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

/// `machine`, `vga`: the desired type over the live value, options kept.
fn write_type_head(live: Option<&str>, want: ParamValue) -> ParamValue {
    ParamValue::Plain(with_head(live, want.expose(), "type"))
}

/// `agent`: the live form keeps PVE's other agent options.
fn write_agent(live: Option<&str>, want: ParamValue) -> ParamValue {
    let enabled = want.expose() == "1";
    live.and_then(|l| Agent::parse(l).ok())
        .map(|a| {
            ParamValue::Plain(
                Agent {
                    enabled,
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
