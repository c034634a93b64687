//! The calls that turn a live rule list into the desired one, applied to a
//! small model of PVE's rules API written from pve-firewall's
//! `src/PVE/API2/Firewall/Rules.pm`: the result is the desired list, the
//! digests hold, and the sequence is never longer than deleting the list
//! and creating it again.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use proxops_core::firewall::Rule;
use proxops_core::firewall_plan::list::{Call, Check, RuleCall, render_change, sequence};
use serde_json::{Map, Value};

/// PVE's rule list as its API keeps it: each rule its stored fields.
struct Pve {
    rules: Vec<Map<String, Value>>,
}

/// The fields `copy_rule_data` (Firewall.pm) copies from a request.
const RULE_KEYS: [&str; 13] = [
    "type",
    "action",
    "enable",
    "macro",
    "iface",
    "source",
    "dest",
    "proto",
    "dport",
    "sport",
    "log",
    "icmp-type",
    "comment",
];

impl Pve {
    fn new(rules: &[Rule]) -> Pve {
        let mut pve = Pve { rules: Vec::new() };
        for r in rules.iter().rev() {
            pve.request("POST", "", &r.api_form(), None).unwrap();
        }
        pve
    }

    /// Stands in for `copy_list_with_digest`'s SHA-1: any function of the
    /// whole list that changes when the list does.
    fn digest(&self) -> String {
        serde_json::to_string(&self.rules).unwrap()
    }

    fn list(&self) -> Vec<Rule> {
        self.rules
            .iter()
            .map(|r| Rule::from_api(&Value::Object(r.clone())).unwrap())
            .collect()
    }

    fn copy_rule_data(rule: &mut Map<String, Value>, form: &[(&str, String)]) {
        for (k, v) in form {
            if RULE_KEYS.contains(k) {
                if v.is_empty() || v == "-" {
                    rule.remove(*k);
                } else {
                    rule.insert((*k).to_string(), Value::String(v.clone()));
                }
            }
        }
    }

    /// One call, as the handlers of Rules.pm run it.
    fn request(
        &mut self,
        method: &str,
        path: &str,
        form: &[(&str, String)],
        digest: Option<&str>,
    ) -> Result<(), String> {
        let param = |k: &str| form.iter().find(|(f, _)| *f == k).map(|(_, v)| v.clone());
        if method == "POST" {
            // register_create_rule: no digest check; enable 0 unless sent;
            // unshift.
            let mut rule = Map::new();
            Pve::copy_rule_data(&mut rule, form);
            if param("enable").is_none() {
                rule.insert("enable".into(), Value::String("0".into()));
            }
            self.rules.insert(0, rule);
            return Ok(());
        }
        // register_update_rule / register_delete_rule: assert_if_modified,
        // then "no rule at position".
        if digest != Some(self.digest().as_str()) {
            return Err("detected modified configuration - file changed by other user?".into());
        }
        let pos: usize = path.trim_start_matches('/').parse().unwrap();
        if pos >= self.rules.len() {
            return Err(format!("no rule at position {pos}"));
        }
        match (method, param("moveto")) {
            ("DELETE", _) => {
                self.rules.remove(pos);
            }
            ("PUT", Some(moveto)) => {
                let moveto: usize = moveto.parse().unwrap();
                assert_ne!(
                    moveto, pos,
                    "a move to where the rule is updates it instead"
                );
                let rule = self.rules[pos].clone();
                let mut new = Vec::new();
                for (i, r) in self.rules.iter().enumerate() {
                    if i == pos {
                        continue;
                    }
                    if i == moveto {
                        new.push(rule.clone());
                    }
                    new.push(r.clone());
                }
                if moveto >= self.rules.len() {
                    new.push(rule);
                }
                self.rules = new;
            }
            ("PUT", None) => {
                let rule = &mut self.rules[pos];
                Pve::copy_rule_data(rule, form);
                if let Some(delete) = param("delete") {
                    for k in delete.split(',') {
                        rule.remove(k);
                    }
                }
            }
            other => panic!("unexpected {other:?}"),
        }
        Ok(())
    }

    /// Runs a sequence as the step protocol will: the first update, move
    /// or delete with the planner's digest, every other call after a read
    /// that must find the list the call expects. Stops at the first
    /// refusal or unexpected list.
    fn run(
        &mut self,
        calls: &[Call],
        mut between: impl FnMut(usize, &mut Pve),
    ) -> Result<(), String> {
        for (i, call) in calls.iter().enumerate() {
            between(i, self);
            let digest = match &call.check {
                Check::Digest(d) => d.clone(),
                Check::ReadBack => {
                    if self.list() != call.expect {
                        return Err(format!("call {i}: the list changed under us"));
                    }
                    self.digest()
                }
            };
            let (method, path, form) = call.call.request();
            let send = (method != "POST").then_some(digest.as_str());
            self.request(method, &path, &form, send)?;
        }
        Ok(())
    }
}

fn rules(lines: &[&str]) -> Vec<Rule> {
    lines.iter().map(|l| Rule::parse_line(l).unwrap()).collect()
}

const POOL: [&str; 7] = [
    "IN ACCEPT -source +dc/mgmt -p tcp -dport 22",
    "IN ACCEPT -p tcp -dport 443 # the site",
    "IN SSH(ACCEPT) -i net0",
    "|OUT DROP -dest 192.0.2.1",
    "GROUP webservers",
    "IN DROP -p udp -dport 53 -log info",
    "IN REJECT",
];

/// Plans, runs on the model and checks the result; returns the calls.
fn converge(live: &[Rule], desired: &[Rule]) -> Vec<RuleCall> {
    let mut pve = Pve::new(live);
    let calls = sequence(live, desired, &pve.digest());
    pve.run(&calls, |_, _| {}).unwrap();
    assert_eq!(pve.list(), desired);
    calls.into_iter().map(|c| c.call).collect()
}

#[test]
fn swapping_two_neighbours_is_one_move() {
    let live = rules(&[POOL[0], POOL[1], POOL[2]]);
    let desired = rules(&[POOL[1], POOL[0], POOL[2]]);
    assert_eq!(
        converge(&live, &desired),
        [RuleCall::Move { pos: 0, moveto: 2 }]
    );
    // Moving the last rule to the top is one move too.
    let desired = rules(&[POOL[2], POOL[0], POOL[1]]);
    assert_eq!(
        converge(&live, &desired),
        [RuleCall::Move { pos: 2, moveto: 0 }]
    );
}

#[test]
fn a_changed_rule_is_updated_in_place_and_a_new_one_created_at_the_top() {
    let live = rules(&[POOL[0], POOL[1]]);
    let desired = rules(&[POOL[6], POOL[0], "IN ACCEPT -p tcp -dport 8443 # the site"]);
    let calls = converge(&live, &desired);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(matches!(&calls[0], RuleCall::Update { pos: 1, .. }));
    assert!(matches!(&calls[1], RuleCall::Create { .. }));
    // The update sends only what changed.
    let (_, path, form) = calls[0].request();
    assert_eq!(
        (path.as_str(), form),
        ("/1", vec![("dport", "8443".to_string())])
    );
}

#[test]
fn a_rule_added_by_hand_is_deleted_and_the_plan_shows_it() {
    let desired = rules(&[POOL[0], POOL[1]]);
    let live = rules(&[POOL[0], POOL[6], POOL[1]]);
    let calls = converge(&live, &desired);
    assert_eq!(calls.len(), 1);
    assert!(matches!(&calls[0], RuleCall::Delete { pos: 1, .. }));
    insta::assert_snapshot!(render_change(&live, &desired), @r"
    before:
         0 IN ACCEPT -source +dc/mgmt -p tcp -dport 22
      -  1 IN REJECT
         2 IN ACCEPT -p tcp -dport 443 # the site
    after:
         0 IN ACCEPT -source +dc/mgmt -p tcp -dport 22
         1 IN ACCEPT -p tcp -dport 443 # the site
    ");
    assert_eq!(calls[0].describe(), "delete 1: IN REJECT");
}

#[test]
fn every_write_carries_the_digest_it_read_and_a_hand_edit_stops_the_sequence() {
    let live = rules(&[POOL[0], POOL[1], POOL[2]]);
    let desired = rules(&[POOL[2], POOL[3], POOL[1]]);
    let mut pve = Pve::new(&live);
    let calls = sequence(&live, &desired, &pve.digest());
    assert!(calls.len() >= 2);
    // The planner's digest goes with the first checked call; a create or a
    // later call reads the list first.
    for (i, c) in calls.iter().enumerate() {
        match (&c.call, &c.check) {
            (RuleCall::Create { .. }, check) => assert_eq!(check, &Check::ReadBack),
            (_, Check::Digest(d)) => assert!(i == 0 && *d == pve.digest()),
            (_, Check::ReadBack) => assert!(i > 0),
        }
    }
    // Someone adds a rule by hand before the second call: the read finds
    // a list the sequence did not expect, and nothing more is written.
    let hand = Rule::parse_line("IN ACCEPT -p tcp -dport 9999").unwrap();
    let err = pve
        .run(&calls, |i, pve| {
            if i == 1 {
                pve.request("POST", "", &hand.api_form(), None).unwrap();
            }
        })
        .unwrap_err();
    assert_eq!(err, "call 1: the list changed under us");
    assert_eq!(pve.list()[0], hand);
    // The next cycle plans from what PVE holds and converges.
    let now = pve.list();
    let calls = sequence(&now, &desired, &pve.digest());
    pve.run(&calls, |_, _| {}).unwrap();
    assert_eq!(pve.list(), desired);
    // A stale digest is refused by PVE (assert_if_modified).
    let mut pve = Pve::new(&live);
    let stale = sequence(&live, &desired, "stale");
    assert!(matches!(stale[0].check, Check::Digest(_)));
    assert!(pve.run(&stale, |_, _| {}).unwrap_err().contains("modified"));
}

fn list_of(max: usize) -> impl Strategy<Value = Vec<Rule>> {
    prop::collection::vec(0..POOL.len(), 0..=max).prop_map(|ix| {
        ix.into_iter()
            .map(|i| Rule::parse_line(POOL[i]).unwrap())
            .collect()
    })
}

proptest! {
    /// Any live list becomes any desired list, in no more calls than
    /// deleting and recreating, with every digest and read holding.
    #[test]
    fn the_calls_reach_the_desired_list_in_no_more_than_recreating_it(
        live in list_of(8),
        desired in list_of(8),
    ) {
        let calls = converge(&live, &desired);
        prop_assert!(calls.len() <= live.len() + desired.len());
    }

    /// A reordering is moves only, at most one per rule out of place.
    #[test]
    fn a_permutation_is_only_moves(
        live in list_of(8),
        seed in prop::collection::vec(any::<u32>(), 8),
    ) {
        let mut desired = live.clone();
        let mut keyed: Vec<(u32, Rule)> = seed.into_iter().zip(desired.drain(..)).collect();
        keyed.sort_by_key(|(k, _)| *k);
        let desired: Vec<Rule> = keyed.into_iter().map(|(_, r)| r).collect();
        let calls = converge(&live, &desired);
        prop_assert!(calls.iter().all(|c| matches!(c, RuleCall::Move { .. })), "{calls:?}");
        prop_assert!(calls.len() < live.len().max(1));
    }
}
