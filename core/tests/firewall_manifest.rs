//! The firewall's manifest shapes (docs/resources/firewall.md): what YAML
//! they read, and what one document alone may not say, at its field path.
#![allow(clippy::unwrap_used)]

use proxops_core::firewall::RuleEnv;
use proxops_core::firewall::spec::{
    ClusterFirewallSpec, GuestFirewall, IpSetSpec, Policy, SecurityGroupSpec, check_group,
    check_guest, check_ipset, check_rules,
};

fn errors(list: Vec<proxops_core::diag::FieldError>) -> Vec<String> {
    list.iter()
        .map(|e| format!("{}: {}", e.path, e.message))
        .collect()
}

const GUEST: &str = r#"
options:
  enable: true
  policy-in: DROP
  ipfilter: true
  log-level-in: info
rules:
  - {type: group, action: webservers}
  - {type: in, action: ACCEPT, macro: ssh, source: +dc/mgmt}
  - {type: in, action: ACCEPT, proto: tcp, dport: 443, comment: the site}
  - {type: out, action: DROP, enable: false, dest: guest/backup}
aliases:
  - {name: backup, cidr: 192.0.2.10}
ipsets:
  - name: ipfilter-net0
    entries:
      - {cidr: 192.0.2.0/24}
      - {cidr: 192.0.2.99, nomatch: true, comment: not this one}
"#;

#[test]
fn a_guest_firewall_reads_from_yaml_and_its_rules_render_as_pve_lines() {
    let fw: GuestFirewall = serde_yaml::from_str(GUEST).unwrap();
    assert_eq!(fw.options.policy_in, Some(Policy::Drop));
    assert!(check_guest(&fw, "spec.firewall").is_empty());
    let lines: Vec<String> = check_rules(&fw.rules, RuleEnv::Guest, "spec.firewall.rules")
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            "GROUP webservers",
            "IN SSH(ACCEPT) -source +dc/mgmt",
            "IN ACCEPT -p tcp -dport 443 # the site",
            "|OUT DROP -dest guest/backup",
        ]
    );
    assert!(fw.ipsets[0].entries[1].nomatch);
}

#[test]
fn an_unknown_field_is_refused() {
    let err = serde_yaml::from_str::<GuestFirewall>("options: {policy_in: DROP}\n").unwrap_err();
    assert!(
        err.to_string().contains("unknown field `policy_in`"),
        "{err}"
    );
    let err = serde_yaml::from_str::<GuestFirewall>("options: {policy-in: drop}\n").unwrap_err();
    assert!(err.to_string().contains("unknown variant `drop`"), "{err}");
}

#[test]
fn each_error_names_its_field_path() {
    let fw: GuestFirewall = serde_yaml::from_str(
        r#"
rules:
  - {type: in, action: ACCEPT, dport: 22}
  - {type: forward, action: ACCEPT, iface: vmbr0}
aliases:
  - {cidr: 10.0.0.0/8}
  - {name: db, cidr: 10.0.0.300}
  - {name: DB, cidr: 10.0.0.3}
ipsets:
  - name: 1set
    entries: [{cidr: 10.0.0.0/8}, {cidr: 10.0.0.0/8}, {cidr: lan}, {cidr: "10.0.0.0/40"}]
"#,
    )
    .unwrap();
    assert_eq!(
        errors(check_guest(&fw, "spec.firewall")),
        [
            // verify_rule: a dport needs a protocol.
            "spec.firewall.rules[0].proto: missing property - 'dport' requires this property",
            // $rule_env_direction_lookup: no forward rules on a guest;
            // verify_rule: a guest's interface is net\d+.
            "spec.firewall.rules[1].type: invalid rule type 'forward' for rule_env 'vm'",
            "spec.firewall.rules[1].iface: value does not match the regex pattern 'net\\d+'",
            "spec.firewall.aliases[0].name: a guest's aliases and IP sets need a name",
            // pve_verify_ip_or_cidr
            "spec.firewall.aliases[1].cidr: value does not look like a valid IP address or CIDR network",
            // Aliases are looked up by lc(): db and DB are one.
            "spec.firewall.aliases[2].name: alias 'DB' twice",
            "spec.firewall.ipsets[0].name: IP set '1set' is not a valid name: a letter, then letters, \
             digits, '-' and '_' (2 to 64 characters)",
            "spec.firewall.ipsets[0].entries[1].cidr: '10.0.0.0/8' is already in the set",
            "spec.firewall.ipsets[0].entries[3].cidr: value does not look like a valid IP address or \
             CIDR network",
        ]
    );
}

#[test]
fn cluster_firewall_groups_and_sets_read_and_check() {
    let cluster: ClusterFirewallSpec = serde_yaml::from_str(
        r#"
options: {enable: true, policy-in: DROP, log-ratelimit: {enable: true, rate: 10/minute, burst: 20}}
rules:
  - {type: in, action: ACCEPT, source: +mgmt, proto: tcp, dport: "22,8006"}
  - {type: group, action: admins, iface: vmbr0}
"#,
    )
    .unwrap();
    assert_eq!(cluster.options.enable, Some(true));
    assert_eq!(
        check_rules(&cluster.rules, RuleEnv::Cluster, "spec.rules")
            .unwrap()
            .len(),
        2
    );

    // A security group holds no group rules and no interfaces
    // ($rule_env_direction_lookup, $rule_env_iface_lookup for 'group'),
    // and its name is at most 18 characters ($max_group_name_length).
    let group: SecurityGroupSpec = serde_yaml::from_str(
        "rules:\n  - {type: group, action: other}\n  - {type: in, action: ACCEPT, iface: net0}\n",
    )
    .unwrap();
    assert_eq!(
        errors(check_group("a-very-long-group-name", &group, "spec")),
        [
            "spec.name: security group 'a-very-long-group-name' is not a valid name: a letter, then \
             letters, digits, '-' and '_' (2 to 18 characters)",
            "spec.rules[0].type: security groups not allowed",
            "spec.rules[1].type: parameter -i not allowed for this rule type",
        ]
    );

    // An IP set entry may be an alias (IPorCIDRorAlias) and a network
    // with host bits (pve_verify_ip_or_cidr clears them with clean_cidr).
    let set: IpSetSpec = serde_yaml::from_str(
        "entries: [{cidr: dc/lan}, {cidr: 192.168.1.155/24}, {cidr: 'fd00::/64', nomatch: true}]\n",
    )
    .unwrap();
    assert!(check_ipset("mgmt", &set, "spec").is_empty());
}

/// The rules of PVE's config lines, as adoption will meet them.
const LINES: [&str; 6] = [
    "IN ACCEPT -source +dc/mgmt -p tcp -dport 22",
    "|OUT DROP -dest 192.0.2.1-192.0.2.9 -p udp -sport 53,123 -log info # ntp and dns",
    "IN SSH(ACCEPT) -i net0",
    "GROUP webservers -i net1",
    "IN ACCEPT -p icmp -icmp-type echo-request",
    "IN REJECT -p tcp -dport 8000:8100",
];

#[test]
fn a_rule_written_back_as_a_manifest_reads_as_the_same_rule() {
    let rules: Vec<proxops_core::firewall::Rule> = LINES
        .iter()
        .map(|l| proxops_core::firewall::Rule::parse_line(l).unwrap())
        .collect();
    let specs: Vec<proxops_core::firewall::spec::RuleSpec> = rules
        .iter()
        .map(proxops_core::firewall::spec::RuleSpec::from_rule)
        .collect();
    // Through YAML text, as `adopt` writes files and `validate` reads them.
    let yaml = serde_yaml::to_string(&specs).unwrap();
    let back: Vec<proxops_core::firewall::spec::RuleSpec> = serde_yaml::from_str(&yaml).unwrap();
    assert_eq!(check_rules(&back, RuleEnv::Guest, "rules").unwrap(), rules);
    // Only a disabled rule says `enable`.
    assert!(yaml.matches("enable: false").count() == 1, "{yaml}");
}
