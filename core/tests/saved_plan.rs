//! Saved plans: actions round-trip through the versioned document byte for
//! byte, secrets are saved as references and resolved again, and what a
//! plan saw of the objects it touches is compared with a later read.

#![allow(clippy::unwrap_used)]

mod support;

use proxops_core::action::{Action, ParamValue, Params, Work};
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::live::{LiveConfig, LiveSnapshot, NodeState, StorageContent};
use proxops_core::names::{NodeName, Vmid};
use proxops_core::plan::{Plan, Policy};
use proxops_core::planner;
use proxops_core::repo::ClusterDesired;
use proxops_core::saved::{
    self, FORMAT, SavedCluster, SavedPlan, SavedPlanError, Seen, Touched, VERSION,
};
use proxops_core::secret::Secret;
use support::{demo, fixture};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const TREE: &str = "sha256:00";

/// Nodes online and every storage the cluster uses read and empty: a first
/// apply's view.
fn empty_cluster(c: &ClusterDesired) -> LiveSnapshot {
    let mut s = LiveSnapshot::default();
    for n in ["pve1", "pve2"] {
        s.nodes.insert(NodeName::new(n).unwrap(), NodeState::Online);
    }
    for pair in c.storage_pairs() {
        s.storage.insert(pair, Ok(StorageContent::default()));
    }
    s
}

fn plan_of(c: &ClusterDesired, live: &LiveSnapshot, secrets: &CloudInitSecrets) -> Plan {
    let ctx = Context {
        cluster: c,
        secrets,
    };
    planner::plan(c, live, &ctx, &Policy::default())
}

fn saved_doc(c: &ClusterDesired, p: &Plan, live: &LiveSnapshot) -> SavedPlan {
    SavedPlan::new(
        COMMIT.into(),
        TREE.into(),
        vec![SavedCluster::new(p, c, live).unwrap()],
    )
}

#[test]
fn every_action_of_a_first_demo_apply_round_trips_through_the_document() {
    for c in demo::clusters() {
        let live = empty_cluster(&c);
        let p = plan_of(&c, &live, &CloudInitSecrets::default());
        assert!(!p.actions.is_empty(), "{}: nothing planned", c.name);
        let doc = saved_doc(&c, &p, &live);
        let text = doc.to_json().unwrap();
        let back = SavedPlan::from_json(&text).unwrap();
        assert_eq!(back, doc);
        assert_eq!(back.clusters[0].actions, p.actions);
        assert_eq!(back.clusters[0].plan().actions, p.actions);
        // Same inputs, same bytes.
        assert_eq!(saved_doc(&c, &p, &live).to_json().unwrap(), text);
        assert_eq!(back.to_json().unwrap(), text);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["format"], FORMAT);
        assert_eq!(v["version"], VERSION);
        assert_eq!(v["commit"], COMMIT);
    }
}

#[test]
fn a_first_apply_saw_every_touched_guest_and_file_absent() {
    let c = demo::clusters().remove(0);
    let live = empty_cluster(&c);
    let p = plan_of(&c, &live, &CloudInitSecrets::default());
    let saved = SavedCluster::new(&p, &c, &live).unwrap();
    assert!(!saved.observed.is_empty());
    assert!(
        saved.observed.iter().all(|o| o.seen == Seen::Absent),
        "{:#?}",
        saved.observed
    );
    let guests = saved
        .observed
        .iter()
        .filter(|o| matches!(o.object, Touched::Guest(_)))
        .count();
    let files = saved.observed.len() - guests;
    assert!(guests > 0 && files > 0, "{:#?}", saved.observed);
    // Nothing moved: the same read passes.
    assert!(saved::check(&c.name, &saved.observed, &live).is_empty());
}

/// The demo after a first apply, with one guest's memory raised in the
/// manifest's place: the plan updates that guest and carries its digest.
fn update_of_one_guest() -> (ClusterDesired, LiveSnapshot, Plan, Vmid) {
    let c = demo::clusters().remove(0);
    let secrets = CloudInitSecrets::default();
    let ctx = Context {
        cluster: &c,
        secrets: &secrets,
    };
    let mut live = demo::created(&c, &ctx);
    for n in ["pve1", "pve2"] {
        live.nodes
            .insert(NodeName::new(n).unwrap(), NodeState::Online);
    }
    let (key, guest) = live
        .guests
        .iter()
        .find(|(_, g)| !g.template && g.config.as_ref().is_ok_and(|c| c.get("memory").is_some()))
        .map(|(k, g)| (k.clone(), g.clone()))
        .unwrap();
    let mut cfg: LiveConfig = guest.config.clone().unwrap();
    cfg.values.insert("memory".into(), "64".into()).unwrap();
    cfg.digest = Some("digest-before".into());
    live.guests.get_mut(&key).unwrap().config = Ok(cfg);
    let p = plan_of(&c, &live, &secrets);
    assert!(
        p.actions
            .iter()
            .any(|a| a.target.to_string() == key.1.to_string()),
        "{p:#?}"
    );
    (c, live, p, key.1)
}

#[test]
fn an_update_carries_the_guest_digest_and_a_changed_digest_is_moved() {
    let (c, live, p, vmid) = update_of_one_guest();
    let saved = SavedCluster::new(&p, &c, &live).unwrap();
    let seen = saved
        .observed
        .iter()
        .find(|o| o.object == Touched::Guest(vmid))
        .unwrap();
    assert!(
        matches!(&seen.seen, Seen::Guest { digest: Some(d), .. } if d == "digest-before"),
        "{seen:?}"
    );
    assert!(saved::check(&c.name, &saved.observed, &live).is_empty());

    let mut edited = live.clone();
    let g = edited.guests.values_mut().find(|g| g.vmid == vmid).unwrap();
    g.config.as_mut().unwrap().digest = Some("digest-after".into());
    let moved = saved::check(&c.name, &saved.observed, &edited);
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0].object, Touched::Guest(vmid));
    let text = moved[0].to_string();
    assert!(
        text.contains("digest-before") && text.contains("digest-after"),
        "{text}"
    );

    let mut gone = live.clone();
    gone.guests.retain(|_, g| g.vmid != vmid);
    let moved = saved::check(&c.name, &saved.observed, &gone);
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].now, Seen::Absent);
}

#[test]
fn a_guest_answer_without_a_digest_is_unverifiable_and_refused() {
    // Real PVE lists the digest among `/pending`'s entries (pve-guest-common
    // `GuestHelpers.pm` `config_with_pending_array`); an answer without it
    // cannot show a change, so the saved plan refuses the guest even when
    // both reads lack it.
    let (c, mut live, _, vmid) = update_of_one_guest();
    let g = live.guests.values_mut().find(|g| g.vmid == vmid).unwrap();
    g.config.as_mut().unwrap().digest = None;
    let p = plan_of(&c, &live, &CloudInitSecrets::default());
    let saved = SavedCluster::new(&p, &c, &live).unwrap();
    let seen = saved
        .observed
        .iter()
        .find(|o| o.object == Touched::Guest(vmid))
        .unwrap();
    assert!(matches!(seen.seen, Seen::Unreadable(_)), "{seen:?}");
    let moved = saved::check(&c.name, &saved.observed, &live);
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert!(
        moved[0].to_string().contains("carried no config digest"),
        "{}",
        moved[0]
    );
    // The update itself says it goes without optimistic concurrency.
    let update = p
        .actions
        .iter()
        .find(|a| a.target.to_string() == vmid.to_string())
        .unwrap();
    assert!(
        update.reason.contains("without a digest"),
        "{}",
        update.reason
    );
}

#[test]
fn a_guest_that_appeared_or_a_file_that_arrived_since_a_first_plan_is_moved() {
    let c = demo::clusters().remove(0);
    let empty = empty_cluster(&c);
    let p = plan_of(&c, &empty, &CloudInitSecrets::default());
    let saved = SavedCluster::new(&p, &c, &empty).unwrap();
    let secrets = CloudInitSecrets::default();
    let ctx = Context {
        cluster: &c,
        secrets: &secrets,
    };
    let mut all = demo::created(&c, &ctx);
    all.nodes = empty.nodes.clone();
    let moved = saved::check(&c.name, &saved.observed, &all);
    assert_eq!(moved.len(), saved.observed.len(), "{moved:?}");
}

fn password_vm() -> String {
    "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm1\nspec:\n  node: pve1\n  vmid: 100\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  disks:\n    - storage: local-lvm\n      size: 32GiB\n  networks:\n    - bridge: vmbr0\n  cloud-init-data:\n    ci-password-ref: cloud-init.passwords.ops\n".to_owned()
}

fn ops_password() -> CloudInitSecrets {
    let mut s = CloudInitSecrets::default();
    s.passwords
        .insert("ops".into(), Secret::new("hunter2-very-secret"));
    s
}

fn create_params(a: &Action) -> &Params {
    match &a.work {
        Work::CreateGuest { params, .. } => params,
        other => panic!("not a create: {other:?}"),
    }
}

#[test]
fn a_secret_is_saved_as_its_sops_reference_and_resolved_again_before_running() {
    let doc = password_vm();
    let c = fixture::cluster(&[&doc]);
    let live = empty_cluster(&c);
    let secrets = ops_password();
    let p = plan_of(&c, &live, &secrets);
    let create = p.actions.iter().find(|a| a.name == "vm1").unwrap();
    assert!(matches!(
        create_params(create).get("cipassword"),
        Some(ParamValue::Secret(_))
    ));

    let text = saved_doc(&c, &p, &live).to_json().unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains(r#""secret": "cloud-init.passwords.ops""#),
        "{text}"
    );

    let back = SavedPlan::from_json(&text).unwrap();
    let mut actions = back.clusters[0].plan().actions;
    let saved_create = actions.iter().find(|a| a.name == "vm1").unwrap();
    assert_eq!(
        create_params(saved_create).unresolved_secret(),
        Some(("cipassword", "cloud-init.passwords.ops"))
    );
    saved::resolve_secrets(&c.name, &mut actions, &secrets).unwrap();
    assert_eq!(actions, p.actions);
    assert_eq!(
        create_params(actions.iter().find(|a| a.name == "vm1").unwrap())
            .get("cipassword")
            .unwrap()
            .expose(),
        "hunter2-very-secret"
    );
}

#[test]
fn a_secret_reference_missing_from_sops_refuses_to_run() {
    let doc = password_vm();
    let c = fixture::cluster(&[&doc]);
    let live = empty_cluster(&c);
    let p = plan_of(&c, &live, &ops_password());
    let text = saved_doc(&c, &p, &live).to_json().unwrap();
    let mut actions = SavedPlan::from_json(&text).unwrap().clusters[0]
        .plan()
        .actions;
    let e =
        saved::resolve_secrets(&c.name, &mut actions, &CloudInitSecrets::default()).unwrap_err();
    assert!(
        matches!(&e, SavedPlanError::UnresolvedSecret { reference, .. } if reference == "cloud-init.passwords.ops"),
        "{e}"
    );
}

#[test]
fn a_secret_value_is_never_serialised() {
    let doc = password_vm();
    let c = fixture::cluster(&[&doc]);
    let live = empty_cluster(&c);
    let p = plan_of(&c, &live, &ops_password());
    // Bypassing SavedCluster::new, which would have swapped in the reference.
    let raw = SavedCluster {
        cluster: c.name.clone(),
        observed: Vec::new(),
        actions: p.actions.clone(),
    };
    let e = SavedPlan::new(COMMIT.into(), TREE.into(), vec![raw])
        .to_json()
        .unwrap_err();
    assert!(e.to_string().contains("never serialised"), "{e}");
    assert!(serde_json::to_string(&p.actions).is_err());
}

#[test]
fn another_format_or_version_is_refused_by_name() {
    let e =
        SavedPlan::from_json(r#"{"format": "proxops-recording/v1", "version": 1}"#).unwrap_err();
    assert!(matches!(e, SavedPlanError::Format { .. }), "{e}");
    // Version 1 plans carry no digest for a shutdown or a prune: read
    // again, they are refused by name.
    let e =
        SavedPlan::from_json(&format!(r#"{{"format": "{FORMAT}", "version": 1}}"#)).unwrap_err();
    assert!(matches!(e, SavedPlanError::Version { found: 1 }), "{e}");
    assert!(e.to_string().contains("version 1"), "{e}");
}

#[test]
fn a_bad_field_is_named_with_its_line_and_path() {
    let c = demo::clusters().remove(0);
    let live = empty_cluster(&c);
    let p = plan_of(&c, &live, &CloudInitSecrets::default());
    let text = saved_doc(&c, &p, &live).to_json().unwrap();
    let bad = text.replacen(r#""op": "#, r#""op": "explode", "was": "#, 1);
    let e = SavedPlan::from_json(&bad).unwrap_err();
    match &e {
        SavedPlanError::Invalid { path, line, .. } => {
            assert!(path.starts_with("clusters[0].actions[0]"), "{e}");
            assert!(*line > 1, "{e}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn actions_reaching_past_what_the_plan_recorded_are_unobserved() {
    let (c, live, p, vmid) = update_of_one_guest();
    let saved = SavedCluster::new(&p, &c, &live).unwrap();
    assert!(saved::unobserved(&p.actions, &saved.observed).is_empty());

    // A plan file whose record of the guest was cut out (edited by hand):
    // its update can no longer be checked against PVE.
    let mut cut = saved.observed.clone();
    cut.retain(|o| o.object != Touched::Guest(vmid));
    assert_eq!(
        saved::unobserved(&p.actions, &cut),
        vec![Touched::Guest(vmid)]
    );
}
