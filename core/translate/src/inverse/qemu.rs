//! VM and TemplateVM: the inverses of the scalar rows of
//! `drift::qemu::KEYS`, each reading one live qemu key back into a
//! `VmSpec`; the slot families carry their own.

use proxops_model::manifest::{Bios, VmSpec};
use proxops_model::wire::{self, Agent, Boot, DnsList, PropToken, PropertyString, SshKeys};

use super::{GuestCx, section};

/// The CPU flag that turns nested virtualisation on for any CPU type, on
/// either vendor (qemu-server >= 9.1, `QemuServer/CPUConfig.pm`).
pub const NESTED_VIRT_FLAG: &str = "+nested-virt";

/// `name` → `pve-name` only when it differs from `metadata.name`.
pub(crate) fn name(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    let missing = format!("no name on PVE: the first apply names the VM {}", cx.name);
    vm.pve_name = cx.name_override("name", missing);
}

/// `cpu`: the model; `hidden=1` is an option; other tokens stay PVE's.
pub(crate) fn cpu(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    let Some(v) = cx.take("cpu") else {
        cx.gap("cpu", None, "not set on PVE (PVE's default model): the manifest says kvm64 and the first apply writes it");
        return;
    };
    let p = PropertyString::parse(v).unwrap_or_default();
    let mut model = None;
    let mut rest = Vec::new();
    for (i, t) in p.into_tokens().into_iter().enumerate() {
        match &t {
            PropToken::Positional(m) if i == 0 => model = Some(m.clone()),
            PropToken::Pair { key, value } if key == "cputype" && model.is_none() => {
                model = Some(value.clone())
            }
            PropToken::Pair { key, value } if key == "hidden" => {
                if wire::parse_bool(value).unwrap_or(false) {
                    section(&mut vm.options).hidden = Some(true);
                }
            }
            // `+nested-virt` is `options.nested-virt`; other flags stay PVE's.
            PropToken::Pair { key, value } if key == "flags" => {
                let mut others = Vec::new();
                for f in value.split(';').filter(|f| !f.is_empty()) {
                    if f == NESTED_VIRT_FLAG {
                        section(&mut vm.options).nested_virt = Some(true);
                    } else {
                        others.push(f);
                    }
                }
                if !others.is_empty() {
                    rest.push(PropToken::Pair {
                        key: key.clone(),
                        value: others.join(";"),
                    });
                }
            }
            _ => rest.push(t),
        }
    }
    cx.token_gap("cpu", &rest, "cpu tokens other than the model and hidden (flags, phys-bits, …) are not adopted (cpu.flags is never sent); PVE keeps them");
    match model {
        Some(m) => vm.cpu.cpu_type = m,
        None => cx.gap("cpu", Some(v), "no CPU model: the manifest says kvm64"),
    }
}

/// The leading value of a property string (or its `key=` spelling) and
/// every other token.
fn head_and_rest(v: &str, key: &str) -> (Option<String>, Vec<PropToken>) {
    let p = PropertyString::parse(v).unwrap_or_default();
    let head = p
        .positional()
        .map(str::to_owned)
        .or_else(|| p.get(key).map(str::to_owned));
    let rest = p
        .into_tokens()
        .into_iter()
        .enumerate()
        .filter(|(i, t)| {
            !matches!(t, PropToken::Positional(_) if *i == 0)
                && !matches!(t, PropToken::Pair { key: k, .. } if k == key)
        })
        .map(|(_, t)| t)
        .collect();
    (head, rest)
}

pub(crate) fn machine(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    let Some(m) = cx.take("machine") else { return };
    let (head, rest) = head_and_rest(m, "type");
    match head {
        Some(h) if h == "pc" => section(&mut vm.hardware).machine = Some("i440fx".into()),
        Some(h) if h == "q35" || h.starts_with("pc-") => {
            section(&mut vm.hardware).machine = Some(h)
        }
        Some(h) => cx.gap(
            "machine",
            Some(m),
            format!("machine type {h:?} is not modelled (i440fx, q35, pc-*): not adopted"),
        ),
        None => cx.gap("machine", Some(m), "no machine type: not adopted"),
    }
    cx.token_gap(
        "machine",
        &rest,
        "machine options (viommu, …) are not modelled; PVE keeps them",
    );
}

pub(crate) fn bios(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    if let Some(b) = cx.take("bios") {
        match b.trim() {
            "seabios" => section(&mut vm.hardware).bios = Some(Bios::Seabios),
            "ovmf" => section(&mut vm.hardware).bios = Some(Bios::Ovmf),
            other => cx.gap(
                "bios",
                Some(b),
                format!("firmware {other:?} is not modelled: not adopted"),
            ),
        }
    }
}

pub(crate) fn vga(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    let Some(v) = cx.take("vga") else { return };
    let (head, rest) = head_and_rest(v, "type");
    match head {
        Some(h) => section(&mut vm.hardware).display = Some(h),
        None => cx.gap("vga", Some(v), "no display type: not adopted"),
    }
    cx.token_gap(
        "vga",
        &rest,
        "display options (memory, clipboard) are not modelled; PVE keeps them",
    );
}

pub(crate) fn serial0(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    if let Some(s) = cx.take("serial0") {
        section(&mut vm.hardware).serial0 = Some(s.to_owned());
    }
}

pub(crate) fn agent(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    let Some(v) = cx.take("agent") else { return };
    match Agent::parse(v) {
        Ok(a) => {
            if a.enabled {
                section(&mut vm.options).agent = Some(true);
            }
            cx.token_gap(
                "agent",
                &a.extra,
                "guest-agent options (fstrim_cloned_disks, type) are not modelled; PVE keeps them",
            );
        }
        Err(_) => cx.gap("agent", Some(v), "unreadable: not adopted"),
    }
}

pub(crate) fn boot(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    let Some(b) = cx.take("boot") else { return };
    match Boot::parse(b) {
        Ok(Boot::Order(o)) => {
            let mut seen = std::collections::BTreeSet::new();
            if o.iter().all(|x| seen.insert(x.clone())) {
                section(&mut vm.options).boot_order = o;
            } else {
                cx.gap(
                    "boot",
                    Some(b),
                    "a boot order listing a device twice cannot be declared: PVE keeps it",
                );
            }
        }
        Ok(Boot::Legacy(_)) => cx.gap(
            "boot",
            Some(b),
            "the legacy boot string is not modelled (boot-order is): PVE keeps it",
        ),
        Err(_) => cx.gap("boot", Some(b), "unreadable: PVE keeps it"),
    }
}

pub(crate) fn ciuser(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    if let Some(u) = cx.take("ciuser")
        && !u.trim().is_empty()
    {
        section(&mut vm.cloud_init_data).ci_user = Some(u.to_owned());
    }
}

/// Keys found in the SOPS file become references; otherwise `["*"]`
/// (accept whatever PVE holds).
pub(crate) fn sshkeys(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    let Some(k) = cx.take("sshkeys") else { return };
    match SshKeys::parse(k) {
        Ok(keys) if !keys.keys.is_empty() => {
            let refs = cx.shared.ssh_names.as_ref().and_then(|names| {
                let mut out: Vec<String> = Vec::new();
                for key in &keys.keys {
                    let name = names.get(&key.id())?;
                    let r = format!("cloud-init.ssh-keys.{name}");
                    if !out.contains(&r) {
                        out.push(r);
                    }
                }
                Some(out)
            });
            match refs {
                Some(r) => section(&mut vm.cloud_init_data).ssh_key_refs = r,
                None => section(&mut vm.cloud_init_data).ssh_keys = vec!["*".into()],
            }
        }
        Ok(_) => {}
        Err(_) => cx.gap("sshkeys", Some(k), "unreadable keys: left to PVE"),
    }
}

/// Never adopted: PVE reports only a mask. Counted for the report.
pub(crate) fn cipassword(cx: &mut GuestCx<'_>, _vm: &mut VmSpec) {
    if let Some(p) = cx.take("cipassword") {
        cx.cipassword = true;
        cx.gap("cipassword", Some(p), super::key_note("cipassword"));
    }
}

pub(crate) fn nameserver(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    if let Some(ns) = cx.nameservers() {
        section(&mut vm.cloud_init_data).nameservers = ns;
    }
}

pub(crate) fn searchdomain(cx: &mut GuestCx<'_>, vm: &mut VmSpec) {
    if let Some(sd) = cx.take("searchdomain") {
        match DnsList::parse(sd) {
            Ok(l) if !l.entries.is_empty() => {
                section(&mut vm.cloud_init_data).search_domains = l.entries
            }
            _ => cx.gap("searchdomain", Some(sd), "unreadable: left to PVE"),
        }
    }
}
