//! PVE's firewall answers read as values, and the options compared with a
//! manifest's. Answer shapes are those of pve-firewall's
//! `src/PVE/API2/Firewall/*.pm` (`copy_list_with_digest`,
//! `copy_opject_with_digest` in Firewall.pm).
#![allow(clippy::unwrap_used)]

use proxops_core::firewall::LogLevel;
use proxops_core::firewall::live::{EMPTY_LIST_DIGEST, LiveList, LiveOptions, LiveRules};
use proxops_core::firewall::spec::{ClusterOptions, GuestOptions, LogRateLimit, Policy};
use proxops_core::firewall_options::{changes, cluster_rows, form, guest_rows};
use serde_json::json;

const D: &str = "4f1c2b1e0d6a8f5b9c3e7a2d1f0b6c8e9a7d5f3b";

#[test]
fn a_rule_list_reads_in_position_order_with_its_digest() {
    // register_get_rules: every entry carries the list's digest and its pos.
    let data = json!([
        {"pos": 1, "type": "group", "action": "web", "enable": 1, "digest": D},
        {"pos": 0, "type": "in", "action": "ACCEPT", "enable": 1, "proto": "tcp", "dport": "22",
         "source": "+dc/mgmt", "ipversion": 4, "digest": D},
    ]);
    let live = LiveRules::from_json(&data).unwrap();
    assert_eq!(live.digest, D);
    let lines: Vec<String> = live.rules.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        ["IN ACCEPT -source +dc/mgmt -p tcp -dport 22", "GROUP web"]
    );
    // An empty list has no entry to carry a digest: SHA-1 of nothing.
    assert_eq!(
        LiveRules::from_json(&json!([])).unwrap().digest,
        EMPTY_LIST_DIGEST
    );
}

#[test]
fn a_rule_that_does_not_read_makes_the_list_unreadable() {
    let bad = json!([
        {"pos": 0, "type": "in", "action": "ACCEPT", "enable": 1, "digest": D},
        {"pos": 1, "type": "in", "action": "ACCEPT", "enable": 1, "dport": "22", "digest": D},
    ]);
    assert_eq!(
        LiveRules::from_json(&bad).unwrap_err(),
        "rule 1: proto: missing property - 'dport' requires this property"
    );
    let gap = json!([{"pos": 1, "type": "in", "action": "DROP", "enable": 1, "digest": D}]);
    assert_eq!(
        LiveRules::from_json(&gap).unwrap_err(),
        "no rule at position 0 (next is 1)"
    );
    let mixed = json!([
        {"pos": 0, "type": "in", "action": "DROP", "digest": D},
        {"pos": 1, "type": "in", "action": "DROP", "digest": "other"},
    ]);
    assert!(
        LiveRules::from_json(&mixed)
            .unwrap_err()
            .contains("another digest")
    );
}

#[test]
fn listings_read_their_names_comments_and_nomatch() {
    // IPSet.pm get_ipset: cidr, comment, nomatch (boolean), digest.
    let set = LiveList::from_json(
        &json!([
            {"cidr": "10.0.0.0/8", "digest": D},
            {"cidr": "10.0.0.13", "nomatch": 1, "comment": "kiosk", "digest": D},
        ]),
        "cidr",
    )
    .unwrap();
    assert_eq!(set.digest, D);
    assert_eq!(
        set.entries
            .iter()
            .map(|e| (e.name.as_str(), e.nomatch))
            .collect::<Vec<_>>(),
        [("10.0.0.0/8", false), ("10.0.0.13", true)]
    );
    // Groups.pm list_security_groups: group, comment, digest.
    let groups = LiveList::from_json(
        &json!([{"group": "web", "comment": "web tier [proxops]", "digest": D}]),
        "group",
    )
    .unwrap();
    assert_eq!(
        groups.entries[0].comment.as_deref(),
        Some("web tier [proxops]")
    );
    assert!(LiveList::from_json(&json!([{"cidr": "x"}]), "name").is_err());
}

#[test]
fn only_the_options_a_manifest_sets_are_compared_against_pve_s_defaults() {
    // Cluster.pm get_options: the options set in cluster.fw, and digest.
    let live = LiveOptions::from_json(&json!({"enable": 1, "digest": D})).unwrap();
    let want = ClusterOptions {
        enable: Some(true),
        // Absent in PVE: its default DROP, the same.
        policy_in: Some(Policy::Drop),
        // Absent: ACCEPT, which differs.
        policy_out: Some(Policy::Drop),
        log_ratelimit: Some(LogRateLimit {
            enable: None,
            rate: Some("10/minute".into()),
            burst: None,
        }),
        ..ClusterOptions::default()
    };
    let found = changes(&cluster_rows(&want), &live);
    let shown: Vec<String> = found
        .iter()
        .map(|c| format!("{}: {} -> {}", c.key, c.live, c.want))
        .collect();
    assert_eq!(
        shown,
        [
            "policy_out: ACCEPT -> DROP",
            "log_ratelimit: enable=1,rate=1/second,burst=5 -> enable=1,rate=10/minute,burst=5",
        ]
    );
    assert_eq!(
        form(&found, D),
        [
            ("policy_out", "DROP".to_string()),
            (
                "log_ratelimit",
                "enable=1,rate=10/minute,burst=5".to_string()
            ),
            ("digest", D.to_string()),
        ]
    );
    // log_ratelimit's default key is enable: "1,burst=5,rate=10/minute" is
    // the same value.
    let live =
        LiveOptions::from_json(&json!({"log_ratelimit": "1,burst=5,rate=10/minute"})).unwrap();
    assert!(
        changes(&cluster_rows(&want), &live)
            .iter()
            .all(|c| c.key != "log_ratelimit")
    );
}

#[test]
fn a_guest_s_options_use_the_guest_defaults() {
    // $vm_option_properties: macfilter and ndp on, dhcp, ipfilter, radv
    // off; $default_log_level nolog.
    let live = LiveOptions::from_json(&json!({"digest": D})).unwrap();
    let same = GuestOptions {
        macfilter: Some(true),
        ndp: Some(true),
        dhcp: Some(false),
        radv: Some(false),
        ipfilter: Some(false),
        log_level_in: Some(LogLevel::Nolog),
        ..GuestOptions::default()
    };
    assert!(changes(&guest_rows(&same), &live).is_empty());
    let on = GuestOptions {
        enable: Some(true),
        ipfilter: Some(true),
        ..GuestOptions::default()
    };
    let keys: Vec<&str> = changes(&guest_rows(&on), &live)
        .iter()
        .map(|c| c.key)
        .collect();
    assert_eq!(keys, ["enable", "ipfilter"]);
}
