//! `netN` of VMs and containers: owned tokens overlaid on the live value (a
//! MAC or hwaddr PVE assigned stays), a live-only NIC never removed, and
//! adoption that never pins a PVE-assigned MAC.

use crate::change::{AnomalyType, Impact};
use crate::inverse::GuestCx;
use proxops_model::live::LiveConfig;
use proxops_model::manifest::{self, LxcNic, LxcSpec, VmNic, VmSpec};
use proxops_model::wire::{LxcNet, MacAddr, PropToken, QemuNet};

use super::owned::{Family, Input};
use super::{Acc, DriftError, rate_text, same_rate};

pub(crate) const QEMU_NETS: Family<VmSpec> = Family {
    keys: "netN",
    field: "spec.networks",
    create: |i, _, p| {
        for (n, nic) in i.spec.networks.iter().enumerate() {
            p.push(
                manifest::vm_nic_slot(nic, n),
                qemu_net(i, nic, n)?.to_wire(),
            );
        }
        Ok(())
    },
    drift: qemu_nets_drift,
    adopt: adopt_qemu_nets,
};

pub(crate) const LXC_NETS: Family<LxcSpec> = Family {
    keys: "netN",
    field: "spec.networks",
    create: |i, _, p| {
        for (n, nic) in i.spec.networks.iter().enumerate() {
            p.push(
                manifest::lxc_nic_slot(nic, n),
                lxc_net(i, nic, n)?.to_wire(),
            );
        }
        Ok(())
    },
    drift: lxc_nets_drift,
    adopt: adopt_lxc_nets,
};

// ------------------------------------------------------------ qemu

fn qemu_net(i: &Input<'_, VmSpec>, nic: &VmNic, index: usize) -> Result<QemuNet, DriftError> {
    let mut n = QemuNet::new(nic.model.as_deref().unwrap_or("virtio"), &nic.bridge);
    if let Some(m) = &nic.mac {
        n.mac =
            Some(MacAddr::parse(m).map_err(|e| {
                i.unsupported(format!("spec.networks[{index}].mac"), e.to_string())
            })?);
    }
    n.tag = nic.vlan.filter(|v| *v > 0).map(|v| v as u16);
    n.rate = nic.rate_limit.filter(|r| *r > 0.0).map(rate_text);
    if nic.firewall == Some(true) {
        n.firewall = Some(true);
    }
    Ok(n)
}

fn qemu_nets_drift(
    i: &Input<'_, VmSpec>,
    cfg: &LiveConfig,
    acc: &mut Acc,
) -> Result<(), DriftError> {
    let mut owned = Vec::with_capacity(i.spec.networks.len());
    for (n, nic) in i.spec.networks.iter().enumerate() {
        let slot = manifest::vm_nic_slot(nic, n);
        let want = qemu_net(i, nic, n)?;
        qemu_net_drift(acc, cfg, &slot, nic, want);
        owned.push(slot);
    }
    // A clone that declares no NIC keeps its template's.
    if !(i.spec.clone.is_some() && i.spec.networks.is_empty()) {
        live_only_nics(acc, cfg, &owned);
    }
    Ok(())
}

/// `owned`: the slots the manifest declares (a guest has a handful).
fn live_only_nics(acc: &mut Acc, cfg: &LiveConfig, owned: &[String]) {
    let is_owned = |key: &str| owned.iter().any(|o| o == key);
    // Nearly every guest has none: look before sorting the slots.
    if cfg.slots_unordered("net").all(|(_, key, _)| is_owned(key)) {
        return;
    }
    for (_, key, _) in cfg.slots("net") {
        if !is_owned(key) {
            acc.anomaly(AnomalyType::LiveOnlySlot, Some(key), format!("{key} is on PVE but not in the manifest: ProxOps never removes a NIC; declare it or remove it by hand"));
        }
    }
}

/// The live value of `slot` parsed, or an anomaly when PVE's value cannot
/// be read (`None` then, and nothing is written).
fn read_live<T, E: std::fmt::Display>(
    acc: &mut Acc,
    slot: &str,
    parsed: Result<T, E>,
) -> Option<T> {
    match parsed {
        Ok(v) => Some(v),
        Err(e) => {
            acc.anomaly(
                AnomalyType::NeedsPerson,
                Some(slot),
                format!("cannot read the live {slot} ({e}): ProxOps does not rewrite it"),
            );
            None
        }
    }
}

fn qemu_net_drift(acc: &mut Acc, cfg: &LiveConfig, slot: &str, n: &VmNic, want: QemuNet) {
    let Some(live) = cfg.get(slot) else {
        acc.set_plain(slot, None, want.to_wire(), Impact::StopStart);
        return;
    };
    let Some(mut next) = read_live(acc, slot, QemuNet::parse(live)) else {
        return;
    };
    // The live NIC becomes the next one in place; what is overlaid is
    // compared as it goes (the live NIC was copied whole for every guest
    // to compare at the end).
    let mut changed = next.model != want.model || next.bridge != want.bridge;
    next.model = want.model;
    next.bridge = want.bridge;
    changed |= overlay_mac(&mut next.mac, want.mac);
    let before = (next.tag, next.rate.clone(), next.firewall);
    overlay_common(
        (&mut next.tag, &mut next.rate, &mut next.firewall),
        (n.vlan, n.rate_limit, n.firewall),
    );
    changed |= (next.tag, &next.rate, next.firewall) != (before.0, &before.1, before.2);
    // A MAC PVE assigned stays: the live form keeps it.
    if changed {
        acc.set_plain(slot, Some(live), next.to_wire(), Impact::StopStart);
    }
}

/// A desired MAC over the live one: a different address is written as the
/// manifest spells it; the same address keeps PVE's spelling, because PVE
/// compares the text and re-creates a container's veth when it changes
/// (pve-container `LXC.pm` `update_net`).
/// Whether it changed the live one.
fn overlay_mac(live: &mut Option<MacAddr>, want: Option<MacAddr>) -> bool {
    if let Some(w) = want
        && live.as_ref() != Some(&w)
    {
        *live = Some(w);
        return true;
    }
    false
}

/// `tag`, `rate` and `firewall`, alike on VM and container NICs, from the
/// manifest's VLAN, rate (MB/s) and firewall over the live tokens in
/// `next`. A field the manifest sets is owned in every state: VLAN `0` is
/// untagged and rate `0` unlimited (the token is removed), `firewall:
/// false` turns the firewall off; an absent field leaves PVE's value. A
/// rate compares as a number.
fn overlay_common(
    next: (&mut Option<u16>, &mut Option<String>, &mut Option<bool>),
    want: (Option<u32>, Option<f64>, Option<bool>),
) {
    let (tag, rate, firewall) = next;
    match want.0 {
        Some(0) => *tag = None,
        Some(v) => *tag = Some(v as u16),
        None => {}
    }
    let live_rate = rate.as_deref().and_then(|l| l.parse::<f64>().ok());
    match want.1 {
        Some(r) if r > 0.0 && !same_rate(rate.as_deref(), r) => *rate = Some(rate_text(r)),
        Some(r) if r <= 0.0 && live_rate.is_some_and(|l| l > 0.0) => *rate = None,
        _ => {}
    }
    match want.2 {
        Some(true) => *firewall = Some(true),
        Some(false) if *firewall == Some(true) => *firewall = None,
        _ => {}
    }
}

/// A positive rate (`0` = unlimited, not owned).
fn adopted_rate(rate: Option<&str>) -> Option<f64> {
    rate.and_then(|r| r.parse::<f64>().ok())
        .filter(|r| *r > 0.0)
}

/// A live NIC that parses and has a bridge, with that bridge; otherwise a
/// gap (`unreadable` says what happens to an unparsable one) and `None`.
fn bridged<T, E: std::fmt::Display>(
    cx: &mut GuestCx<'_>,
    key: &str,
    v: &str,
    parsed: Result<T, E>,
    unreadable: &str,
    bridge: fn(&T) -> Option<String>,
) -> Option<(T, String)> {
    let n = match parsed {
        Ok(n) => n,
        Err(e) => {
            cx.gap(key, Some(v), format!("unreadable ({e}): {unreadable}"));
            return None;
        }
    };
    let Some(b) = bridge(&n) else {
        cx.gap(key, Some(v), "a NIC without a bridge is not modelled: left to PVE (plans show it as a live-only slot)");
        return None;
    };
    Some((n, b))
}

fn adopt_qemu_nets(cx: &mut GuestCx<'_>, vm: &mut VmSpec) -> bool {
    for (_, key, v) in cx.take_slots("net") {
        let Some((n, bridge)) = bridged(cx, &key, &v, QemuNet::parse(&v), "not adopted", |n| {
            n.bridge.clone()
        }) else {
            continue;
        };
        let index = vm.networks.len();
        vm.networks.push(VmNic {
            model: Some(n.model.clone()),
            bridge,
            mac: None,
            vlan: n.tag.map(u32::from),
            rate_limit: adopted_rate(n.rate.as_deref()),
            firewall: (n.firewall == Some(true)).then_some(true),
            slot: (key != format!("net{index}")).then(|| key.clone()),
        });
        cx.token_gap(&key, &n.extra, "NIC options other than model, bridge, tag, rate and firewall (mtu, queues, link_down, trunks) are not modelled; PVE keeps them");
    }
    true
}

// ------------------------------------------------------------ lxc

fn lxc_net(i: &Input<'_, LxcSpec>, n: &LxcNic, index: usize) -> Result<LxcNet, DriftError> {
    let slot = manifest::lxc_nic_slot(n, index);
    let mut v = LxcNet::new(n.iface.as_deref().unwrap_or(&slot));
    v.net_type = n.nic_type.clone();
    v.bridge = Some(n.bridge.clone());
    v.tag = n.tag.filter(|t| *t > 0).map(|t| t as u16);
    if let Some(m) = &n.hwaddr {
        v.hwaddr =
            Some(MacAddr::parse(m).map_err(|e| {
                i.unsupported(format!("spec.networks[{index}].hwaddr"), e.to_string())
            })?);
    }
    v.rate = n.rate_limit.filter(|r| *r > 0.0).map(rate_text);
    if n.firewall == Some(true) {
        v.firewall = Some(true);
    }
    v.ip = n.ip.clone().filter(|s| !s.is_empty());
    v.gw = n.gw.clone().filter(|s| !s.is_empty());
    Ok(v)
}

fn lxc_nets_drift(
    i: &Input<'_, LxcSpec>,
    cfg: &LiveConfig,
    acc: &mut Acc,
) -> Result<(), DriftError> {
    let mut owned = Vec::with_capacity(i.spec.networks.len());
    for (n, nic) in i.spec.networks.iter().enumerate() {
        let slot = manifest::lxc_nic_slot(nic, n);
        let want = lxc_net(i, nic, n)?;
        lxc_net_drift(acc, cfg, &slot, nic, want);
        owned.push(slot);
    }
    live_only_nics(acc, cfg, &owned);
    Ok(())
}

/// PVE re-plugs the veth of a running container: a short link drop, no stop.
fn lxc_net_drift(acc: &mut Acc, cfg: &LiveConfig, slot: &str, n: &LxcNic, want: LxcNet) {
    let Some(live) = cfg.get(slot) else {
        acc.set_plain(slot, None, want.to_wire(), Impact::Live);
        return;
    };
    let Some(ln) = read_live(acc, slot, LxcNet::parse(live)) else {
        return;
    };
    // Owned tokens only; `type` is never compared; an assigned hwaddr stays.
    let mut next = ln.clone();
    if n.iface.is_some() {
        next.name = want.name.clone();
    }
    next.bridge = want.bridge.clone();
    overlay_mac(&mut next.hwaddr, want.hwaddr);
    overlay_common(
        (&mut next.tag, &mut next.rate, &mut next.firewall),
        (n.tag, n.rate_limit, n.firewall),
    );
    if want.ip.is_some() {
        next.ip = want.ip.clone();
    }
    if want.gw.is_some() {
        next.gw = want.gw.clone();
    }
    if next != ln {
        acc.set_plain(slot, Some(live), next.to_wire(), Impact::Live);
    }
}

fn adopt_lxc_nets(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) -> bool {
    for (_, key, v) in cx.take_slots("net") {
        let unreadable = "left to PVE (plans show it as a live-only slot)";
        let Some((n, bridge)) = bridged(cx, &key, &v, LxcNet::parse(&v), unreadable, |n| {
            n.bridge.clone()
        }) else {
            continue;
        };
        let index = ct.networks.len();
        let mut rest = n.extra.clone();
        if let Some(t) = n.net_type.as_ref().filter(|t| *t != "veth") {
            rest.push(PropToken::Pair {
                key: "type".into(),
                value: t.clone(),
            });
        }
        ct.networks.push(LxcNic {
            bridge,
            iface: Some(n.name.clone()),
            nic_type: None,
            tag: n.tag.filter(|t| *t > 0).map(u32::from),
            hwaddr: None,
            rate_limit: adopted_rate(n.rate.as_deref()),
            firewall: (n.firewall == Some(true)).then_some(true),
            ip: n.ip.clone().filter(|s| !s.is_empty()),
            gw: n.gw.clone().filter(|s| !s.is_empty()),
            slot: (key != format!("net{index}")).then(|| key.clone()),
        });
        cx.token_gap(&key, &rest, "NIC options other than name, bridge, tag, rate, firewall, ip and gw (ip6, gw6, mtu, …) are not modelled; PVE keeps them");
    }
    true
}
