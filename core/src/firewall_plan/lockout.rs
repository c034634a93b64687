//! The lock-out guard: a cluster firewall that is enabled and drops
//! incoming traffic by default must keep a rule that admits PVE's
//! management ports, or the operator (and ProxOps, which speaks to 8006)
//! is cut off the cluster by the plan that enables it.

use std::collections::BTreeMap;
use std::fmt;

use proxops_model::firewall::data::MANAGEMENT_MACROS;
use proxops_model::firewall::spec::Policy;
use proxops_model::firewall::{Direction, Head, Rule, Verdict};

/// PVE's management ports: the web interface and API, and SSH.
pub const MANAGEMENT_PORTS: [(u16, &str); 2] = [(8006, "the web interface and API"), (22, "SSH")];

/// The cluster firewall as the plan would leave it.
#[derive(Debug, Clone, Copy)]
pub struct ClusterFirewall<'a> {
    /// `enable` of `/cluster/firewall/options` (PVE: off).
    pub enable: bool,
    /// `policy_in` (PVE: `DROP`).
    pub policy_in: Policy,
    /// The cluster's rules, in order.
    pub rules: &'a [Rule],
    /// The security groups, by name, with their rules.
    pub groups: &'a BTreeMap<String, Vec<Rule>>,
}

/// Why a plan is refused: the management ports no rule admits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lockout {
    pub policy_in: Policy,
    pub ports: Vec<u16>,
}

impl fmt::Display for Lockout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let policy = match self.policy_in {
            Policy::Accept => "ACCEPT",
            Policy::Reject => "REJECT",
            Policy::Drop => "DROP",
        };
        let ports: Vec<String> = self
            .ports
            .iter()
            .map(
                |p| match MANAGEMENT_PORTS.iter().find(|(port, _)| port == p) {
                    Some((_, what)) => format!("tcp {p} ({what})"),
                    None => format!("tcp {p}"),
                },
            )
            .collect();
        write!(
            f,
            "the cluster firewall would be enabled with policy-in {policy} and no enabled rule \
             admits {} from anywhere: this plan would lock operators out of the cluster \
             (add a rule that admits it, or set the override in the cluster's configuration)",
            ports.join(" or ")
        )
    }
}

/// The refusal, when the firewall is enabled, incoming traffic is not
/// accepted by default (`DROP`, or `REJECT`, which cuts off as surely),
/// and some management port is admitted by no enabled `IN` rule of the
/// cluster, directly or through an enabled `GROUP` rule's security group.
/// A rule admits a port from anywhere when it accepts TCP to that port
/// from some source: no protocol and no macro (all traffic), `-p tcp`
/// with no `-dport` or one that covers it, or a macro whose TCP port it
/// is (`SSH` 22, `PMG` 8006). A rule with a `-sport` is not counted
/// (clients do not choose their source port).
///
/// PVE also admits both ports from its `management` IP set and the local
/// cluster network (`enable_host_firewall` in pve-firewall's Firewall.pm);
/// the guard does not count them, since an operator outside those
/// networks is the one locked out.
pub fn lockout(fw: &ClusterFirewall<'_>) -> Option<Lockout> {
    if !fw.enable || fw.policy_in == Policy::Accept {
        return None;
    }
    let ports: Vec<u16> = MANAGEMENT_PORTS
        .iter()
        .map(|(p, _)| *p)
        .filter(|&p| !admitted(fw.rules, fw.groups, p))
        .collect();
    (!ports.is_empty()).then_some(Lockout {
        policy_in: fw.policy_in,
        ports,
    })
}

/// Whether an enabled rule of `rules` (a group's through its `GROUP`
/// rule; a group holds no group rules) admits tcp `port`.
fn admitted(rules: &[Rule], groups: &BTreeMap<String, Vec<Rule>>, port: u16) -> bool {
    rules.iter().filter(|r| r.enable).any(|r| match &r.head {
        Head::Group(name) => groups
            .get(name)
            .is_some_and(|g| g.iter().any(|r| r.enable && admits(r, port))),
        Head::Traffic(..) => admits(r, port),
    })
}

/// Whether one traffic rule accepts incoming tcp `port`.
fn admits(rule: &Rule, port: u16) -> bool {
    if rule.head != Head::Traffic(Direction::In, Verdict::Accept) || rule.sport.is_some() {
        return false;
    }
    if let Some(m) = &rule.macro_name {
        return MANAGEMENT_MACROS
            .iter()
            .any(|(name, p)| name == m && *p == port);
    }
    match (&rule.proto, &rule.dport) {
        (None, _) => true,
        (Some(proto), dport) => proto.is_tcp() && dport.as_ref().is_none_or(|d| d.covers(port)),
    }
}
