//! A firewall rule read and written the way pve-firewall reads and writes
//! it. Each refusal cites where PVE makes it: `src/PVE/Firewall.pm` of
//! pve-firewall unless said otherwise.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use proxops_core::firewall::data::MACROS;
use proxops_core::firewall::{Known, RawRule, Rule, RuleEnv};
use serde_json::json;

/// The rule a line reads as, rendered back: PVE's own line.
fn line(text: &str) -> String {
    Rule::parse_line(text)
        .unwrap_or_else(|e| panic!("{text}: {e:?}"))
        .to_string()
}

/// The fields PVE names when it refuses the line, with its words.
fn refused(text: &str) -> Vec<String> {
    match Rule::parse_line(text) {
        Ok(r) => panic!("{text} was accepted as {r}"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn a_plan_line_reads_and_renders_as_pve_writes_it() {
    // $format_rules: type, macro(action) or action, -i, -source, -dest,
    // -p, -dport, -sport, -log, -icmp-type, # comment.
    for text in [
        "IN ACCEPT -source +dc/mgmt -p tcp -dport 22",
        "IN SSH(ACCEPT) -i net0 -source 10.0.0.0/8 # admins",
        "|OUT DROP -dest 192.0.2.1-192.0.2.9 -p udp -sport 53 -log info",
        "IN ACCEPT -p icmp -icmp-type echo-request",
        "IN ACCEPT -source fd00::/64,fd01::1 -p ipv6-icmp",
        "FORWARD DROP -source dc/lan -dest guest/db -p tcp -dport 80,443,8000:8100",
        "GROUP webservers -i net1 # the web tier",
        "IN REJECT -p tcp -dport ssh,https",
    ] {
        assert_eq!(line(text), text);
    }
}

#[test]
fn the_options_read_in_any_order_and_either_dash_count() {
    // parse_fw_rule: `-p|--?proto`, `--?dport`, … in a loop, any order;
    // the type in any case; the comment trimmed.
    assert_eq!(
        line("in ACCEPT --dport 22 -proto tcp --source +mgmt   #   ssh  "),
        "IN ACCEPT -source +mgmt -p tcp -dport 22 # ssh"
    );
}

#[test]
fn a_macro_is_spelled_as_pve_stores_it() {
    // verify_rule: $pve_fw_preferred_macro_names, matched by lc().
    assert_eq!(line("IN ssh(ACCEPT)"), "IN SSH(ACCEPT)");
    assert_eq!(
        line("IN https(DROP) -source 10.1.2.3"),
        "IN HTTPS(DROP) -source 10.1.2.3"
    );
    assert_eq!(
        refused("IN Telnetz(ACCEPT)"),
        ["macro: unknown macro 'Telnetz'"]
    );
    assert!(MACROS.contains(&"SPICEproxy") && MACROS.len() == 86);
}

#[test]
fn a_port_without_a_protocol_is_refused_as_pve_refuses_it() {
    // verify_rule: "missing property - 'dport' requires this property".
    assert_eq!(
        refused("IN ACCEPT -dport 22"),
        ["proto: missing property - 'dport' requires this property"]
    );
    assert_eq!(
        refused("IN ACCEPT -sport 22"),
        ["proto: missing property - 'sport' requires this property"]
    );
    // $PROTOCOLS_WITH_PORTS: gre has none.
    assert_eq!(
        refused("IN ACCEPT -p gre -dport 22"),
        ["dport: protocol 'gre' does not support ports"]
    );
}

#[test]
fn ports_are_checked_as_parse_port_name_number_or_range_does() {
    for (dport, why) in [
        ("65536", "invalid port '65536'"),
        (
            "90:80",
            "backwards range '90:80' not allowed, did you mean '80:90'?",
        ),
        ("22,,80", "extraneous commas in list"),
        ("nosuchservice", "invalid port 'nosuchservice'"),
        // A range counts two: eight ranges are sixteen numbers.
        (
            "1:2,3:4,5:6,7:8,9:10,11:12,13:14,15:16",
            "too many entries in port list (> 15 numbers)",
        ),
    ] {
        assert_eq!(
            refused(&format!("IN ACCEPT -p tcp -dport {dport}")),
            [format!("dport: {why}")]
        );
    }
    assert_eq!(
        line("IN ACCEPT -p tcp -dport 0:65535"),
        "IN ACCEPT -p tcp -dport 0:65535"
    );
    // An ICMP type name in a dport, alone (PVE used to keep types there).
    assert_eq!(
        line("IN ACCEPT -p icmp -dport echo-request"),
        "IN ACCEPT -p icmp -dport echo-request"
    );
    assert_eq!(
        refused("IN ACCEPT -p icmp -dport echo-request,22"),
        ["dport: ICMP ports not allowed in port range"]
    );
}

#[test]
fn protocols_and_icmp_types_come_from_pve_s_lists() {
    // pve_fw_verify_protocol_spec: a name or number of /etc/protocols,
    // or icmpv6 (get_etc_protocols).
    assert_eq!(line("IN ACCEPT -p 6 -dport 22"), "IN ACCEPT -p 6 -dport 22");
    assert_eq!(line("IN ACCEPT -p icmpv6"), "IN ACCEPT -p icmpv6");
    assert_eq!(
        refused("IN ACCEPT -p tcpx"),
        ["proto: unknown protocol 'tcpx'"]
    );
    assert_eq!(
        refused("IN ACCEPT -p 200"),
        ["proto: unknown protocol '200'"]
    );
    // verify_rule: icmp-type needs an ICMP protocol and its own type list.
    assert_eq!(
        refused("IN ACCEPT -p tcp -icmp-type echo-request"),
        ["proto: missing property - 'icmp-type' requires this property"]
    );
    assert_eq!(
        refused("IN ACCEPT -p icmp -icmp-type neighbor-solicitation"),
        ["icmp-type: invalid icmp-type 'neighbor-solicitation' for proto 'icmp'"]
    );
    assert_eq!(
        line("IN ACCEPT -p icmpv6 -icmp-type neighbor-solicitation"),
        "IN ACCEPT -p icmpv6 -icmp-type neighbor-solicitation"
    );
}

#[test]
fn addresses_are_checked_as_parse_address_list_does() {
    for (source, why) in [
        // Net::IP refuses a network with host bits set.
        ("10.0.0.1/8", "invalid IP address: 10.0.0.1/8"),
        ("10.0.0.0/33", "invalid IP address: 10.0.0.0/33"),
        (
            "10.0.0.0/8,fd00::1",
            "detected mixed ipv4/ipv6 addresses in address list '10.0.0.0/8,fd00::1'",
        ),
        (
            "10.0.0.1-10.0.0.5,10.0.1.1",
            "you can't use a range in a list",
        ),
        ("10.0.0.1,", "extraneous commas in list"),
        ("+1bad", "invalid ipset name '+1bad'"),
        ("999.0.0.1", "invalid IP address: 999.0.0.1"),
    ] {
        assert_eq!(
            refused(&format!("IN ACCEPT -source {source}")),
            [format!("source: {why}")]
        );
    }
    // verify_rule: the rule as a whole is one IP version.
    assert_eq!(
        refused("IN ACCEPT -source 10.0.0.1 -dest fd00::1"),
        ["source: detected mixed ipv4/ipv6 addresses in rule"]
    );
    assert_eq!(
        refused("IN ACCEPT -p icmp -source fd00::1"),
        ["source: detected mixed ipv4/ipv6 addresses in rule"]
    );
    // An alias longer than $max_alias_name_length.
    let long = format!("a{}", "b".repeat(64));
    assert_eq!(
        refused(&format!("IN ACCEPT -source {long}")),
        ["source: alias name too long"]
    );
}

#[test]
fn type_and_action_are_checked_as_verify_rule_does() {
    assert_eq!(
        refused("FORWARD REJECT"),
        ["action: cannot define REJECT rules on forward chain"]
    );
    assert_eq!(refused("IN accept"), ["action: unknown action 'accept'"]);
    assert_eq!(
        refused("SIDEWAYS ACCEPT"),
        ["type: unknown rule type 'sideways'"]
    );
    assert_eq!(
        refused("GROUP 1web"),
        ["action: invalid characters in security group name"]
    );
    // parse_fw_rule reads only -i after a group.
    assert_eq!(
        refused("GROUP web -source 10.0.0.1"),
        ["rule: unable to parse rule parameters: -source"]
    );
    assert_eq!(
        refused("IN ACCEPT -bogus 1"),
        ["rule: unable to parse rule parameters: -bogus"]
    );
    assert_eq!(refused("IN"), ["rule: unable to parse rule: IN"]);
}

#[test]
fn where_a_rule_stands_decides_what_it_may_say() {
    // $rule_env_direction_lookup and $rule_env_iface_lookup; vm/ct
    // interfaces are net\d+.
    let rule = |t: &str| Rule::parse_line(t).unwrap();
    let words = |env, t: &str| -> Vec<String> {
        rule(t)
            .check_env(env)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert!(words(RuleEnv::Cluster, "GROUP web -i vmbr0").is_empty());
    assert_eq!(
        words(RuleEnv::Group, "GROUP web"),
        ["type: security groups not allowed"]
    );
    assert_eq!(
        words(RuleEnv::Group, "IN ACCEPT -i net0"),
        ["type: parameter -i not allowed for this rule type"]
    );
    assert_eq!(
        words(RuleEnv::Guest, "IN ACCEPT -i vmbr0"),
        ["iface: value does not match the regex pattern 'net\\d+'"]
    );
    assert_eq!(
        words(RuleEnv::Guest, "FORWARD ACCEPT"),
        ["type: invalid rule type 'forward' for rule_env 'vm'"]
    );
    assert!(words(RuleEnv::Guest, "IN ACCEPT -i net3").is_empty());
}

#[test]
fn references_must_name_what_exists_in_their_scope() {
    let known = Known {
        cluster_aliases: ["lan".to_string()].into(),
        cluster_ipsets: ["mgmt".to_string()].into(),
        groups: ["web".to_string()].into(),
        guest_aliases: ["db".to_string()].into(),
        guest_ipsets: ["ipfilter-net0".to_string()].into(),
    };
    let missing = |t: &str| -> Vec<String> {
        known
            .missing(&Rule::parse_line(t).unwrap())
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    for ok in [
        "IN ACCEPT -source +dc/mgmt -dest +guest/ipfilter-net0",
        "IN ACCEPT -source +mgmt -dest LAN",
        "IN ACCEPT -source dc/lan -dest guest/db",
        "GROUP web",
    ] {
        assert!(missing(ok).is_empty(), "{ok}");
    }
    // verify_rule: "no such ipset", "no such alias"; an IP set name is
    // looked up as written among lower-cased names.
    assert_eq!(
        missing("IN ACCEPT -source +Mgmt"),
        ["source: no such ipset 'Mgmt'"]
    );
    assert_eq!(
        missing("IN ACCEPT -dest guest/lan"),
        ["dest: no such alias 'guest/lan'"]
    );
    assert_eq!(
        missing("IN ACCEPT -source +guest/mgmt"),
        ["source: no such ipset 'mgmt'"]
    );
    assert_eq!(missing("GROUP db"), ["action: no such security group 'db'"]);
}

#[test]
fn an_api_entry_reads_as_the_same_rule_and_forms_carry_enable() {
    // What GET …/firewall/rules answers (Rules.pm register_get_rules):
    // the rule's fields with pos, digest and ipversion beside them.
    let entry = json!({"pos": 0, "type": "in", "action": "ACCEPT", "enable": 1, "macro": "SSH",
        "source": "+dc/mgmt", "iface": "net0", "log": "nolog", "ipversion": 4,
        "digest": "0123456789abcdef0123456789abcdef01234567", "comment": "admins"});
    let rule = Rule::from_api(&entry).unwrap();
    assert_eq!(
        rule.to_string(),
        "IN SSH(ACCEPT) -i net0 -source +dc/mgmt -log nolog # admins"
    );
    // PVE creates a rule without `enable` disabled (register_create_rule):
    // the form always sends it.
    let form = |r: &Rule| -> Vec<String> {
        r.api_form()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    };
    assert_eq!(
        form(&rule),
        [
            "type=in",
            "action=ACCEPT",
            "enable=1",
            "macro=SSH",
            "iface=net0",
            "source=+dc/mgmt",
            "log=nolog",
            "comment=admins"
        ]
    );
    let disabled = Rule::from_api(&json!({"type": "group", "action": "web", "enable": 0})).unwrap();
    assert_eq!(disabled.to_string(), "|GROUP web");
    // An update sends what changes and deletes what the new rule lacks
    // (delete_rule_properties).
    let new = Rule::parse_line("IN ACCEPT -i net0 -source +dc/mgmt -p tcp -dport 22").unwrap();
    let update: Vec<String> = new
        .update_form(&rule)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    assert_eq!(
        update,
        ["proto=tcp", "dport=22", "delete=macro,log,comment"]
    );
}

/// A valid rule's fields: each drawn from values PVE accepts, combined as
/// verify_rule allows (ports only with a protocol that has them, an ICMP
/// type only with an ICMP protocol and no dport, one IP version).
fn raw_rule() -> impl Strategy<Value = RawRule> {
    let head = prop_oneof![
        (
            prop::sample::select(vec!["in", "out"]),
            prop::sample::select(vec!["ACCEPT", "DROP", "REJECT"])
        )
            .prop_map(|(t, a)| (t.to_string(), a.to_string())),
        prop::sample::select(vec!["ACCEPT", "DROP"])
            .prop_map(|a| ("forward".to_string(), a.to_string())),
        "[a-z][a-z0-9_-]{1,10}".prop_map(|g| ("group".to_string(), g)),
    ];
    let v4 = prop::sample::select(vec![
        "10.0.0.0/8",
        "192.0.2.1",
        "192.0.2.1-192.0.2.9",
        "10.0.0.1,10.0.0.2",
        "+dc/mgmt",
        "+guest/ipfilter-net0",
        "lan",
        "dc/lan",
        "guest/db",
    ]);
    let v6 = prop::sample::select(vec![
        "fd00::/64",
        "fd00::1",
        "fd00::1,fd00::2",
        "+sdn/zone1",
        "alias6",
    ]);
    let proto = prop::sample::select(vec!["tcp", "udp", "6", "sctp", "icmp", "ipv6-icmp", "gre"]);
    let ports = prop::sample::select(vec![
        "22",
        "80,443",
        "8000:8100",
        "ssh",
        "0:65535",
        "53,domain",
    ]);
    let comment = prop::option::of("[A-Za-z0-9#:/ -]{0,16}[A-Za-z0-9]");
    let log = prop::option::of(prop::sample::select(vec![
        "info", "nolog", "debug", "emerg",
    ]));
    (
        head,
        any::<bool>(),
        prop::option::of(prop::sample::select(vec!["net0", "net12", "vmbr0"])),
        (
            prop::option::of(prop::sample::select(MACROS.to_vec())),
            prop::option::of(proto),
        ),
        (prop::option::of(ports.clone()), prop::option::of(ports)),
        (
            any::<bool>(),
            prop::option::of(v4),
            prop::option::of(v6),
            any::<bool>(),
        ),
        (log, comment),
    )
        .prop_map(
            |(
                head,
                enable,
                iface,
                (mac, proto),
                (dport, sport),
                (six, a4, a6, to),
                (log, comment),
            )| {
                let mut raw = RawRule {
                    rule_type: head.0.clone(),
                    action: head.1,
                    enable,
                    iface: iface.map(str::to_string),
                    comment,
                    ..RawRule::default()
                };
                if head.0 == "group" {
                    return raw;
                }
                raw.macro_name = mac.map(str::to_string);
                raw.log = log.map(str::to_string);
                let addr = if six { a6 } else { a4 };
                let proto = proto.filter(|p| match *p {
                    "icmp" => !six,
                    "ipv6-icmp" => six,
                    _ => true,
                });
                if to {
                    raw.dest = addr.map(str::to_string);
                } else {
                    raw.source = addr.map(str::to_string);
                }
                match proto {
                    Some(p @ ("tcp" | "udp" | "6" | "sctp")) => {
                        raw.dport = dport.map(str::to_string);
                        raw.sport = sport.map(str::to_string);
                        raw.proto = Some(p.to_string());
                    }
                    Some(p @ ("icmp" | "ipv6-icmp")) => {
                        raw.icmp_type = dport.map(|_| "echo-request".to_string());
                        raw.proto = Some(p.to_string());
                    }
                    other => raw.proto = other.map(str::to_string),
                }
                raw
            },
        )
}

proptest! {
    /// render ∘ parse = id on PVE's lines, and parse ∘ render = id on rules.
    #[test]
    fn a_valid_rule_round_trips_through_its_line_and_its_api_fields(raw in raw_rule()) {
        let rule = Rule::from_raw(&raw).unwrap_or_else(|e| panic!("{raw:?}: {e:?}"));
        let text = rule.to_string();
        let again = Rule::parse_line(&text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        prop_assert_eq!(&again, &rule);
        prop_assert_eq!(again.to_string(), text);
        let entry: serde_json::Map<String, serde_json::Value> = rule
            .api_form()
            .into_iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        prop_assert_eq!(Rule::from_api(&serde_json::Value::Object(entry)).unwrap(), rule);
    }
}

/// Words a rule line is made of, so arbitrary lines get past the first
/// checks often.
fn rule_words() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        prop::sample::select(vec![
            "IN",
            "out",
            "GROUP",
            "FORWARD",
            "|IN",
            "ACCEPT",
            "DROP",
            "SSH(ACCEPT)",
            "(DROP)",
            "-i",
            "-p",
            "--proto",
            "-dport",
            "-sport",
            "-source",
            "--dest",
            "-log",
            "-icmp-type",
            "#",
            "tcp",
            "icmp",
            "22",
            "1:65535",
            "99999",
            ",",
            "+dc/",
            "+",
            "guest/",
            "10.0.0.0/8",
            "::1",
            "fe80::/10",
            "1.2.3.4-1.2.3.1",
            "net0",
            "echo-request",
            "nolog",
        ])
        .prop_map(str::to_string),
        "[ -~]{0,12}",
        "\\PC{0,6}",
    ];
    prop::collection::vec(word, 0..12).prop_map(|w| w.join(" "))
}

proptest! {
    /// Whatever a line or an API entry holds, reading it answers; it never
    /// panics.
    #[test]
    fn any_line_or_api_entry_reads_without_panicking(
        text in rule_words(),
        fields in prop::collection::btree_map(
            prop::sample::select(vec!["type", "action", "enable", "macro", "iface", "source",
                "dest", "proto", "dport", "sport", "log", "icmp-type", "comment"]),
            prop_oneof![rule_words().prop_map(|s| json!(s)), any::<i64>().prop_map(|n| json!(n)),
                Just(json!(null)), Just(json!([1]))],
            0..8,
        ),
    ) {
        if let Ok(rule) = Rule::parse_line(&text) {
            prop_assert_eq!(Rule::parse_line(&rule.to_string()).unwrap(), rule);
        }
        let entry: serde_json::Map<String, serde_json::Value> =
            fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        if let Ok(rule) = Rule::from_api(&serde_json::Value::Object(entry)) {
            prop_assert_eq!(Rule::parse_line(&rule.to_string()).unwrap(), rule);
        }
    }
}
