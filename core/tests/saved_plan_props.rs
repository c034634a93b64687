//! A saved plan is bound to what was reviewed: whatever is done to the
//! file — an action added (a prune of a guest ProxOps does not own, with a
//! matching `observed` entry), dropped, repeated, reordered, or one of its
//! parameters changed (a `hookscript`, a `delete=scsi0`, another node or
//! id, a stop where there was none) — `apply --plan` either refuses it
//! with nothing written, or sends exactly the requests of the reviewed
//! plan.
//!
//! The reviewed plan is the demo's `home` cluster after a first apply,
//! with a guest gone (a create), a guest's memory lowered on PVE (an
//! update), a tagged guest without a manifest (a prune), and a running
//! guest without the `proxops` tag (vmid 555) that nothing may touch.
//! Admission is core's [`saved::admit`], the function `apply --plan`
//! calls after it has read PVE and planned again; the requests are what
//! the step protocol sends for each action against a PVE that answers
//! every call as planned.

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use proptest::prelude::*;
use proxops_core::action::{Action, Op, ParamValue, Target, Work};
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::live::{GuestType, LiveSnapshot, NodeState, Power};
use proxops_core::names::{NodeName, Vmid};
use proxops_core::plan::{Plan, Policy};
use proxops_core::planner;
use proxops_core::repo::ClusterDesired;
use proxops_core::saved::{self, Observed, SavedCluster, SavedPlan, Seen, Touched};
use proxops_core::step::{Answer, Call, Instant, Method, PowerPolicy, Step, StepSettings};
use serde_json::json;
use support::{demo, fixture};

/// The guest ProxOps must never touch.
const FOREIGN: u64 = 555;
/// A tagged guest without a manifest: the reviewed plan prunes it.
const ORPHAN: u64 = 777;

fn node(n: &str) -> NodeName {
    NodeName::new(n).unwrap()
}

/// The reviewed situation: desired state, PVE as read, and the plan.
fn reviewed() -> (ClusterDesired, LiveSnapshot, Plan) {
    let c = demo::clusters().remove(0);
    let secrets = CloudInitSecrets::default();
    let ctx = Context {
        cluster: &c,
        secrets: &secrets,
    };
    let mut live = demo::created(&c, &ctx);
    for n in ["pve1", "pve2"] {
        live.nodes.insert(node(n), NodeState::Online);
    }
    // One guest gone (created again), one's memory lowered (updated).
    let mut guests: Vec<_> = live
        .guests
        .iter()
        .filter(|(_, g)| !g.template)
        .map(|(k, _)| k.clone())
        .collect();
    guests.sort();
    live.guests.remove(&guests[0]);
    let g = live.guests.get_mut(&guests[1]).unwrap();
    let cfg = g.config.as_mut().unwrap();
    cfg.values.insert("memory".into(), "64".into()).unwrap();
    cfg.digest = Some("digest-of-the-reviewed-read".into());
    for (vmid, tags) in [(FOREIGN, "prod"), (ORPHAN, "proxops")] {
        let cfg = fixture::config(json!({
            "name": format!("vm{vmid}"), "memory": 512, "tags": tags,
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
            "digest": format!("digest-{vmid}"),
        }));
        let guest = fixture::live(GuestType::Qemu, vmid, Power::Running, &cfg);
        live.guests.insert((guest.node.clone(), guest.vmid), guest);
    }
    let p = plan_of(&c, &live);
    let ops: Vec<Op> = p.actions.iter().map(|a| a.op).collect();
    for op in [Op::Update, Op::Prune] {
        assert!(ops.contains(&op), "{op}: {:#?}", p.actions);
    }
    assert!(
        ops.iter().any(|o| matches!(o, Op::Create | Op::Clone)),
        "{:#?}",
        p.actions
    );
    (c, live, p)
}

fn plan_of(c: &ClusterDesired, live: &LiveSnapshot) -> Plan {
    let secrets = CloudInitSecrets::default();
    let ctx = Context {
        cluster: c,
        secrets: &secrets,
    };
    planner::plan(c, live, &ctx, &Policy::default())
}

/// The saved cluster as `diff --out` writes it and `apply --plan` reads it.
fn saved_cluster(c: &ClusterDesired, p: &Plan, live: &LiveSnapshot) -> SavedCluster {
    let doc = SavedPlan::new(
        "0".repeat(40),
        "sha256:00".into(),
        vec![SavedCluster::new(p, c, live).unwrap()],
    );
    SavedPlan::from_json(&doc.to_json().unwrap())
        .unwrap()
        .clusters
        .remove(0)
}

/// What `apply --plan` sends for `plan`: each action's writes, in plan
/// order, against a PVE that shows every guest as the plan saw it.
fn requests(plan: &Plan) -> Vec<String> {
    plan.actions.iter().flat_map(writes_of).collect()
}

fn writes_of(a: &Action) -> Vec<String> {
    let planned = match &a.work {
        Work::UpdateConfig { digest, .. }
        | Work::Stop { digest, .. }
        | Work::Reboot { digest, .. }
        | Work::MarkTemplate { digest, .. }
        | Work::Delete { digest, .. } => digest.clone(),
        _ => None,
    };
    let settings = StepSettings {
        task_timeout: Duration::from_secs(60),
        power: PowerPolicy::default(),
        tags_case_sensitive: true,
    };
    let mut step = Step::new(a, settings);
    let mut now = Instant::default();
    let mut out = Vec::new();
    let mut power = "running";
    for _ in 0..1000 {
        if step.outcome().is_some() {
            break;
        }
        let Some(call) = step.poll_request(now) else {
            now = step.poll_timeout().unwrap_or(now);
            step.handle_timeout(now);
            continue;
        };
        let answer = pve(&call, planned.as_deref(), &mut power);
        if call.method != Method::Get {
            let form: Vec<String> = call
                .form
                .to_wire()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            out.push(format!("{} {} {}", call.method, call.path, form.join("&")));
        }
        step.handle_answer(now, answer);
        now = Instant::from_origin(now.since_origin() + Duration::from_millis(200));
    }
    out
}

/// PVE answering as planned: the guest's config tagged `proxops` with the
/// planned digest, tasks ended OK, power as the last power call left it.
fn pve(call: &Call, digest: Option<&str>, power: &mut &'static str) -> Answer {
    let path = call.path.as_str();
    match call.method {
        Method::Get if path.contains("/tasks/") => {
            Answer::Data(json!({"status": "stopped", "exitstatus": "OK"}))
        }
        Method::Get if path.ends_with("/status/current") => {
            Answer::Data(json!({"status": *power, "qmpstatus": *power}))
        }
        Method::Get => Answer::Data(json!({"tags": "proxops", "digest": digest})),
        _ => {
            if path.ends_with("/status/shutdown") {
                *power = "stopped";
            } else if path.ends_with("/status/start") {
                *power = "running";
            }
            Answer::Data(json!("UPID:pve1:0001:0002:6B0C:qmtask:100:root@pam:"))
        }
    }
}

/// One edit of a saved plan file.
#[derive(Debug, Clone)]
enum Mutation {
    /// A prune of the guest nobody owns, with an `observed` entry showing
    /// its current digest.
    PruneForeign {
        at: usize,
    },
    Remove(usize),
    Duplicate(usize),
    Swap(usize, usize),
    /// A form value added to the action's work (`hookscript`, `args`,
    /// `delete=scsi0`, …) or one replaced.
    Param {
        at: usize,
        key: String,
        value: String,
    },
    /// The action moved to another node or id.
    Retarget {
        at: usize,
        node: bool,
    },
    /// A shutdown or a purge where there was none, or none where there was.
    FlipPower(usize),
    /// The digest a write or a check carries.
    Digest(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let key = prop::sample::select(vec![
        "hookscript",
        "args",
        "delete",
        "memory",
        "tags",
        "protection",
        "skiplock",
        "mp0",
    ]);
    let value = prop::sample::select(vec![
        "local:snippets/own.sh",
        "-device vfio-pci",
        "scsi0",
        "1",
        "prod",
        "/etc,mp=/mnt/etc",
    ]);
    prop_oneof![
        (0usize..64).prop_map(|at| Mutation::PruneForeign { at }),
        (0usize..64).prop_map(Mutation::Remove),
        (0usize..64).prop_map(Mutation::Duplicate),
        (0usize..64, 0usize..64).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (0usize..64, key, value).prop_map(|(at, k, v)| Mutation::Param {
            at,
            key: k.to_owned(),
            value: v.to_owned(),
        }),
        (0usize..64, any::<bool>()).prop_map(|(at, node)| Mutation::Retarget { at, node }),
        (0usize..64).prop_map(Mutation::FlipPower),
        (0usize..64).prop_map(Mutation::Digest),
    ]
}

/// Applies `m` to `c` (indices wrap around the actions).
fn mutate(c: &mut SavedCluster, live: &LiveSnapshot, m: &Mutation) {
    let n = c.actions.len();
    let i = |at: usize| at % n.max(1);
    match m {
        Mutation::PruneForeign { at } => {
            let vmid = Vmid::new(FOREIGN).unwrap();
            // Written as the planner writes a prune.
            let prune = Action {
                op: Op::Prune,
                kind: proxops_core::names::Kind::VM,
                name: format!("vm{FOREIGN}"),
                node: node("pve1"),
                target: Target::Guest(vmid),
                impact: proxops_core::action::Impact::Live,
                changes: Vec::new(),
                reason: "present on PVE (proxops-tagged) but absent in git".into(),
                level: 1,
                deps: Vec::new(),
                object: None,
                work: Work::Delete {
                    guest_type: GuestType::Qemu,
                    stop_first: true,
                    purge: false,
                    digest: Some(format!("digest-{FOREIGN}")),
                },
            };
            c.actions.insert(i(*at).min(n), prune);
            let g = live.guest_by_vmid(vmid).unwrap();
            c.observed.push(Observed {
                object: Touched::Guest(vmid),
                seen: Seen::Guest {
                    node: g.node.clone(),
                    digest: g.config.as_ref().unwrap().digest.clone(),
                },
            });
            c.observed.sort();
        }
        Mutation::Remove(at) => {
            c.actions.remove(i(*at));
        }
        Mutation::Duplicate(at) => {
            let a = c.actions[i(*at)].clone();
            c.actions.insert(i(*at), a);
        }
        Mutation::Swap(a, b) => c.actions.swap(i(*a), i(*b)),
        Mutation::Param { at, key, value } => {
            let a = &mut c.actions[i(*at)];
            let form = match &mut a.work {
                Work::CreateGuest { params, .. }
                | Work::UpdateConfig { params, .. }
                | Work::Download { params, .. } => Some(params),
                Work::CloneGuest { config, .. } => Some(config),
                _ => None,
            };
            match (form, key.as_str()) {
                (Some(_), "delete") => {
                    if let Work::UpdateConfig { delete, .. } | Work::CloneGuest { delete, .. } =
                        &mut a.work
                    {
                        delete.push(value.clone());
                    }
                }
                (Some(form), _) => {
                    form.0.retain(|(k, _)| k != key);
                    form.0.push((key.clone(), ParamValue::Plain(value.clone())));
                }
                (None, _) => a.reason.push_str(value),
            }
        }
        Mutation::Retarget { at, node: true } => {
            let a = &mut c.actions[i(*at)];
            a.node = if a.node.as_str() == "pve1" {
                node("pve2")
            } else {
                node("pve1")
            };
        }
        Mutation::Retarget { at, node: false } => {
            let a = &mut c.actions[i(*at)];
            if let Target::Guest(v) = a.target {
                a.target = Target::Guest(Vmid::new(u64::from(v.get()) + 1).unwrap());
            }
        }
        Mutation::FlipPower(at) => match &mut c.actions[i(*at)].work {
            Work::UpdateConfig { stop_first, .. }
            | Work::MarkTemplate { stop_first, .. }
            | Work::Delete { stop_first, .. } => *stop_first = !*stop_first,
            Work::CloneGuest { start_after, .. } => *start_after = !*start_after,
            _ => {}
        },
        Mutation::Digest(at) => match &mut c.actions[i(*at)].work {
            Work::UpdateConfig { digest, .. }
            | Work::Stop { digest, .. }
            | Work::Reboot { digest, .. }
            | Work::MarkTemplate { digest, .. }
            | Work::Delete { digest, .. } => *digest = Some("edited".into()),
            _ => {}
        },
    }
}

/// `apply --plan` of `edited`: refused (nothing sent), or the requests
/// it sends.
fn apply_plan(
    edited: &SavedCluster,
    c: &ClusterDesired,
    live: &LiveSnapshot,
) -> Result<Vec<String>, Vec<String>> {
    let now = plan_of(c, live);
    saved::admit(edited, &now, c, live, &Policy::default()).map(|p| requests(&p))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn an_edited_saved_plan_is_refused_or_sends_exactly_the_reviewed_requests(
        edits in prop::collection::vec(mutation(), 1..4),
    ) {
        let (c, live, reviewed) = reviewed();
        let file = saved_cluster(&c, &reviewed, &live);
        let expected = requests(&reviewed);
        prop_assert!(!expected.is_empty());
        let mut edited = file.clone();
        for m in &edits {
            mutate(&mut edited, &live, m);
        }
        match apply_plan(&edited, &c, &live) {
            Err(why) => prop_assert!(!why.is_empty()),
            Ok(sent) => {
                prop_assert_eq!(&sent, &expected, "{:?}", edits);
                prop_assert_eq!(&edited.actions, &file.actions);
            }
        }
    }
}

#[test]
fn the_reviewed_plan_itself_is_admitted_and_sends_its_requests() {
    let (c, live, reviewed) = reviewed();
    let file = saved_cluster(&c, &reviewed, &live);
    let sent = apply_plan(&file, &c, &live).unwrap();
    assert_eq!(sent, requests(&reviewed));
    assert!(
        sent.iter()
            .any(|r| r.starts_with(&format!("DELETE /nodes/pve1/qemu/{ORPHAN}"))),
        "{sent:#?}"
    );
    assert!(!sent.iter().any(|r| r.contains(&FOREIGN.to_string())));
}

#[test]
fn a_prune_of_an_untagged_guest_added_with_its_current_digest_is_refused() {
    let (c, live, reviewed) = reviewed();
    let mut file = saved_cluster(&c, &reviewed, &live);
    mutate(&mut file, &live, &Mutation::PruneForeign { at: 0 });
    // Every check the file itself carries passes: the added guest is
    // observed with the digest PVE shows now.
    assert!(saved::check(&c.name, &file.observed, &live).is_empty());
    assert!(saved::unobserved(&file.actions, &file.observed).is_empty());
    let why = apply_plan(&file, &c, &live).unwrap_err().join("\n");
    assert!(
        why.contains(&format!(
            "prune VM/vm{FOREIGN} (id {FOREIGN}): the planner does not make this action now"
        )),
        "{why}"
    );
}

#[test]
fn a_hookscript_added_to_a_reviewed_update_is_refused() {
    let (c, live, reviewed) = reviewed();
    let mut file = saved_cluster(&c, &reviewed, &live);
    let at = file
        .actions
        .iter()
        .position(|a| a.op == Op::Update)
        .unwrap();
    for (key, value) in [
        ("hookscript", "local:snippets/own.sh"),
        ("args", "-device vfio-pci"),
    ] {
        let mut edited = file.clone();
        mutate(
            &mut edited,
            &live,
            &Mutation::Param {
                at,
                key: key.into(),
                value: value.into(),
            },
        );
        let why = apply_plan(&edited, &c, &live).unwrap_err().join("\n");
        assert!(
            why.contains("differs from the one the planner makes now"),
            "{why}"
        );
    }
    mutate(
        &mut file,
        &live,
        &Mutation::Param {
            at,
            key: "delete".into(),
            value: "scsi0".into(),
        },
    );
    assert!(apply_plan(&file, &c, &live).is_err());
}
