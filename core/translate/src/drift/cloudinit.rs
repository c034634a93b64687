//! Cloud-init data slots and the clone identity rule (spec §6.7.2, §6.8):
//! `ipconfigN` (the owned `ip`/`gw` over the live value, `ip6` kept) and
//! the clearing of identity keys a clone inherited from its template.

use std::collections::BTreeSet;

use crate::change::ParamValue;
use crate::inverse::GuestCx;

use proxops_model::manifest::{self, IpConfig, VmSpec};
use proxops_model::wire::{PropToken, PropertyString};

use super::owned::Family;
use super::qemu::REBOOT;

pub(crate) const IPCONFIGS: Family<VmSpec> = Family {
    keys: "ipconfigN",
    field: "spec.cloud-init-data.ipconfigs",
    create: |i, _, p| {
        for (key, v) in ipconfigs(i.spec) {
            p.push(key, v);
        }
        Ok(())
    },
    drift: |i, cfg, acc| {
        for (key, want) in ipconfigs(i.spec) {
            let live = cfg.get(&key);
            if !ipconfig_same(live, &want) {
                let v = ParamValue::Plain(ipconfig_live_form(live, &want));
                acc.set(&key, live, v, REBOOT);
            }
        }
        Ok(())
    },
    adopt: adopt_ipconfigs,
};

/// §6.8: identity inherited from the template is cleared unless declared.
/// `cipassword` is the exception after the clone step: it cannot be told
/// apart from one set by an operator, and deleting it can lock a person out
/// of a running guest (§22.5). The clone step's own `delete=` list is
/// `drift::clone_params`'.
pub(crate) const CLONE_IDENTITY: Family<VmSpec> = Family {
    keys: "ciuser, sshkeys, nameserver, searchdomain, cicustom, ipconfigN (clone)",
    field: "spec.clone",
    create: |_, _, _| Ok(()),
    drift: |i, cfg, acc| {
        if i.spec.clone.is_some() {
            let declared = declared_identity(i.spec);
            let keys: Vec<String> = cfg
                .values
                .keys()
                .filter(|k| is_identity_key(k) && *k != "cipassword" && !declared.contains(*k))
                .map(str::to_owned)
                .collect();
            for k in keys {
                acc.delete(&k, cfg.get(&k), REBOOT);
            }
        }
        Ok(())
    },
    adopt: |_, _| true,
};

/// `ipconfigN=ip=<cidr>[,gw=<ip>]`, by NIC number.
fn ipconfigs(vm: &VmSpec) -> Vec<(String, String)> {
    let Some(ci) = &vm.cloud_init_data else {
        return Vec::new();
    };
    let mut ips: Vec<_> = ci.ipconfigs.iter().collect();
    ips.sort_by_key(|i| i.nic);
    ips.into_iter()
        .map(|ip| {
            let mut v = format!("ip={}", ip.ip);
            if let Some(gw) = &ip.gateway {
                v.push_str(&format!(",gw={gw}"));
            }
            (format!("ipconfig{}", ip.nic), v)
        })
        .collect()
}

/// Identity keys a clone-backed VM declares (so they are not cleared).
pub(crate) fn declared_identity(vm: &VmSpec) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Some(ci) = &vm.cloud_init_data {
        if ci.ci_user.as_ref().is_some_and(|u| !u.trim().is_empty()) {
            out.insert("ciuser".to_owned());
        }
        if !ci.ssh_keys.is_empty() || !ci.ssh_key_refs.is_empty() {
            out.insert("sshkeys".to_owned());
        }
        if ci.ci_password_ref.is_some() {
            out.insert("cipassword".to_owned());
        }
        if !ci.nameservers.is_empty() {
            out.insert("nameserver".to_owned());
        }
        if !ci.search_domains.is_empty() {
            out.insert("searchdomain".to_owned());
        }
        for ip in &ci.ipconfigs {
            out.insert(format!("ipconfig{}", ip.nic));
        }
    }
    out.extend(vm.extra.keys().cloned());
    out
}

pub(super) fn is_identity_key(k: &str) -> bool {
    super::CLONE_IDENTITY_KEYS.contains(&k)
        || k.strip_prefix("ipconfig")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn ipconfig_same(live: Option<&str>, want: &str) -> bool {
    let (Some(l), Ok(w)) = (
        live.and_then(|l| PropertyString::parse(l).ok()),
        PropertyString::parse(want),
    ) else {
        return false;
    };
    l.get("ip") == w.get("ip") && (w.get("gw").is_none() || l.get("gw") == w.get("gw"))
}

/// The live `ipconfigN` with the owned `ip`/`gw` set (`ip6=` kept).
fn ipconfig_live_form(live: Option<&str>, want: &str) -> String {
    let (Some(mut l), Ok(w)) = (
        live.and_then(|l| PropertyString::parse(l).ok()),
        PropertyString::parse(want),
    ) else {
        return want.to_owned();
    };
    for k in ["ip", "gw"] {
        if let Some(v) = w.get(k) {
            l.set(k, v);
        }
    }
    l.to_wire()
}

fn adopt_ipconfigs(cx: &mut GuestCx<'_>, vm: &mut VmSpec) -> bool {
    for (n, key, v) in cx.take_slots("ipconfig") {
        let p = PropertyString::parse(&v).unwrap_or_default();
        match p.get("ip") {
            Some(ip) if (ip == "dhcp" || manifest::check_cidr(ip)) && n <= 31 => {
                let gw = p.get("gw").map(str::to_owned);
                if gw
                    .as_deref()
                    .is_some_and(|g| g.parse::<core::net::IpAddr>().is_err())
                {
                    cx.gap(&key, Some(&v), "unreadable gateway: left to PVE");
                    continue;
                }
                crate::inverse::section(&mut vm.cloud_init_data)
                    .ipconfigs
                    .push(IpConfig {
                        nic: n,
                        ip: ip.to_owned(),
                        gateway: gw,
                    });
                let rest: Vec<PropToken> = p
                    .into_tokens()
                    .into_iter()
                    .filter(
                        |t| !matches!(t, PropToken::Pair { key, .. } if key == "ip" || key == "gw"),
                    )
                    .collect();
                cx.token_gap(
                    &key,
                    &rest,
                    "IPv6 settings (ip6, gw6) are not modelled; PVE keeps them",
                );
            }
            _ => cx.gap(
                &key,
                Some(&v),
                "only an address (ip=<cidr>) or ip=dhcp is modelled; IPv6-only settings stay PVE's",
            ),
        }
    }
    true
}
