//! What a rule names beyond itself (IP sets, aliases, security groups) and
//! whether those exist where the rule would look them up.

use std::collections::BTreeSet;

use super::grammar::{Address, RefScope};
use super::rule::{Head, Rule, RuleError};

/// The objects a rule may name, by their names as PVE keeps them: IP set
/// and security group names lower case (`generic_fw_config_parser` reads
/// `[IPSET name]` and `[group name]` through `lc`), aliases compared
/// ignoring case (`verify_rule` looks an alias up by `lc`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Known {
    pub cluster_aliases: BTreeSet<String>,
    pub cluster_ipsets: BTreeSet<String>,
    pub groups: BTreeSet<String>,
    pub guest_aliases: BTreeSet<String>,
    pub guest_ipsets: BTreeSet<String>,
}

impl Known {
    fn alias(&self, scope: RefScope, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        let guest = || {
            self.guest_aliases
                .iter()
                .any(|a| a.eq_ignore_ascii_case(&name))
        };
        let cluster = || {
            self.cluster_aliases
                .iter()
                .any(|a| a.eq_ignore_ascii_case(&name))
        };
        match scope {
            RefScope::Cluster => cluster(),
            RefScope::Guest => guest(),
            RefScope::Any | RefScope::Sdn => guest() || cluster(),
        }
    }

    /// Whether an alias `name` exists where `scope` looks it up, ignoring
    /// case (an IP set entry's alias, `resolve_alias`).
    pub fn has_alias(&self, scope: RefScope, name: &str) -> bool {
        self.alias(scope, name)
    }

    fn ipset(&self, scope: RefScope, name: &str) -> bool {
        match scope {
            RefScope::Cluster => self.cluster_ipsets.contains(name),
            RefScope::Guest => self.guest_ipsets.contains(name),
            RefScope::Any => self.guest_ipsets.contains(name) || self.cluster_ipsets.contains(name),
            // SDN objects are PVE's, outside what a repository declares.
            RefScope::Sdn => true,
        }
    }

    /// The rule's references that name nothing, in PVE's words
    /// (`verify_rule`: "no such ipset", "no such alias"; a group rule's
    /// group is looked up when the ruleset is compiled). Stricter than
    /// `verify_rule` in one way: a scoped reference (`+dc/x`, `guest/x`)
    /// must exist in its scope, where PVE accepts it from either and then
    /// drops the rule when it compiles the ruleset.
    pub fn missing(&self, rule: &Rule) -> Vec<RuleError> {
        let mut errors = Vec::new();
        if let Head::Group(name) = &rule.head
            && !self.groups.contains(name)
        {
            errors.push(RuleError {
                field: "action",
                message: format!("no such security group '{name}'"),
            });
        }
        for (field, addr) in [("source", &rule.source), ("dest", &rule.dest)] {
            let Some(addr) = addr else { continue };
            let message = match addr.what() {
                Address::IpSet { scope, name } if !self.ipset(*scope, name) => {
                    format!("no such ipset '{name}'")
                }
                Address::Alias { scope, name } if !self.alias(*scope, name) => {
                    format!("no such alias '{addr}'")
                }
                _ => continue,
            };
            errors.push(RuleError { field, message });
        }
        errors
    }
}
