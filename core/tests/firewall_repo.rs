//! The firewall's manifests across one cluster's composition: one
//! ClusterFirewall, each alias, IP set and group named once as PVE names
//! it, every object a rule or an IP set entry names held by the
//! repository (PVE's words at the naming field), and a group ordered
//! before the rule lists that include it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proxops_core::config::Overrides;
use proxops_core::names::{ClusterName, Kind, Ref, ResourceName};
use proxops_core::repo::{self, Loaded, RepoInput};

fn doc(kind: &str, name: &str, spec: &str) -> String {
    format!("apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}")
}

fn alias(name: &str, spec_name: Option<&str>) -> String {
    let n = spec_name
        .map(|n| format!("  name: {n}\n"))
        .unwrap_or_default();
    doc("FirewallAlias", name, &format!("{n}  cidr: 10.20.0.0/16\n"))
}

fn ipset(name: &str, spec_name: Option<&str>, entries: &str) -> String {
    let n = spec_name
        .map(|n| format!("  name: {n}\n"))
        .unwrap_or_default();
    doc("FirewallIPSet", name, &format!("{n}  entries:\n{entries}"))
}

fn group(name: &str, rules: &str) -> String {
    doc("SecurityGroup", name, &format!("  rules:\n{rules}"))
}

fn cluster_fw(name: &str, rules: &str) -> String {
    doc("ClusterFirewall", name, &format!("  rules:\n{rules}"))
}

fn vm(firewall: &str) -> String {
    doc(
        "VM",
        "web",
        &format!(
            "  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n  firewall:\n{firewall}"
        ),
    )
}

/// Loads cluster `t` listing `manifests` (path under the repository,
/// text), in order.
fn load(manifests: &[(&str, String)]) -> Loaded {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "clusters/t/config.yaml".into(),
        b"pve:\n  clusters:\n    t:\n      base-url: https://pve.example.org:8006\n".to_vec(),
    );
    let mut listing = String::from("resources:\n");
    for (path, text) in manifests {
        listing.push_str(&format!("  - ../../{path}\n"));
        files.insert((*path).into(), text.as_bytes().to_vec());
    }
    files.insert("clusters/t/resources.yaml".into(), listing.into_bytes());
    let dirs: BTreeSet<String> = ["t".to_owned()].into();
    repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    )
    .expect("configuration loads")
}

fn errors(l: &Loaded) -> Vec<String> {
    l.diagnostics().iter().map(|d| d.to_string()).collect()
}

/// The repository every test starts from: an alias, an IP set naming it,
/// a group naming the set, the cluster's rules and a guest naming all.
fn base() -> Vec<(&'static str, String)> {
    vec![
        ("firewallalias/t/mgmt.yaml", alias("mgmt", None)),
        (
            "firewallipset/t/admins.yaml",
            ipset(
                "admins",
                None,
                "    - {cidr: 10.20.1.0/24}\n    - {cidr: dc/mgmt}\n",
            ),
        ),
        (
            "securitygroup/t/webservers.yaml",
            group(
                "webservers",
                "    - {type: in, action: ACCEPT, source: +dc/admins, proto: tcp, dport: 22}\n",
            ),
        ),
        (
            "clusterfirewall/t/t.yaml",
            cluster_fw(
                "t",
                "    - {type: in, action: ACCEPT, source: MGMT, macro: SSH}\n    - {type: group, action: webservers}\n",
            ),
        ),
        (
            "vm/t/web.yaml",
            vm(concat!(
                "    rules:\n",
                "      - {type: group, action: webservers}\n",
                "      - {type: in, action: ACCEPT, source: +sdn/vnet1-all, macro: HTTPS}\n",
                "      - {type: out, action: ACCEPT, dest: guest/backup, proto: tcp, dport: 873}\n",
                "      - {type: in, action: ACCEPT, source: +own, macro: SSH}\n",
                "    aliases:\n",
                "      - {name: backup, cidr: 192.0.2.10}\n",
                "    ipsets:\n",
                "      - name: own\n",
                "        entries: [{cidr: backup}, {cidr: dc/mgmt}]\n",
            )),
        ),
    ]
}

fn with(path: &'static str, text: String) -> Vec<(&'static str, String)> {
    let mut files = base();
    match files.iter_mut().find(|(p, _)| *p == path) {
        Some(f) => f.1 = text,
        None => files.push((path, text)),
    }
    files
}

fn r(kind: Kind, name: &str) -> Ref {
    Ref {
        kind,
        name: ResourceName::new(name).unwrap(),
    }
}

#[test]
fn a_repository_holding_every_named_object_validates_and_orders_them() {
    let l = load(&base());
    assert!(errors(&l).is_empty(), "{:?}", errors(&l));
    let t = l.clusters[&ClusterName::new("t").unwrap()]
        .as_ref()
        .unwrap();
    let deps = |k, n| t.objects[&r(k, n)].deps.clone();
    assert!(deps(Kind::VM, "web").contains(&r(Kind::SecurityGroup, "webservers")));
    assert!(deps(Kind::VM, "web").contains(&r(Kind::FirewallAlias, "mgmt")));
    assert!(deps(Kind::SecurityGroup, "webservers").contains(&r(Kind::FirewallIPSet, "admins")));
    assert!(deps(Kind::FirewallIPSet, "admins").contains(&r(Kind::FirewallAlias, "mgmt")));
    assert!(
        t.objects[&r(Kind::SecurityGroup, "webservers")].level
            < t.objects[&r(Kind::VM, "web")].level
    );
}

#[test]
fn a_group_no_manifest_declares_is_refused_at_the_rule_in_pves_words() {
    let l = load(&with(
        "clusterfirewall/t/t.yaml",
        cluster_fw("t", "    - {type: group, action: webserver}\n"),
    ));
    assert_eq!(
        errors(&l),
        ["clusterfirewall/t/t.yaml:7:21: spec.rules[0].action: no such security group 'webserver'"]
    );
}

#[test]
fn an_ipset_is_named_as_pve_keeps_it_lower_case() {
    let l = load(&with(
        "securitygroup/t/webservers.yaml",
        group(
            "webservers",
            "    - {type: in, action: ACCEPT, source: +dc/Admins, macro: SSH}\n    - {type: in, action: ACCEPT, dest: +nosuch, macro: SSH}\n",
        ),
    ));
    assert_eq!(
        errors(&l),
        [
            "securitygroup/t/webservers.yaml:7:34: spec.rules[0].source: no such ipset 'Admins'",
            "securitygroup/t/webservers.yaml:8:34: spec.rules[1].dest: no such ipset 'nosuch'",
        ]
    );
}

#[test]
fn an_alias_an_ipset_entry_names_must_exist() {
    let l = load(&with(
        "firewallipset/t/admins.yaml",
        ipset("admins", None, "    - {cidr: dc/vpn}\n    - {cidr: Mgmt}\n"),
    ));
    assert_eq!(
        errors(&l),
        ["firewallipset/t/admins.yaml:7:8: spec.entries[0].cidr: no such alias 'dc/vpn'"]
    );
}

#[test]
fn a_guest_scoped_reference_names_the_guests_own_objects_only() {
    let l = load(&with(
        "vm/t/web.yaml",
        vm(concat!(
            "    rules:\n",
            "      - {type: in, action: ACCEPT, source: guest/mgmt, macro: SSH}\n",
            "      - {type: in, action: ACCEPT, source: +guest/admins, macro: SSH}\n",
            "    ipsets:\n",
            "      - name: own\n",
            "        entries: [{cidr: guest/mgmt}]\n",
        )),
    ));
    assert_eq!(
        errors(&l),
        [
            "vm/t/web.yaml:19:36: spec.firewall.rules[0].source: no such alias 'guest/mgmt'",
            "vm/t/web.yaml:20:36: spec.firewall.rules[1].source: no such ipset 'admins'",
            "vm/t/web.yaml:23:20: spec.firewall.ipsets[0].entries[0].cidr: no such alias 'guest/mgmt'",
        ]
    );
}

#[test]
fn names_are_unique_per_kind_as_pve_compares_them() {
    let mut files = base();
    files.push(("firewallalias/t/mgmt2.yaml", alias("mgmt2", Some("MGMT"))));
    files.push((
        "firewallipset/t/admins2.yaml",
        ipset("admins2", Some("Admins"), "    - {cidr: 10.0.0.1}\n"),
    ));
    files.push((
        "securitygroup/t/web2.yaml",
        group(
            "webservers2",
            "    - {type: in, action: ACCEPT, macro: SSH}\n",
        )
        .replace("spec:\n", "spec:\n  name: WebServers\n"),
    ));
    // The same name in two kinds is two objects.
    files.push(("firewallalias/t/admins.yaml", alias("admins", None)));
    let l = load(&files);
    assert_eq!(
        errors(&l),
        [
            "firewallalias/t/mgmt2.yaml:6:3: spec.name: alias 'MGMT' is already FirewallAlias/mgmt's: PVE compares alias names ignoring case",
            "firewallipset/t/admins2.yaml:6:3: spec.name: IP set 'Admins' is already FirewallIPSet/admins's: PVE keeps IP set names lower case",
            "securitygroup/t/web2.yaml:6:3: spec.name: security group 'WebServers' is already SecurityGroup/webservers's: PVE keeps security group names lower case",
        ]
    );
}

#[test]
fn a_cluster_has_one_cluster_firewall() {
    let mut files = base();
    files.push((
        "clusterfirewall/t/again.yaml",
        cluster_fw("again", "    - {type: in, action: ACCEPT, macro: SSH}\n"),
    ));
    let l = load(&files);
    assert_eq!(
        errors(&l),
        [
            "clusterfirewall/t/t.yaml:2:1: kind: a second ClusterFirewall: ClusterFirewall/again (clusterfirewall/t/again.yaml) is this cluster's already, and a cluster has one firewall rule list and one set of options"
        ]
    );
}
