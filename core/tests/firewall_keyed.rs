//! IP set entries and aliases: addresses kept as PVE keeps them, and the
//! calls that turn a live set into the desired one, applied to a model of
//! pve-firewall's `src/PVE/API2/Firewall/IPSet.pm` handlers.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use proxops_core::firewall::grammar::{stored_alias_cidr, stored_ipset_cidr};
use proxops_core::firewall::live::LiveEntry;
use proxops_core::firewall::spec::{IpSetSpec, check_ipset};
use proxops_core::firewall_plan::keyed::{EntryCall, entry_calls};
use proxops_core::firewall_plan::list::Check;

#[test]
fn addresses_are_kept_as_pve_keeps_them() {
    // create_ip: clean_cidr clears host bits and compresses, then
    // parse_ip_or_cidr drops /32 and /128; a bare address stays as written.
    for (given, stored) in [
        ("192.168.1.155/24", "192.168.1.0/24"),
        ("10.0.0.1/32", "10.0.0.1"),
        ("fd00:0:0::1/128", "fd00::1"),
        ("fd00:0::5/64", "fd00::/64"),
        ("fd00:0::5", "fd00:0::5"),
        ("dc/lan", "dc/lan"),
    ] {
        assert_eq!(stored_ipset_cidr(given), stored, "{given}");
    }
    // parse_alias keeps an alias's address, less a /32 or /128.
    assert_eq!(stored_alias_cidr("10.1.2.3/32"), "10.1.2.3");
    assert_eq!(stored_alias_cidr("10.1.2.0/24"), "10.1.2.0/24");
    // "a zero prefix is not allowed in ipset entries"; two entries PVE
    // stores alike are one.
    let set: IpSetSpec = serde_yaml::from_str(
        "entries: [{cidr: 0.0.0.0/0}, {cidr: 10.0.0.0/8}, {cidr: 10.9.9.9/8}]",
    )
    .unwrap();
    let errors: Vec<String> = check_ipset("any", &set, "spec")
        .iter()
        .map(|e| format!("{}: {}", e.path, e.message))
        .collect();
    assert_eq!(
        errors,
        [
            "spec.entries[0].cidr: a zero prefix is not allowed in ipset entries",
            "spec.entries[2].cidr: '10.9.9.9/8' is already in the set",
        ]
    );
}

/// An IP set as IPSet.pm keeps it, with a digest of the whole list.
struct Set {
    entries: Vec<LiveEntry>,
}

impl Set {
    fn digest(&self) -> String {
        format!("{:?}", self.entries)
    }

    fn sorted(&self) -> BTreeMap<String, LiveEntry> {
        self.entries
            .iter()
            .map(|e| (e.name.clone(), e.clone()))
            .collect()
    }

    fn request(&mut self, call: &EntryCall, digest: Option<&str>) -> Result<(), String> {
        let form: BTreeMap<&str, String> = call.form(false).into_iter().collect();
        if !matches!(call, EntryCall::Create(_)) && digest != Some(self.digest().as_str()) {
            return Err("detected modified configuration".into());
        }
        match call {
            EntryCall::Create(_) => {
                // register_create_ip: refuses a present address; unshift.
                let cidr = stored_ipset_cidr(&form["cidr"]);
                if self.entries.iter().any(|e| e.name == cidr) {
                    return Err(format!("address '{cidr}' already exists"));
                }
                self.entries.insert(
                    0,
                    LiveEntry {
                        name: cidr.clone(),
                        cidr: Some(cidr),
                        nomatch: form.get("nomatch").is_some_and(|n| n == "1"),
                        comment: form.get("comment").cloned(),
                    },
                );
            }
            EntryCall::Update { was, .. } => {
                // update_ip: nomatch and comment replaced by what is sent.
                let e = self
                    .entries
                    .iter_mut()
                    .find(|e| e.name == was.name)
                    .ok_or("no such IP/Network")?;
                e.nomatch = form.get("nomatch").is_some_and(|n| n == "1");
                e.comment = form.get("comment").cloned();
            }
            EntryCall::Delete(e) => self.entries.retain(|o| o.name != e.name),
        }
        Ok(())
    }
}

fn entry(i: usize, nomatch: bool, comment: bool) -> LiveEntry {
    let cidr = [
        "10.0.0.0/8",
        "192.0.2.7",
        "fd00::/64",
        "dc/lan",
        "198.51.100.0/24",
    ][i];
    LiveEntry {
        name: cidr.to_string(),
        cidr: Some(cidr.to_string()),
        nomatch,
        comment: comment.then(|| format!("entry {i}")),
    }
}

fn set_of() -> impl Strategy<Value = Vec<LiveEntry>> {
    prop::collection::btree_map(0..5usize, (any::<bool>(), any::<bool>()), 0..5)
        .prop_map(|m| m.into_iter().map(|(i, (n, c))| entry(i, n, c)).collect())
}

proptest! {
    /// Any live set becomes the desired one, every call with a digest
    /// that holds or after a read that finds what it expects, in no more
    /// calls than entries on both sides.
    #[test]
    fn the_calls_reach_the_desired_set(live in set_of(), desired in set_of()) {
        let mut pve = Set { entries: live.clone() };
        let steps = entry_calls(&live, &desired, &pve.digest());
        prop_assert!(steps.len() <= live.len() + desired.len());
        for step in &steps {
            let digest = match &step.check {
                Check::Digest(d) => d.clone(),
                Check::ReadBack => {
                    let expect: BTreeMap<String, LiveEntry> =
                        step.expect.iter().map(|e| (e.name.clone(), e.clone())).collect();
                    prop_assert_eq!(&pve.sorted(), &expect);
                    pve.digest()
                }
            };
            pve.request(&step.call, Some(&digest)).unwrap();
        }
        let want: BTreeMap<String, LiveEntry> = desired.iter().map(|e| (e.name.clone(), e.clone())).collect();
        prop_assert_eq!(pve.sorted(), want);
        // Converged: nothing more to do.
        prop_assert!(entry_calls(&pve.entries, &desired, "d").is_empty());
    }
}

#[test]
fn an_alias_update_sends_its_address_and_comment() {
    // update_alias replaces the entry with name, cidr and comment sent.
    let was = LiveEntry {
        name: "lan".into(),
        cidr: Some("10.0.0.0/8".into()),
        nomatch: false,
        comment: Some("old".into()),
    };
    let now = LiveEntry {
        cidr: Some("10.0.0.0/16".into()),
        comment: None,
        ..was.clone()
    };
    let steps = entry_calls(std::slice::from_ref(&was), std::slice::from_ref(&now), "d0");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].check, Check::Digest("d0".into()));
    assert_eq!(
        steps[0].call.form(true),
        [("cidr", "10.0.0.0/16".to_string())]
    );
    // Names compare ignoring case (Aliases.pm keys them by lc).
    let upper = LiveEntry {
        name: "LAN".into(),
        ..was.clone()
    };
    assert!(entry_calls(&[was], &[upper], "d0").is_empty());
}
