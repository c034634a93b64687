//! `hostpciN`: PCI passthrough by host address. Unowned tokens (`x-vga`,
//! `rombar`, …) ride along on the live form; a live-only device is never
//! removed.

use std::collections::BTreeSet;

use crate::change::AnomalyType;
use crate::inverse::GuestCx;
use proxops_model::live::LiveConfig;
use proxops_model::manifest::{self, PciSlot, VmSpec};
use proxops_model::wire::{Bdf, HostPci, PciDevice};

use super::owned::{Family, Input};
use super::qemu::{STOP, hardware};
use super::{Acc, DriftError};

pub(crate) const HOSTPCI: Family<VmSpec> = Family {
    keys: "hostpciN",
    field: "spec.hardware.pci-devices",
    create: |i, _, p| {
        for (n, dev) in hardware(i.spec).pci_devices.iter().enumerate() {
            p.push(
                format!("hostpci{}", dev.slot.0),
                hostpci(i, dev, n)?.to_wire(),
            );
        }
        Ok(())
    },
    drift: pci_drift,
    adopt: adopt_pci,
};

fn hostpci(
    i: &Input<'_, VmSpec>,
    p: &manifest::PciDevice,
    index: usize,
) -> Result<HostPci, DriftError> {
    let bdf = Bdf::parse(&p.device).map_err(|e| {
        i.unsupported(
            format!("spec.hardware.pci-devices[{index}].device"),
            e.to_string(),
        )
    })?;
    Ok(HostPci {
        device: PciDevice::Host(vec![bdf]),
        pcie: p.pcie,
        extra: Vec::new(),
    })
}

/// The same device whatever the spelling: `00:17.0` = `0000:00:17.0`.
fn bdf_key(b: &Bdf) -> String {
    let s = b.as_str();
    let main = s.split('.').next().unwrap_or(s);
    let mut out = if main.matches(':').count() == 1 {
        format!("0000:{s}")
    } else {
        s.to_owned()
    };
    if !out.contains('.') {
        out.push_str(".*");
    }
    out
}

fn pci_drift(i: &Input<'_, VmSpec>, cfg: &LiveConfig, acc: &mut Acc) -> Result<(), DriftError> {
    let mut owned = BTreeSet::new();
    for (n, p) in hardware(i.spec).pci_devices.iter().enumerate() {
        let key = format!("hostpci{}", p.slot.0);
        owned.insert(key.clone());
        let want = hostpci(i, p, n)?;
        hostpci_drift(acc, cfg, &key, want);
    }
    for (_, key, _) in cfg.slots("hostpci") {
        if !owned.contains(key) {
            acc.anomaly(AnomalyType::LiveOnlySlot, Some(key), format!("{key} is on PVE but not in the manifest: ProxOps never removes a passthrough device; declare it or remove it by hand"));
        }
    }
    Ok(())
}

fn hostpci_drift(acc: &mut Acc, cfg: &LiveConfig, key: &str, want: HostPci) {
    let Some(live) = cfg.get(key) else {
        acc.set_plain(key, None, want.to_wire(), STOP);
        return;
    };
    let Ok(lp) = HostPci::parse(live) else {
        acc.set_plain(key, Some(live), want.to_wire(), STOP);
        return;
    };
    let same_dev = match (&lp.device, &want.device) {
        (PciDevice::Host(l), PciDevice::Host(w)) => {
            l.iter().map(bdf_key).collect::<Vec<_>>() == w.iter().map(bdf_key).collect::<Vec<_>>()
        }
        _ => false,
    };
    let same_pcie = want.pcie.is_none_or(|w| lp.pcie.unwrap_or(false) == w);
    if !(same_dev && same_pcie) {
        // Unowned live tokens (x-vga, rombar, …) ride along verbatim.
        let next = HostPci {
            device: want.device,
            pcie: want.pcie.or(lp.pcie),
            extra: lp.extra,
        };
        acc.set_plain(key, Some(live), next.to_wire(), STOP);
    }
}

fn adopt_pci(cx: &mut GuestCx<'_>, vm: &mut VmSpec) -> bool {
    for (n, key, v) in cx.take_slots("hostpci") {
        match HostPci::parse(&v) {
            Ok(HostPci { device: PciDevice::Host(bdfs), pcie, extra }) if bdfs.len() == 1 && n <= 999 => {
                crate::inverse::section(&mut vm.hardware).pci_devices.push(manifest::PciDevice { slot: PciSlot(n as u16), device: bdfs[0].as_str().to_owned(), pcie });
                cx.token_gap(&key, &extra, "passthrough options (x-vga, rombar, mdev, …) are not modelled; PVE keeps them");
            }
            Ok(_) => cx.gap(&key, Some(&v), "a mapped or multi-function device is not modelled: left to PVE (plans show it as a live-only slot)"),
            Err(e) => cx.gap(&key, Some(&v), format!("unreadable ({e}): left to PVE")),
        }
    }
    true
}
