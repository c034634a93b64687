//! Firewall writes against fakepve's digest checks (pve-firewall
//! `assert_if_modified`): the first write of a planned sequence carries the
//! digest the plan read, and a list edited by hand after that read makes
//! PVE refuse it; a later call reads the list first and stops when it is
//! not the one the plan expects. Nothing of the person's edit is lost,
//! and planning again from what PVE holds converges.

#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::time::Duration;

use proxops_core::action::{Action, Impact, Op, Target, Work};
use proxops_core::exec::{ActionState, Outcome};
use proxops_core::firewall::Rule;
use proxops_core::firewall::live::LiveRules;
use proxops_core::firewall_plan::calls::rule_calls;
use proxops_core::names::{ClusterName, Kind, NodeName};
use proxops_core::plan::Plan;
use proxops_core::rollout::Limits;
use proxops_core::step::PowerPolicy;
use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::runner;
use proxops_pve::serial::{self, RunOptions};
use proxops_pve::transport::{Method, Request, Response, Transport, TransportError};
use serde_json::json;

const GROUP: &str = "/cluster/firewall/groups/web";

fn now() -> u64 {
    runner::unix_now()
}

fn opts() -> RunOptions<'static> {
    RunOptions {
        task_timeout: Duration::from_secs(10),
        power: PowerPolicy::default(),
        desired: None,
        limits: Limits::serial(),
        now: &now,
        stop: None,
        on_result: None,
        on_progress: None,
    }
}

fn send(t: &dyn Transport, method: Method, path: &str, form: &[(&str, &str)]) -> Response {
    let form = form
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let r = t
        .call(&Request::new(method, path.to_owned(), form))
        .unwrap();
    assert!(r.is_success(), "{method:?} {path}: {r:?}");
    r
}

fn read(t: &dyn Transport) -> LiveRules {
    let r = t.call(&Request::get(GROUP)).unwrap();
    LiveRules::from_json(r.data()).unwrap()
}

fn line(l: &str) -> Rule {
    Rule::parse_line(l).unwrap()
}

/// The group `web` with rules A, B, C (in that order).
fn start() -> (FakePve, LiveTransport) {
    let pve = FakePve::start(&json!({"guests": []})).unwrap();
    let t = LiveTransport::new(pve.live_config()).unwrap();
    send(
        &t,
        Method::Post,
        "/cluster/firewall/groups",
        &[("group", "web")],
    );
    for port in ["3", "2", "1"] {
        let form = [
            ("type", "in"),
            ("action", "ACCEPT"),
            ("proto", "tcp"),
            ("dport", port),
            ("enable", "1"),
        ];
        send(&t, Method::Post, GROUP, &form);
    }
    (pve, t)
}

/// The planned action: make the group's list `want`, from `live`.
fn plan(live: &LiveRules, want: &[Rule]) -> Plan {
    let calls = rule_calls(GROUP, &live.rules, want, &live.digest);
    let action = Action {
        op: Op::Update,
        kind: Kind::SecurityGroup,
        name: "web".into(),
        node: NodeName::cluster_wide(),
        target: Target::Cluster("web".into()),
        impact: Impact::Live,
        changes: Vec::new(),
        reason: "test".into(),
        level: 0,
        deps: Vec::new(),
        object: None,
        work: Work::Firewall { calls },
    };
    Plan {
        cluster: ClusterName::new("home").unwrap(),
        abort: None,
        actions: vec![action],
        skipped: Vec::new(),
        deferred: Vec::new(),
        rollout: Default::default(),
        not_considered: Vec::new(),
        anomalies: Vec::new(),
        self_guests: Vec::new(),
        diagnostics: Vec::new(),
    }
}

/// Forwards every call; a person adds a rule to the group's list before
/// the first write (`after_first: false`), or right after it.
struct EditsAroundWrite<'a> {
    inner: &'a dyn Transport,
    after_first: bool,
    writes: Mutex<usize>,
}

impl EditsAroundWrite<'_> {
    fn edit(&self) {
        let form = [("type", "out"), ("action", "DROP"), ("enable", "1")];
        send(self.inner, Method::Post, GROUP, &form);
    }
}

impl Transport for EditsAroundWrite<'_> {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        if request.method == Method::Get {
            return self.inner.call(request);
        }
        let n = {
            let mut n = self.writes.lock().unwrap();
            *n += 1;
            *n
        };
        if n == 1 && !self.after_first {
            self.edit();
        }
        let answer = self.inner.call(request);
        if n == 1 && self.after_first {
            self.edit();
        }
        answer
    }
}

fn outcome(exec: &proxops_core::exec::Execution) -> Outcome {
    match &exec.states()[0] {
        ActionState::Done { outcome, .. } => outcome.clone(),
        other => panic!("not done: {other:?}"),
    }
}

fn lines(t: &dyn Transport) -> Vec<String> {
    read(t).rules.iter().map(ToString::to_string).collect()
}

#[test]
fn the_first_write_carries_the_plans_digest_and_pve_refuses_a_changed_list() {
    let (pve, t) = start();
    let live = read(&t);
    let want = [
        line("IN ACCEPT -p tcp -dport 2"),
        line("IN ACCEPT -p tcp -dport 1"),
        line("IN ACCEPT -p tcp -dport 3"),
    ];
    let racing = EditsAroundWrite {
        inner: &t,
        after_first: false,
        writes: Mutex::new(0),
    };
    let exec = serial::execute(&racing, &plan(&live, &want), &opts());
    // PVE's "checksum mismatch": the edit is someone else's, kept.
    assert_eq!(outcome(&exec), Outcome::ChangedUnderUs);
    // The sent write carried the digest the plan read.
    let sent = pve.requests().unwrap();
    let (_, _, body) = sent
        .iter()
        .rfind(|(m, p, _)| m == "PUT" && p.contains("/groups/web/"))
        .unwrap();
    assert!(body.contains(&format!("digest={}", live.digest)), "{body}");
    // The person's rule is kept; nothing else moved.
    assert_eq!(
        lines(&t),
        [
            "OUT DROP",
            "IN ACCEPT -p tcp -dport 1",
            "IN ACCEPT -p tcp -dport 2",
            "IN ACCEPT -p tcp -dport 3"
        ]
    );

    // The next cycle plans from what PVE holds, and converges.
    let exec = serial::execute(&t, &plan(&read(&t), &want), &opts());
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
    assert_eq!(lines(&t), want.map(|r| r.to_string()));
}

#[test]
fn a_later_write_reads_the_list_first_and_stops_when_it_changed() {
    let (_pve, t) = start();
    let live = read(&t);
    // Two calls: the first with the plan's digest, the second after a read.
    let want = [
        line("IN ACCEPT -p tcp -dport 3"),
        line("IN ACCEPT -p tcp -dport 2"),
    ];
    assert!(rule_calls(GROUP, &live.rules, &want, &live.digest).len() >= 2);
    let racing = EditsAroundWrite {
        inner: &t,
        after_first: true,
        writes: Mutex::new(0),
    };
    let exec = serial::execute(&racing, &plan(&live, &want), &opts());
    let Outcome::Failed { error, .. } = outcome(&exec) else {
        panic!("{:?}", exec.states());
    };
    assert!(error.contains("changed since the plan read it"), "{error}");
    assert!(
        lines(&t).contains(&"OUT DROP".to_owned()),
        "{:?}",
        lines(&t)
    );

    let exec = serial::execute(&t, &plan(&read(&t), &want), &opts());
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
    assert_eq!(lines(&t), want.map(|r| r.to_string()));
}
