//! The lock-out guard: an enabled cluster firewall that drops incoming
//! traffic by default must keep a rule admitting tcp 8006 and 22.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proxops_core::firewall::Rule;
use proxops_core::firewall::spec::Policy;
use proxops_core::firewall_plan::lockout::{ClusterFirewall, Lockout, lockout};

fn rules(lines: &[&str]) -> Vec<Rule> {
    lines.iter().map(|l| Rule::parse_line(l).unwrap()).collect()
}

/// The ports left unadmitted by `lines` under an enabled firewall with
/// `policy`, with `groups` by name.
fn unadmitted(policy: Policy, lines: &[&str], groups: &[(&str, &[&str])]) -> Vec<u16> {
    let rules = rules(lines);
    let groups: BTreeMap<String, Vec<Rule>> = groups
        .iter()
        .map(|(n, g)| ((*n).to_string(), self::rules(g)))
        .collect();
    let fw = ClusterFirewall {
        enable: true,
        policy_in: policy,
        rules: &rules,
        groups: &groups,
    };
    lockout(&fw).map(|l| l.ports).unwrap_or_default()
}

#[test]
fn enabling_with_drop_and_no_management_rule_is_refused() {
    assert_eq!(unadmitted(Policy::Drop, &[], &[]), [8006, 22]);
    // Rules that admit other ports, other protocols, or drop.
    let other = [
        "IN ACCEPT -p tcp -dport 80,443",
        "IN ACCEPT -p udp -dport 22",
        "IN DROP -p tcp -dport 22",
        "OUT ACCEPT -p tcp -dport 8006",
        "|IN ACCEPT -p tcp -dport 22,8006",
        "IN ACCEPT -p tcp -sport 22 -dport 8006",
        "IN HTTPS(ACCEPT)",
    ];
    assert_eq!(unadmitted(Policy::Drop, &other, &[]), [8006, 22]);
    // REJECT cuts off as surely as DROP.
    assert_eq!(unadmitted(Policy::Reject, &other, &[]), [8006, 22]);
    // One port admitted is not enough: the other is named.
    assert_eq!(
        unadmitted(Policy::Drop, &["IN ACCEPT -p tcp -dport 22"], &[]),
        [8006]
    );
}

#[test]
fn the_refusal_says_what_is_cut_off_and_how_to_proceed() {
    let text = Lockout {
        policy_in: Policy::Drop,
        ports: vec![8006, 22],
    }
    .to_string();
    assert_eq!(
        text,
        "the cluster firewall would be enabled with policy-in DROP and no enabled rule admits tcp \
         8006 (the web interface and API) or tcp 22 (SSH) from anywhere: this plan would lock \
         operators out of the cluster (add a rule that admits it, or set the override in the \
         cluster's configuration)"
    );
}

#[test]
fn safe_firewalls_pass() {
    // Off, or accepting by default: nothing to guard.
    let none: BTreeMap<String, Vec<Rule>> = BTreeMap::new();
    for (enable, policy) in [(false, Policy::Drop), (true, Policy::Accept)] {
        let fw = ClusterFirewall {
            enable,
            policy_in: policy,
            rules: &[],
            groups: &none,
        };
        assert_eq!(lockout(&fw), None);
    }
    for admitting in [
        // A source narrows who, not whether: the operator chose it.
        &["IN ACCEPT -source +dc/mgmt -p tcp -dport 22,8006"][..],
        &[
            "IN ACCEPT -p tcp -dport 8000:8100",
            "IN ACCEPT -p 6 -dport ssh",
        ],
        // All tcp, or all traffic.
        &["IN ACCEPT -p tcp"],
        &["IN ACCEPT -source 10.0.0.0/8"],
    ] {
        assert!(
            unadmitted(Policy::Drop, admitting, &[]).is_empty(),
            "{admitting:?}"
        );
    }
}

#[test]
fn macros_and_security_groups_count() {
    // $pve_fw_macros (Firewall.pm): SSH is tcp 22, PMG tcp 8006.
    assert!(
        unadmitted(
            Policy::Drop,
            &["IN SSH(ACCEPT)", "IN PMG(ACCEPT) -source +mgmt"],
            &[]
        )
        .is_empty()
    );
    assert_eq!(unadmitted(Policy::Drop, &["IN SSH(ACCEPT)"], &[]), [8006]);
    assert_eq!(
        unadmitted(Policy::Drop, &["IN SSH(DROP)", "IN PMG(ACCEPT)"], &[]),
        [22]
    );
    // A group counts through an enabled GROUP rule, with its enabled rules.
    let admins: &[&str] = &["IN SSH(ACCEPT)", "IN ACCEPT -p tcp -dport 8006"];
    assert!(unadmitted(Policy::Drop, &["GROUP admins"], &[("admins", admins)]).is_empty());
    assert_eq!(
        unadmitted(Policy::Drop, &["|GROUP admins"], &[("admins", admins)]),
        [8006, 22]
    );
    assert_eq!(
        unadmitted(Policy::Drop, &[], &[("admins", admins)]),
        [8006, 22]
    );
    let half: &[&str] = &["IN SSH(ACCEPT)", "|IN ACCEPT -p tcp -dport 8006"];
    assert_eq!(
        unadmitted(Policy::Drop, &["GROUP admins"], &[("admins", half)]),
        [8006]
    );
    // A group rule naming a group that does not exist admits nothing.
    assert_eq!(unadmitted(Policy::Drop, &["GROUP ghost"], &[]), [8006, 22]);
}
