//! VM and TemplateVM: a live qemu `/config` read back into a `VmSpec`,
//! the inverse of `drift::qemu` (every value chosen so the drift of the
//! result against the same config is empty, apart from the ownership tag).

use crate::manifest::{
    self, Aio, Bios, Cdrom, CloudInitData, CloudInitDrive, Discard, IpConfig, PciDevice, PciSlot,
    PowerState, SecureBoot, Tpm, VmCpu, VmDisk, VmHardware, VmNic, VmOptions, VmSpec,
};
use crate::units::Quantity;
use crate::wire::{
    self, Agent, Boot, DnsList, Drive, DriveVolume, EfiDisk, HostPci, PciDevice as WirePci,
    PropToken, PropertyString, QemuNet, SshKeys, TpmState, TpmVersion,
};

use super::GuestCx;

const MIB: u64 = 1 << 20;

pub(crate) fn adopt(cx: &mut GuestCx<'_>, state: Option<PowerState>) -> VmSpec {
    let mut hw = VmHardware::default();
    let mut opts = VmOptions::default();

    // name → pve-name only when it differs from metadata.name.
    let pve_name = {
        let missing = format!("no name on PVE: the first apply names the VM {}", cx.name);
        cx.name_override("name", missing)
    };

    let memory = cx.memory_mib();

    // cpu: the model; `hidden=1` is an option; other tokens stay PVE's.
    let cpu_type = match cx.take("cpu") {
        Some(v) => {
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
                            opts.hidden = Some(true);
                        }
                    }
                    _ => rest.push(t),
                }
            }
            cx.token_gap("cpu", &rest, "cpu tokens other than the model and hidden (flags, phys-bits, …) are not adopted (cpu.flags is never sent); PVE keeps them");
            model.unwrap_or_else(|| {
                cx.gap("cpu", Some(v), "no CPU model: the manifest says kvm64");
                "kvm64".to_owned()
            })
        }
        None => {
            cx.gap("cpu", None, "not set on PVE (PVE's default model): the manifest says kvm64 and the first apply writes it");
            "kvm64".to_owned()
        }
    };
    let cores = match cx.take("cores").map(|c| c.trim().parse::<u32>()) {
        Some(Ok(c)) if c > 0 => c,
        other => {
            let live = cx.cfg.get("cores");
            let note = if other.is_none() {
                "not set on PVE (default 1)"
            } else {
                "unreadable"
            };
            cx.gap(
                "cores",
                live,
                format!("cores {note}: the manifest says 1 and the first apply writes it"),
            );
            1
        }
    };
    if let Some(s) = cx.take("sockets") {
        match s.trim().parse::<u32>() {
            Ok(n) if n > 0 => hw.sockets = Some(n),
            _ => cx.gap("sockets", Some(s), "unreadable sockets: not adopted"),
        }
    }
    if let Some(n) = cx.take("numa") {
        match wire::parse_bool(n) {
            Ok(b) => hw.numa = Some(b),
            Err(_) => cx.gap("numa", Some(n), "unreadable numa flag: not adopted"),
        }
    }
    if let Some(m) = cx.take("machine") {
        let p = PropertyString::parse(m).unwrap_or_default();
        let head = p
            .positional()
            .map(str::to_owned)
            .or_else(|| p.get("type").map(str::to_owned));
        match head {
            Some(h) if h == "pc" => hw.machine = Some("i440fx".into()),
            Some(h) if h == "q35" || h.starts_with("pc-") => hw.machine = Some(h),
            Some(h) => cx.gap(
                "machine",
                Some(m),
                format!("machine type {h:?} is not modelled (i440fx, q35, pc-*): not adopted"),
            ),
            None => cx.gap("machine", Some(m), "no machine type: not adopted"),
        }
        let rest: Vec<PropToken> = p
            .into_tokens()
            .into_iter()
            .enumerate()
            .filter(|(i, t)| {
                !matches!(t, PropToken::Positional(_) if *i == 0)
                    && !matches!(t, PropToken::Pair { key, .. } if key == "type")
            })
            .map(|(_, t)| t)
            .collect();
        if !rest.is_empty() {
            cx.token_gap(
                "machine",
                &rest,
                "machine options (viommu, …) are not modelled; PVE keeps them",
            );
        }
    }
    if let Some(b) = cx.take("bios") {
        match b.trim() {
            "seabios" => hw.bios = Some(Bios::Seabios),
            "ovmf" => hw.bios = Some(Bios::Ovmf),
            other => cx.gap(
                "bios",
                Some(b),
                format!("firmware {other:?} is not modelled: not adopted"),
            ),
        }
    }
    if let Some(v) = cx.take("vga") {
        let p = PropertyString::parse(v).unwrap_or_default();
        let head = p
            .positional()
            .map(str::to_owned)
            .or_else(|| p.get("type").map(str::to_owned));
        match head {
            Some(h) => hw.display = Some(h),
            None => cx.gap("vga", Some(v), "no display type: not adopted"),
        }
        let rest: Vec<PropToken> = p
            .into_tokens()
            .into_iter()
            .enumerate()
            .filter(|(i, t)| {
                !matches!(t, PropToken::Positional(_) if *i == 0)
                    && !matches!(t, PropToken::Pair { key, .. } if key == "type")
            })
            .map(|(_, t)| t)
            .collect();
        if !rest.is_empty() {
            cx.token_gap(
                "vga",
                &rest,
                "display options (memory, clipboard) are not modelled; PVE keeps them",
            );
        }
    }
    if let Some(s) = cx.take("serial0") {
        hw.serial0 = Some(s.to_owned());
    }

    // Drives, in bus order then slot number.
    let mut disks: Vec<VmDisk> = Vec::new();
    let mut cloud_init_on_ide2 = false;
    let mut cd: Option<(String, Cdrom)> = None;
    let mut drive_keys: Vec<String> = Vec::new();
    for (bus, _) in manifest::DISK_BUSES {
        for (_, key, _) in cx.cfg.slots(bus) {
            drive_keys.push(key.to_owned());
        }
    }
    for key in drive_keys {
        let Some(v) = cx.take(&key) else { continue };
        let d = match Drive::parse(v) {
            Ok(d) => d,
            Err(e) => {
                cx.gap(
                    &key,
                    Some(v),
                    format!("unreadable drive ({e}): not adopted"),
                );
                continue;
            }
        };
        let ide = key.starts_with("ide");
        if d.is_cloudinit() {
            if key == "ide2"
                && let Some(storage) = d.volume.storage()
            {
                hw.cloud_init = Some(CloudInitDrive {
                    enabled: true,
                    storage: Some(storage.clone()),
                    size: None,
                });
                cloud_init_on_ide2 = true;
                continue;
            }
            cx.gap(&key, Some(v), "a cloud-init drive outside ide2: ProxOps models cloud-init on ide2 only, so this slot stays PVE's (plans show it as a live-only slot)");
            continue;
        }
        if d.is_cdrom() || d.iso_file().is_some() || d.volume == DriveVolume::None {
            if !ide {
                cx.gap(&key, Some(v), "a CD drive outside IDE is not modelled: the slot stays PVE's (plans show it as a live-only slot)");
                continue;
            }
            let iso = match &d.volume {
                DriveVolume::None => Some("none".to_owned()),
                DriveVolume::Volume(vol) => match d.iso_file() {
                    Some(f) => match cx.shared.isos.get(&(vol.storage.clone(), f.to_owned())) {
                        Some(n) => Some(n.to_string()),
                        None => {
                            cx.gap(&key, Some(v), "the ISO is in no adopted ISO manifest (not in a storage listing, or not a valid ISO file name): the CD drive is left to PVE");
                            None
                        }
                    },
                    None => {
                        cx.gap(
                            &key,
                            Some(v),
                            "a CD drive holding something other than an ISO: left to PVE",
                        );
                        None
                    }
                },
                _ => {
                    cx.gap(&key, Some(v), "a physical or unusual CD drive: left to PVE");
                    None
                }
            };
            if let Some(iso) = iso {
                if cd.is_some() {
                    cx.gap(&key, Some(v), "a second CD drive: ProxOps owns one (ide2, or ide3 beside cloud-init); left to PVE");
                } else {
                    cd = Some((
                        key.clone(),
                        Cdrom {
                            iso: Some(iso),
                            media: None,
                        },
                    ));
                }
            }
            continue;
        }
        let DriveVolume::Volume(vol) = &d.volume else {
            cx.gap(&key, Some(v), "not a storage volume (a device path or passthrough): not modelled; plans show it as a live-only slot");
            continue;
        };
        let size = match d.size.map(|b| b.get()).or_else(|| cx.listed_size(vol)) {
            Some(s) => Some(Quantity::from_bytes(s)),
            None => {
                cx.gap(&key, Some(v), "the volume size is in neither the config nor the storage listing: set spec.disks size by hand");
                None
            }
        };
        let is_virtio = key.starts_with("virtio");
        let disk = VmDisk {
            storage: vol.storage.clone(),
            size,
            image: None,
            interface: Some(key.clone()),
            controller: None,
            iothread: d.iothread,
            discard: d.discard.map(|x| match x {
                wire::Discard::On => Discard::On,
                wire::Discard::Ignore => Discard::Ignore,
            }),
            ssd: if is_virtio { None } else { d.ssd },
            aio: d.aio.map(|a| match a {
                wire::Aio::Native => Aio::Native,
                wire::Aio::Threads => Aio::Threads,
                wire::Aio::IoUring => Aio::IoUring,
            }),
        };
        if is_virtio && d.ssd.is_some() {
            cx.gap(
                &key,
                Some(v),
                "ssd on a virtio disk is not valid in a manifest: left out",
            );
        }
        let mut rest: Vec<PropToken> = d.extra.clone();
        if let Some(m) = d.media.filter(|m| *m != wire::Media::Disk) {
            rest.push(PropToken::Pair {
                key: "media".into(),
                value: m.as_str().into(),
            });
        }
        if !rest.is_empty() {
            cx.token_gap(&key, &rest, "drive options other than iothread, discard, ssd and aio (cache, backup, replicate, serial, …) are not modelled; PVE keeps them");
        }
        disks.push(disk);
    }
    const CONTROLLERS: &[&str] = &[
        "lsi",
        "lsi53c810",
        "virtio-scsi-pci",
        "virtio-scsi-single",
        "megasas",
        "pvscsi",
    ];
    if let Some(c) = cx.take("scsihw") {
        if !CONTROLLERS.contains(&c.trim()) {
            cx.gap(
                "scsihw",
                Some(c),
                "a SCSI controller ProxOps does not know: PVE keeps it",
            );
        } else if let Some(first) = disks.first_mut() {
            first.controller = Some(c.trim().to_owned());
        } else {
            cx.gap(
                "scsihw",
                Some(c),
                "no disk to carry the controller: not adopted",
            );
        }
    }
    if let Some((slot, c)) = cd {
        let want_slot = if cloud_init_on_ide2 { "ide3" } else { "ide2" };
        if slot == want_slot {
            hw.cdrom = Some(c);
        } else {
            let v = cx.cfg.get(&slot);
            cx.gap(
                &slot,
                v,
                format!("ProxOps puts the CD drive on {want_slot}: this one is left to PVE"),
            );
        }
    }

    if let Some(e) = cx.take("efidisk0") {
        match EfiDisk::parse(e) {
            Ok(ed) if hw.bios == Some(Bios::Ovmf) => match ed.volume.storage() {
                Some(st) => {
                    hw.efi_disk = Some(manifest::EfiDisk {
                        storage: st.clone(),
                        size: None,
                        template: ed.efitype.clone(),
                        secure_boot: ed.pre_enrolled_keys.map(|b| {
                            if b {
                                SecureBoot::Enabled
                            } else {
                                SecureBoot::Disabled
                            }
                        }),
                    });
                    cx.token_gap("efidisk0", &ed.extra, "EFI disk options other than efitype and pre-enrolled-keys are not modelled; PVE keeps them");
                }
                None => cx.gap("efidisk0", Some(e), "not a storage volume: not adopted"),
            },
            Ok(_) => cx.gap(
                "efidisk0",
                Some(e),
                "an EFI disk without bios ovmf cannot be declared: not adopted",
            ),
            Err(err) => cx.gap(
                "efidisk0",
                Some(e),
                format!("unreadable ({err}): not adopted"),
            ),
        }
    }
    if let Some(t) = cx.take(TpmState::KEY) {
        match TpmState::parse(t) {
            Ok(ts) => match ts.volume.storage() {
                Some(st) => {
                    let version = ts.version.unwrap_or(TpmVersion::V1_2);
                    hw.tpm = Some(Tpm {
                        storage: st.clone(),
                        version: Some(version.as_str().to_owned()),
                    });
                    cx.token_gap(
                        TpmState::KEY,
                        &ts.extra,
                        "TPM options other than version are not modelled; PVE keeps them",
                    );
                }
                None => cx.gap(TpmState::KEY, Some(t), "not a storage volume: not adopted"),
            },
            Err(err) => cx.gap(
                TpmState::KEY,
                Some(t),
                format!("unreadable ({err}): not adopted"),
            ),
        }
    }

    // Host PCI.
    let pci: Vec<(u32, String, String)> = cx
        .cfg
        .slots("hostpci")
        .into_iter()
        .map(|(n, k, v)| (n, k.to_owned(), v.to_owned()))
        .collect();
    for (n, key, v) in pci {
        cx.consume(&key);
        match HostPci::parse(&v) {
            Ok(HostPci { device: WirePci::Host(bdfs), pcie, extra }) if bdfs.len() == 1 && n <= 999 => {
                hw.pci_devices.push(PciDevice { slot: PciSlot(n as u16), device: bdfs[0].as_str().to_owned(), pcie });
                cx.token_gap(&key, &extra, "passthrough options (x-vga, rombar, mdev, …) are not modelled; PVE keeps them");
            }
            Ok(_) => cx.gap(&key, Some(&v), "a mapped or multi-function device is not modelled: left to PVE (plans show it as a live-only slot)"),
            Err(e) => cx.gap(&key, Some(&v), format!("unreadable ({e}): left to PVE")),
        }
    }

    // NICs; MACs are PVE's and never pinned.
    let mut networks = Vec::new();
    let nets: Vec<(String, String)> = cx
        .cfg
        .slots("net")
        .into_iter()
        .map(|(_, k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for (key, v) in nets {
        cx.consume(&key);
        let n = match QemuNet::parse(&v) {
            Ok(n) => n,
            Err(e) => {
                cx.gap(&key, Some(&v), format!("unreadable ({e}): not adopted"));
                continue;
            }
        };
        let Some(bridge) = n.bridge.clone() else {
            cx.gap(&key, Some(&v), "a NIC without a bridge is not modelled: left to PVE (plans show it as a live-only slot)");
            continue;
        };
        let index = networks.len();
        let rate = n
            .rate
            .as_deref()
            .and_then(|r| r.parse::<f64>().ok())
            .filter(|r| *r > 0.0);
        networks.push(VmNic {
            model: Some(n.model.clone()),
            bridge,
            mac: None,
            vlan: n.tag.map(u32::from),
            rate_limit: rate,
            firewall: (n.firewall == Some(true)).then_some(true),
            slot: (key != format!("net{index}")).then(|| key.clone()),
        });
        cx.token_gap(&key, &n.extra, "NIC options other than model, bridge, tag, rate and firewall (mtu, queues, link_down, trunks) are not modelled; PVE keeps them");
    }

    // Options: booleans are owned only when on.
    for (key, slot) in [
        ("onboot", &mut opts.onboot),
        ("protection", &mut opts.protection),
    ] {
        if let Some(v) = cx.take(key) {
            match wire::parse_bool(v) {
                Ok(true) => *slot = Some(true),
                Ok(false) => {}
                Err(_) => cx.gap(key, Some(v), "unreadable flag: not adopted"),
            }
        }
    }
    for (key, slot) in [("acpi", &mut opts.acpi), ("tablet", &mut opts.tablet)] {
        if let Some(v) = cx.take(key) {
            match wire::parse_bool(v) {
                Ok(true) => *slot = Some(true),
                Ok(false) => cx.gap(
                    key,
                    Some(v),
                    "switched off on PVE: ProxOps owns this option only when on; PVE keeps it off",
                ),
                Err(_) => cx.gap(key, Some(v), "unreadable flag: not adopted"),
            }
        }
    }
    if let Some(v) = cx.take("agent") {
        match Agent::parse(v) {
            Ok(a) => {
                if a.enabled {
                    opts.agent = Some(true);
                }
                cx.token_gap("agent", &a.extra, "guest-agent options (fstrim_cloned_disks, type) are not modelled; PVE keeps them");
            }
            Err(_) => cx.gap("agent", Some(v), "unreadable: not adopted"),
        }
    }
    if let Some(s) = cx.take("startup") {
        if s.trim().is_empty() {
            cx.gap("startup", Some(s), "empty: not adopted");
        } else {
            opts.startup = Some(s.to_owned());
        }
    }
    if let Some(h) = cx.take("hotplug") {
        let items: Vec<String> = match h.trim() {
            "1" => vec!["network".into(), "disk".into(), "usb".into()],
            "0" => Vec::new(),
            s => s
                .split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(str::to_owned)
                .collect(),
        };
        let known = ["network", "disk", "cpu", "memory", "usb", "cloudinit"];
        if items.is_empty() || items.iter().any(|i| !known.contains(&i.as_str())) {
            cx.gap(
                "hotplug",
                Some(h),
                "this hotplug setting cannot be declared (none, or an unknown item): PVE keeps it",
            );
        } else {
            opts.hotplug = items;
        }
    }
    if let Some(b) = cx.take("boot") {
        match Boot::parse(b) {
            Ok(Boot::Order(o)) => {
                let mut seen = std::collections::BTreeSet::new();
                if o.iter().all(|x| seen.insert(x.clone())) {
                    opts.boot_order = o;
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

    // Cloud-init data.
    let mut ci = CloudInitData::default();
    if let Some(u) = cx.take("ciuser")
        && !u.trim().is_empty()
    {
        ci.ci_user = Some(u.to_owned());
    }
    if let Some(k) = cx.take("sshkeys") {
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
                    Some(r) => ci.ssh_key_refs = r,
                    None => ci.ssh_keys = vec!["*".into()],
                }
            }
            Ok(_) => {}
            Err(_) => cx.gap("sshkeys", Some(k), "unreadable keys: left to PVE"),
        }
    }
    if let Some(p) = cx.take("cipassword") {
        cx.cipassword = true;
        cx.gap("cipassword", Some(p), super::key_note("cipassword"));
    }
    for key in ["cicustom", "ciupgrade"] {
        if let Some(v) = cx.take(key) {
            cx.gap(key, Some(v), super::key_note(key));
        }
    }
    if let Some(ns) = cx.take("nameserver") {
        match DnsList::parse(ns) {
            Ok(l)
                if !l.entries.is_empty()
                    && l.entries
                        .iter()
                        .all(|e| e.parse::<core::net::IpAddr>().is_ok()) =>
            {
                ci.nameservers = l.entries
            }
            _ => cx.gap(
                "nameserver",
                Some(ns),
                "not a list of IP addresses: left to PVE",
            ),
        }
    }
    if let Some(sd) = cx.take("searchdomain") {
        match DnsList::parse(sd) {
            Ok(l) if !l.entries.is_empty() => ci.search_domains = l.entries,
            _ => cx.gap("searchdomain", Some(sd), "unreadable: left to PVE"),
        }
    }
    let ipcs: Vec<(u32, String, String)> = cx
        .cfg
        .slots("ipconfig")
        .into_iter()
        .map(|(n, k, v)| (n, k.to_owned(), v.to_owned()))
        .collect();
    for (n, key, v) in ipcs {
        cx.consume(&key);
        let p = PropertyString::parse(&v).unwrap_or_default();
        match p.get("ip") {
            Some(ip) if manifest::check_cidr(ip) && n <= 31 => {
                let gw = p.get("gw").map(str::to_owned);
                if gw.as_deref().is_some_and(|g| g.parse::<core::net::IpAddr>().is_err()) {
                    cx.gap(&key, Some(&v), "unreadable gateway: left to PVE");
                    continue;
                }
                ci.ipconfigs.push(IpConfig { nic: n, ip: ip.to_owned(), gateway: gw });
                let rest: Vec<PropToken> = p
                    .into_tokens()
                    .into_iter()
                    .filter(|t| !matches!(t, PropToken::Pair { key, .. } if key == "ip" || key == "gw"))
                    .collect();
                cx.token_gap(&key, &rest, "IPv6 settings (ip6, gw6) are not modelled; PVE keeps them");
            }
            _ => cx.gap(&key, Some(&v), "only a static IPv4/IPv6 address (ip=<cidr>) is modelled; DHCP and IPv6-only settings stay PVE's"),
        }
    }
    let cloud_init_data = (ci != CloudInitData::default()).then_some(ci);

    let pve_description = cx.take("description").map(str::to_owned);
    let tags = cx.tags();

    let hardware = (hw != VmHardware::default()).then_some(hw);
    let options = (opts != VmOptions::default()).then_some(opts);
    VmSpec {
        node: cx.guest.node.clone(),
        vmid: cx.guest.vmid,
        state,
        memory: Quantity::from_bytes(memory * MIB),
        cpu: VmCpu {
            cpu_type,
            cores,
            flags: Vec::new(),
        },
        disks,
        networks,
        hardware,
        options,
        cloud_init_data,
        pve_name,
        pve_description,
        tags,
        extra: Default::default(),
        clone: None,
    }
}
