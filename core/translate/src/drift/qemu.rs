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

use crate::change::{Impact, ParamValue, Params};
use crate::inverse::qemu as inverse;
use crate::inverse::qemu::NESTED_VIRT_FLAG;
use crate::inverse::section;
use proxops_model::live::LiveConfig;
use proxops_model::manifest::{self, VmSpec};
use proxops_model::repo::DesiredObject;
use proxops_model::units::Quantity;
use proxops_model::wire::{Agent, Boot, PropToken, PropertyString, SshKeys};
use std::sync::LazyLock;

use super::codec::{
    Absent, Adopt, Codec, Count, Doc, Field, Flag, ImpactRule, MiB, Rate, Unreadable,
};
use super::owned::{
    self, Form, Input, Key, Row, either, plain, same_dns_set, same_exact, same_trimmed, text,
};
use super::resolve::{password, ssh_keys};
use super::{Acc, Context, DriftError};
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
    Row::Field(&MEMORY),
    Row::Field(&BALLOON),
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
    Row::Field(&CORES),
    Row::Field(&CPULIMIT),
    Row::Field(&SOCKETS),
    Row::Field(&NUMA),
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
    Row::Field(&ONBOOT),
    Row::Key(Key::new(
        "startup",
        "spec.options.startup",
        LIVE,
        |i| Ok(text(options(i.spec).startup.as_ref())),
        same_trimmed,
        |cx, vm| options_mut(vm).startup = cx.startup(),
    )),
    Row::Field(&PROTECTION),
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
    Row::Field(&ACPI),
    Row::Field(&TABLET),
    Row::Field(&HOTPLUG),
    Row::Key(Key::new(
        "boot",
        "spec.options.boot-order",
        REBOOT,
        |i| {
            let o = options(i.spec);
            Ok((!o.boot_order.is_empty())
                .then(|| ParamValue::Plain(Boot::Order(o.boot_order.clone()).to_wire())))
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

// ------------------------------------------------------------ scalar rows

const MIB: u64 = 1 << 20;

/// The doc line of a field whose absence leaves PVE's value alone.
const NOT_OWNED: Doc = Doc {
    default: "not owned",
    impact_note: None,
};

/// A required field.
const REQUIRED: Doc = Doc {
    default: "— (required)",
    impact_note: None,
};

static MEMORY: Field<VmSpec, MiB> = Field::memory(
    |i| Ok(Some(memory_mib(i.obj, i.spec)?)),
    |vm, m| vm.memory = Quantity::from_bytes(m * MIB),
    // qemu-server `QemuServer/Memory.pm`: memory is hot-plugged as DIMMs,
    // which needs `memory` hotplug and NUMA.
    ImpactRule::Hot(STOP, |h, _, _| h.has("memory") && h.numa()),
    Some("live when the VM's hotplug has memory and numa is on"),
);

static BALLOON: Field<VmSpec, MiB> = Field {
    key: "balloon",
    path: "spec.balloon",
    codec: MiB { min: 0 },
    get: |i| match i.spec.balloon {
        Some(b) => b.whole_mib().map(Some).ok_or_else(|| {
            i.unsupported(
                "spec.balloon",
                format!("balloon {b} is not a whole number of MiB"),
            )
        }),
        None => Ok(None),
    },
    set: |vm, m| vm.balloon = Some(Quantity::from_bytes(m * MIB)),
    // qemu-server `QemuServer.pm` `config_to_command`: the balloon device
    // is on "by default, unless explicitly disabled", its target `memory`.
    absent: Absent::SameAs("memory"),
    // qemu-server `QemuServer.pm` `vmconfig_hotplug_pending`: a new target
    // is applied to the running VM at once, whatever its hotplug; turning
    // the device on or off ("enable/disable ballooning device is not
    // hotpluggable") waits for a restart.
    impact: ImpactRule::Hot(STOP, |_, from, to| balloon_on(from) == balloon_on(to)),
    adopt: Adopt::Always,
    missing: None,
    unreadable: "unreadable balloon target: not adopted",
    doc: Doc {
        default: "not owned (PVE: ballooning on, target `memory`)",
        impact_note: Some("live unless it turns ballooning on or off (to or from 0)"),
    },
};

/// Whether a `balloon` value (absent: PVE's default) leaves the balloon
/// device on.
fn balloon_on(v: Option<&str>) -> bool {
    v.is_none_or(|v| v.trim() != "0")
}

static CORES: Field<VmSpec, Count> = Field {
    key: "cores",
    path: "spec.cpu.cores",
    codec: Count { min: 1 },
    get: |i| Ok(Some(i.spec.cpu.cores)),
    set: |vm, c| vm.cpu.cores = c,
    absent: Absent::Unset,
    impact: ImpactRule::Fixed(STOP),
    adopt: Adopt::Always,
    missing: Some(
        "cores not set on PVE (default 1): the manifest says 1 and the first apply writes it",
    ),
    unreadable: "cores unreadable: the manifest says 1 and the first apply writes it",
    doc: REQUIRED,
};

static CPULIMIT: Field<VmSpec, Rate> = Field {
    key: "cpulimit",
    path: "spec.cpu.limit",
    codec: Rate { max: 128.0 },
    get: |i| Ok(i.spec.cpu.limit),
    set: |vm, l| vm.cpu.limit = Some(l),
    // Absent is 0, unlimited, and not declared.
    absent: Absent::PveDefault("0"),
    // qemu-server's vmconfig_hotplug_pending changes the cgroup quota.
    impact: ImpactRule::Fixed(LIVE),
    adopt: Adopt::UnlessDefault,
    missing: None,
    unreadable: "unreadable cpu limit: not adopted",
    doc: Doc {
        default: "not owned (PVE: 0, unlimited)",
        impact_note: None,
    },
};

static SOCKETS: Field<VmSpec, Count> = Field {
    key: "sockets",
    path: "spec.hardware.sockets",
    codec: Count { min: 1 },
    get: |i| Ok(hardware(i.spec).sockets),
    set: |vm, n| section(&mut vm.hardware).sockets = Some(n),
    absent: Absent::PveDefault("1"),
    impact: ImpactRule::Fixed(STOP),
    adopt: Adopt::Always,
    missing: None,
    unreadable: "unreadable sockets: not adopted",
    doc: Doc {
        default: "not owned (PVE: 1)",
        impact_note: None,
    },
};

static NUMA: Field<VmSpec, Flag> = Field {
    key: "numa",
    path: "spec.hardware.numa",
    codec: Flag { default: false },
    get: |i| Ok(hardware(i.spec).numa),
    set: |vm, b| section(&mut vm.hardware).numa = Some(b),
    absent: Absent::PveDefault("0"),
    impact: ImpactRule::Fixed(STOP),
    adopt: Adopt::Always,
    missing: None,
    unreadable: "unreadable numa flag: not adopted",
    doc: NOT_OWNED,
};

/// A boolean option PVE defaults to off: declared only when on.
const OFF_FLAG: Field<VmSpec, Flag> = Field {
    key: "",
    path: "",
    codec: Flag { default: false },
    get: |_| Ok(None),
    set: |_, _| {},
    absent: Absent::PveDefault("0"),
    impact: ImpactRule::Fixed(LIVE),
    adopt: Adopt::UnlessDefault,
    missing: None,
    unreadable: "unreadable flag: not adopted",
    doc: NOT_OWNED,
};

/// A boolean option PVE defaults to on: switched off on PVE, it is
/// adopted as `false` (owned, so the manifest keeps it off).
const ON_FLAG: Field<VmSpec, Flag> = Field {
    codec: Flag { default: true },
    absent: Absent::PveDefault("1"),
    impact: ImpactRule::Fixed(REBOOT),
    adopt: Adopt::Always,
    ..OFF_FLAG
};

static ONBOOT: Field<VmSpec, Flag> = Field {
    key: "onboot",
    path: "spec.options.onboot",
    get: |i| Ok(options(i.spec).onboot),
    set: |vm, b| options_mut(vm).onboot = Some(b),
    ..OFF_FLAG
};

static PROTECTION: Field<VmSpec, Flag> = Field {
    key: "protection",
    path: "spec.options.protection",
    get: |i| Ok(options(i.spec).protection),
    set: |vm, b| options_mut(vm).protection = Some(b),
    ..OFF_FLAG
};

static ACPI: Field<VmSpec, Flag> = Field {
    key: "acpi",
    path: "spec.options.acpi",
    get: |i| Ok(options(i.spec).acpi),
    set: |vm, b| options_mut(vm).acpi = Some(b),
    ..ON_FLAG
};

static TABLET: Field<VmSpec, Flag> = Field {
    key: "tablet",
    path: "spec.options.tablet",
    get: |i| Ok(options(i.spec).tablet),
    set: |vm, b| options_mut(vm).tablet = Some(b),
    // `vm_deviceplug`/`vm_deviceunplug` of the tablet with usb hotplug.
    impact: ImpactRule::Hot(REBOOT, |h, _, _| h.has("usb")),
    ..ON_FLAG
};

static HOTPLUG: Field<VmSpec, HotplugList> = Field {
    key: "hotplug",
    path: "spec.options.hotplug",
    codec: HotplugList,
    get: |i| {
        let o = options(i.spec);
        Ok((!o.hotplug.is_empty()).then(|| o.hotplug.clone()))
    },
    set: |vm, items| options_mut(vm).hotplug = items,
    absent: Absent::PveDefault("1"),
    // `hotplug` itself, unless the old or new value involves memory or
    // cpu ("skip" in `vmconfig_hotplug_pending`).
    impact: ImpactRule::Hot(REBOOT, |_, from, to| {
        ![from, to]
            .iter()
            .any(|v| v.is_some_and(|v| v.contains("memory") || v.contains("cpu")))
    }),
    adopt: Adopt::Always,
    missing: None,
    unreadable: "this hotplug setting cannot be declared (none, or an unknown item): PVE keeps it",
    doc: Doc {
        default: "not owned (PVE: network,disk,usb)",
        impact_note: None,
    },
};

/// `hotplug`: a list of features, `1` for PVE's default set and `0` for
/// none; compared as a set.
struct HotplugList;

impl Codec for HotplugList {
    type Value = Vec<String>;
    fn encode(&self, v: &Vec<String>) -> String {
        v.join(",")
    }
    /// None at all, or an item the manifest cannot name, cannot be declared.
    fn decode(&self, wire: &str) -> Result<Vec<String>, Unreadable> {
        let items: Vec<String> = match wire.trim() {
            "1" => vec!["network".into(), "disk".into(), "usb".into()],
            "0" => Vec::new(),
            s => s
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(str::to_owned)
                .collect(),
        };
        if items.is_empty()
            || items
                .iter()
                .any(|i| !manifest::HOTPLUG_ITEMS.contains(&i.as_str()))
        {
            Err(Unreadable)
        } else {
            Ok(items)
        }
    }
    fn same(&self, live: &str, want: &Vec<String>) -> bool {
        hotplug_set(Some(live)) == hotplug_set(Some(&want.join(",")))
    }
}

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

/// The VM's options, or the defaults when it sets none (borrowed: the
/// drift of every guest reads them a dozen times).
pub(crate) fn options(vm: &VmSpec) -> &manifest::VmOptions {
    static NONE: LazyLock<manifest::VmOptions> = LazyLock::new(Default::default);
    vm.options.as_ref().unwrap_or(&NONE)
}

/// The VM's hardware section, or the defaults when it sets none.
pub(crate) fn hardware(vm: &VmSpec) -> &manifest::VmHardware {
    static NONE: LazyLock<manifest::VmHardware> = LazyLock::new(Default::default);
    vm.hardware.as_ref().unwrap_or(&NONE)
}

fn options_mut(vm: &mut VmSpec) -> &mut manifest::VmOptions {
    crate::inverse::section(&mut vm.options)
}

/// A cloud-init list key (`nameserver`, `searchdomain`): space-joined.
fn cloud_init_list(
    vm: &VmSpec,
    list: fn(&manifest::CloudInitData) -> &Vec<String>,
) -> Option<ParamValue> {
    let l = list(vm.cloud_init_data.as_ref()?);
    (!l.is_empty()).then(|| ParamValue::Plain(l.join(" ")))
}

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
    // A bare model PVE holds as it is: the comparison below says `true`
    // without parsing either side.
    if live == Some(want) && !want.contains([',', '=']) && !want.trim().is_empty() {
        return true;
    }
    let (model, hidden, nested) = cpu_parts(want);
    // Parsed once: `head_of` would parse the same text again.
    let parsed = live.and_then(|c| PropertyString::parse(c).ok());
    let live_model = parsed
        .as_ref()
        .and_then(|p| p.positional().or_else(|| p.get("cputype")));
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
    live_model == Some(model.as_str()) && (!hidden || live_hidden) && (!nested || live_nested)
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

/// What PVE hotplugs by default (`hotplug: 1`, or no key).
pub(crate) const DEFAULT_HOTPLUG: [&str; 3] = ["network", "disk", "usb"];

pub(crate) fn hotplug_set(v: Option<&str>) -> std::collections::BTreeSet<String> {
    match v.map(str::trim) {
        None | Some("1") => DEFAULT_HOTPLUG.iter().map(|s| (*s).to_owned()).collect(),
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
