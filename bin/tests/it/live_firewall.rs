//! PVE's firewall as code against a live (fakepve) cluster: cluster
//! options, aliases, an IP set, a security group and a guest's rules
//! converge in one apply and then plan nothing; a reorder is a move; a
//! rule added by hand to an owned list is drift, to an unowned guest never
//! touched; every write carries a digest, and a hand edit between the
//! plan's read and the write fails cleanly, the next cycle converging;
//! the lock-out guard refuses, its override lets the plan through and
//! names the weakened rail.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::Value;

const CLUSTER_FW: &str = "apiVersion: proxops/v1alpha1
kind: ClusterFirewall
metadata:
  name: home
spec:
  options:
    enable: true
    policy-in: DROP
  rules:
    - {type: in, action: ACCEPT, source: +admins, proto: tcp, dport: \"22,8006\", comment: management}
    - {type: group, action: webservers}
";

const ALIAS_MGMT: &str = "apiVersion: proxops/v1alpha1
kind: FirewallAlias
metadata:
  name: mgmt-net
spec:
  cidr: 10.20.0.0/16
  comment: the management network
";

const ALIAS_BACKUP: &str = "apiVersion: proxops/v1alpha1
kind: FirewallAlias
metadata:
  name: backup-host
spec:
  cidr: 192.0.2.10/32
";

const IPSET_ADMINS: &str = "apiVersion: proxops/v1alpha1
kind: FirewallIPSet
metadata:
  name: admins
spec:
  comment: admins' workstations
  entries:
    - {cidr: 10.20.1.0/24}
    - {cidr: 10.20.1.13, nomatch: true, comment: the kiosk}
    - {cidr: dc/backup-host}
";

const GROUP_WEB: &str = "apiVersion: proxops/v1alpha1
kind: SecurityGroup
metadata:
  name: webservers
spec:
  comment: the web tier
  rules:
    - {type: in, action: ACCEPT, macro: HTTPS}
    - {type: in, action: ACCEPT, proto: tcp, dport: 80}
";

/// The monitoring VM's firewall: a group reference, a rule naming the
/// cluster's IP set, its own alias and `ipfilter-net0`.
const VM_FIREWALL: &str = "  firewall:
    options: {enable: true, ipfilter: true}
    rules:
      - {type: group, action: webservers}
      - {type: in, action: ACCEPT, macro: SSH, source: +dc/admins}
      - {type: in, action: ACCEPT, proto: tcp, dport: 9100, source: self}
    aliases:
      - {name: self, cidr: 192.0.2.50}
    ipsets:
      - name: ipfilter-net0
        entries: [{cidr: 192.0.2.50}]
";

const FILES: [(&str, &str); 5] = [
    ("clusterfirewall/home/home.yaml", CLUSTER_FW),
    ("firewallalias/home/mgmt-net.yaml", ALIAS_MGMT),
    ("firewallalias/home/backup-host.yaml", ALIAS_BACKUP),
    ("firewallipset/home/admins.yaml", IPSET_ADMINS),
    ("securitygroup/home/webservers.yaml", GROUP_WEB),
];

/// The monitoring VM with its firewall, and the cluster's firewall
/// objects.
fn estate(repo: &Repo) {
    let vm = std::fs::read_to_string(repo.path().join("vm/base/monitoring.yaml")).unwrap();
    repo.write("vm/base/monitoring.yaml", &format!("{vm}{VM_FIREWALL}"));
    let mut resources = vec!["../../vm/base/monitoring.yaml".to_owned()];
    for (path, text) in FILES {
        repo.write(path, text);
        resources.push(format!("../../{path}"));
    }
    let refs: Vec<&str> = resources.iter().map(String::as_str).collect();
    repo.set_resources(&refs);
}

fn call(pve: &FakePve, method: &str, path: &str, params: &[(&str, &str)]) -> Value {
    by_hand(pve, method, path, params)
}

fn get(pve: &FakePve, path: &str) -> Value {
    call(pve, "GET", path, &[])
}

/// Each rule of a listing as `type action macro source dport`.
fn rule_words(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            [
                "type", "action", "macro", "source", "proto", "dport", "enable",
            ]
            .iter()
            .filter_map(|k| {
                r.get(*k)
                    .map(|v| v.to_string().trim_matches('"').to_owned())
            })
            .collect::<Vec<_>>()
            .join(" ")
        })
        .collect()
}

fn plan_of(pve: &FakePve, repo: &Repo, extra: &[&str]) -> Value {
    let mut args = vec!["diff", "--output", "json"];
    args.extend_from_slice(extra);
    let run = proxops(pve, repo, &args);
    assert_eq!(run.code, 0, "{}", run.all());
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "home")
        .unwrap()
        .clone()
}

fn actions(plan: &Value) -> Vec<Value> {
    plan["actions"].as_array().cloned().unwrap_or_default()
}

/// The writes fakepve saw below `prefix`.
fn writes_below(pve: &FakePve, prefix: &str) -> Vec<(String, String, String)> {
    pve.requests()
        .unwrap()
        .into_iter()
        .filter(|(m, p, _)| m != "GET" && p.contains(prefix))
        .collect()
}

/// `diff --out` of the repository committed: the file and its document.
fn save(pve: &FakePve, repo: &Repo) -> (std::path::PathBuf, Value) {
    if !repo.path().join(".git").exists() {
        repo.git(&["init", "-q", "-b", "main"]);
    }
    repo.commit_all("firewall");
    let file = repo.path().join("plan.json");
    let run = proxops(pve, repo, &["diff", "--out", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.all());
    let text = std::fs::read_to_string(&file).unwrap();
    (file, serde_json::from_str(&text).unwrap())
}

fn converged(pve: &FakePve, repo: &Repo) {
    let applied = apply(pve, repo, &[]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    let again = proxops(pve, repo, &["diff", "--exit-code"]);
    assert_eq!(again.code, 0, "{}", again.all());
}

#[test]
fn a_firewall_estate_converges_in_one_apply_then_plans_nothing() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    converged(&pve, &repo);

    let options = get(&pve, "/cluster/firewall/options");
    assert_eq!(options["enable"], 1, "{options}");
    // DROP is PVE's default: nothing to write.
    assert!(options.get("policy_in").is_none(), "{options}");
    let aliases = get(&pve, "/cluster/firewall/aliases");
    let names: Vec<(String, String, String)> = aliases
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap_or_default().to_owned();
            (s("name"), s("cidr"), s("comment"))
        })
        .collect();
    assert_eq!(
        names,
        [
            (
                "backup-host".into(),
                "192.0.2.10".into(),
                "[proxops]".into()
            ),
            (
                "mgmt-net".into(),
                "10.20.0.0/16".into(),
                "the management network [proxops]".into()
            ),
        ]
    );
    let sets = get(&pve, "/cluster/firewall/ipset");
    assert_eq!(sets[0]["name"], "admins", "{sets}");
    assert_eq!(
        sets[0]["comment"], "admins' workstations [proxops]",
        "{sets}"
    );
    let mut entries: Vec<String> = get(&pve, "/cluster/firewall/ipset/admins")
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["cidr"].as_str().unwrap(),
                e.get("nomatch").is_some()
            )
        })
        .collect();
    entries.sort();
    assert_eq!(
        entries,
        [
            "10.20.1.0/24 false",
            "10.20.1.13 true",
            "dc/backup-host false"
        ]
    );
    let group = get(&pve, "/cluster/firewall/groups/webservers");
    assert_eq!(
        rule_words(&group),
        ["in ACCEPT HTTPS 1", "in ACCEPT tcp 80 1"],
        "{group}"
    );
    let rules = get(&pve, "/cluster/firewall/rules");
    assert_eq!(
        rule_words(&rules),
        ["in ACCEPT +admins tcp 22,8006 1", "group webservers 1"],
        "{rules}"
    );
    let vm = "/nodes/pve1/qemu/150/firewall";
    assert_eq!(
        rule_words(&get(&pve, &format!("{vm}/rules"))),
        [
            "group webservers 1",
            "in ACCEPT SSH +dc/admins 1",
            "in ACCEPT self tcp 9100 1"
        ]
    );
    let vm_options = get(&pve, &format!("{vm}/options"));
    assert_eq!(vm_options["enable"], 1, "{vm_options}");
    assert_eq!(vm_options["ipfilter"], 1, "{vm_options}");
    let filter = get(&pve, &format!("{vm}/ipset/ipfilter-net0"));
    assert_eq!(filter[0]["cidr"], "192.0.2.50", "{filter}");
    assert_eq!(get(&pve, &format!("{vm}/aliases"))[0]["name"], "self");

    // Every update carried a digest (fakepve logs a DELETE's path without
    // its query: the prune test reads a delete's digest from the plan).
    let puts: Vec<_> = writes_below(&pve, "/firewall")
        .into_iter()
        .filter(|(m, _, _)| m == "PUT")
        .collect();
    assert!(!puts.is_empty());
    for (m, p, body) in puts {
        assert!(body.contains("digest="), "{m} {p} {body}");
    }
}

#[test]
fn reordering_two_rules_is_a_move_and_a_hand_rule_is_drift() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    converged(&pve, &repo);

    // Swap the group's two rules in git: one move, no delete, no create.
    let group = GROUP_WEB.replace(
        "    - {type: in, action: ACCEPT, macro: HTTPS}\n    - {type: in, action: ACCEPT, proto: tcp, dport: 80}\n",
        "    - {type: in, action: ACCEPT, proto: tcp, dport: 80}\n    - {type: in, action: ACCEPT, macro: HTTPS}\n",
    );
    repo.write("securitygroup/home/webservers.yaml", &group);
    let (_, plan) = save(&pve, &repo);
    let acts = plan["clusters"][0]["actions"].as_array().unwrap().clone();
    assert_eq!(acts.len(), 1, "{plan}");
    let calls = acts[0]["work"]["calls"].as_array().unwrap().clone();
    assert_eq!(calls.len(), 1, "{plan}");
    assert_eq!(calls[0]["method"], "PUT", "{plan}");
    assert!(calls[0]["params"].to_string().contains("moveto"), "{plan}");
    // The same plan offline, from a recording of this PVE.
    let live_plan = plan_of(&pve, &repo, &[]);
    let out = tempfile::tempdir().unwrap();
    let rec = proxops(
        &pve,
        &repo,
        &["record", "--out", out.path().to_str().unwrap()],
    );
    assert_eq!(rec.code, 0, "{}", rec.all());
    let replayed = plan_of(&pve, &repo, &["--replay", out.path().to_str().unwrap()]);
    assert_eq!(replayed, live_plan);
    assert_eq!(actions(&replayed).len(), 1, "{replayed}");

    let before = writes_below(&pve, "/firewall").len();
    converged(&pve, &repo);
    let moved = &writes_below(&pve, "/firewall")[before..];
    assert!(moved.iter().all(|(m, _, _)| m == "PUT"), "{moved:?}");
    assert_eq!(
        rule_words(&get(&pve, "/cluster/firewall/groups/webservers")),
        ["in ACCEPT tcp 80 1", "in ACCEPT HTTPS 1"]
    );

    // A rule added by hand to the VM's owned list: drift, shown and removed.
    let vm = "/nodes/pve1/qemu/150/firewall/rules";
    call(
        &pve,
        "POST",
        vm,
        &[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("proto", "tcp"),
            ("dport", "3389"),
            ("enable", "1"),
        ],
    );
    let text = proxops(&pve, &repo, &["diff"]);
    assert!(
        text.stdout.contains("IN ACCEPT -p tcp -dport 3389"),
        "{}",
        text.all()
    );
    converged(&pve, &repo);
    let now = rule_words(&get(&pve, vm));
    assert!(!now.iter().any(|r| r.contains("3389")), "{now:?}");
    assert_eq!(now.len(), 3, "{now:?}");
}

#[test]
fn a_guest_without_spec_firewall_keeps_its_hand_rules() {
    let mut seed = empty_seed();
    seed["guests"] = serde_json::json!([seed_vm(300, "legacy", None, false)]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    let rules = "/nodes/pve1/qemu/300/firewall/rules";
    call(
        &pve,
        "POST",
        rules,
        &[("type", "in"), ("action", "DROP"), ("enable", "1")],
    );
    let applied = apply(&pve, &repo, &[]);
    assert!(
        !writes_below(&pve, "/qemu/300/firewall")
            .iter()
            .any(|(m, _, _)| m != "POST"),
        "{}",
        applied.all()
    );
    assert_eq!(rule_words(&get(&pve, rules)), ["in DROP 1"]);
}

/// A saved plan whose list PVE changed since: refused before any write
/// (the step protocol's own digest checks are tested against fakepve in
/// adapters/pve's `runner_firewall`); the next cycle converges.
#[test]
fn a_hand_edit_after_the_plan_read_writes_nothing_and_the_next_cycle_converges() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    converged(&pve, &repo);

    let group = GROUP_WEB.replace("dport: 80}", "dport: 8080}");
    repo.write("securitygroup/home/webservers.yaml", &group);
    let (saved, _) = save(&pve, &repo);
    let path = "/cluster/firewall/groups/webservers";
    call(
        &pve,
        "POST",
        path,
        &[("type", "in"), ("action", "DROP"), ("enable", "1")],
    );
    let before = writes_below(&pve, "/firewall").len();
    let refused = apply(&pve, &repo, &["--plan", saved.to_str().unwrap()]);
    assert_eq!(refused.code, 1, "{}", refused.all());
    assert!(
        refused.all().contains("nothing was written"),
        "{}",
        refused.all()
    );
    assert_eq!(writes_below(&pve, "/firewall").len(), before);

    // The next cycle plans from what PVE holds, and converges.
    converged(&pve, &repo);
    assert_eq!(
        rule_words(&get(&pve, path)),
        ["in ACCEPT HTTPS 1", "in ACCEPT tcp 8080 1"]
    );
}

#[test]
fn the_lockout_guard_refuses_and_its_override_names_the_weakened_rail() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    // No rule admits 22 or 8006 any more.
    let locked = CLUSTER_FW.replace("dport: \"22,8006\"", "dport: 443");
    repo.write("clusterfirewall/home/home.yaml", &locked);
    let plan = plan_of(&pve, &repo, &[]);
    assert!(
        !actions(&plan)
            .iter()
            .any(|a| a["kind"] == "ClusterFirewall"),
        "{plan}"
    );
    let anomalies = plan["anomalies"].to_string();
    assert!(anomalies.contains("lock operators out"), "{plan}");

    let config = repo.path().join("clusters/home/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}      allow-firewall-lockout: true\n"),
    )
    .unwrap();
    let plan = plan_of(&pve, &repo, &[]);
    let fw: Vec<Value> = actions(&plan)
        .into_iter()
        .filter(|a| a["kind"] == "ClusterFirewall")
        .collect();
    assert_eq!(fw.len(), 1, "{plan}");
    assert!(
        fw[0]["reason"]
            .as_str()
            .unwrap()
            .contains("lock-out guard is OFF (allow-firewall-lockout: true)"),
        "{plan}"
    );
}

/// Every file below `root`, relative, with its text (the repository's
/// own git and data dirs left out).
fn files(root: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn an_adopted_firewall_plans_only_the_marker_claims_then_nothing() {
    let mut seed = empty_seed();
    let mut legacy = seed_vm(300, "legacy", None, false);
    legacy["config"]["cpu"] = serde_json::json!("host");
    seed["guests"] = serde_json::json!([legacy]);
    let pve = FakePve::start(&seed).unwrap();
    let fw = "/cluster/firewall";
    let office = [
        ("name", "Office"),
        ("cidr", "198.51.100.0/24"),
        ("comment", "the office"),
    ];
    call(&pve, "POST", &format!("{fw}/aliases"), &office);
    call(
        &pve,
        "POST",
        &format!("{fw}/ipset"),
        &[("name", "admins"), ("comment", "admins")],
    );
    call(
        &pve,
        "POST",
        &format!("{fw}/ipset/admins"),
        &[("cidr", "198.51.100.7"), ("nomatch", "1")],
    );
    call(
        &pve,
        "POST",
        &format!("{fw}/ipset/admins"),
        &[("cidr", "Office")],
    );
    call(&pve, "POST", &format!("{fw}/groups"), &[("group", "web")]);
    let https = [
        ("type", "in"),
        ("action", "ACCEPT"),
        ("macro", "HTTPS"),
        ("enable", "1"),
    ];
    call(&pve, "POST", &format!("{fw}/groups/web"), &https);
    let mgmt = [
        ("type", "in"),
        ("action", "ACCEPT"),
        ("source", "+admins"),
        ("proto", "tcp"),
        ("dport", "22,8006"),
        ("enable", "1"),
    ];
    call(&pve, "POST", &format!("{fw}/rules"), &mgmt);
    call(&pve, "PUT", &format!("{fw}/options"), &[("enable", "1")]);
    let vm = "/nodes/pve1/qemu/300/firewall";
    call(
        &pve,
        "POST",
        &format!("{vm}/rules"),
        &[("type", "group"), ("action", "web"), ("enable", "1")],
    );
    call(
        &pve,
        "PUT",
        &format!("{vm}/options"),
        &[("enable", "1"), ("dhcp", "1")],
    );

    let repo = empty_repo(&pve);
    let adopted = proxops(&pve, &repo, &["adopt"]);
    assert_eq!(adopted.code, 0, "{}", adopted.all());
    let written: Vec<(String, String)> = files(repo.path())
        .into_iter()
        .filter(|(rel, _)| rel.contains('/') && !rel.starts_with("clusters/"))
        .collect();
    let paths: Vec<&str> = written.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "clusterfirewall/home/home.yaml",
            "firewallalias/home/office.yaml",
            "firewallipset/home/admins.yaml",
            "securitygroup/home/web.yaml",
            "vm/home/legacy.yaml"
        ],
        "{}",
        adopted.all()
    );
    let vm_text = &written[4].1;
    assert!(
        vm_text.contains("firewall:") && vm_text.contains("action: web"),
        "{vm_text}"
    );
    let listed: Vec<String> = paths.iter().map(|p| format!("../../{p}")).collect();
    repo.set_resources(&listed.iter().map(String::as_str).collect::<Vec<_>>());

    // The first plan claims what carries no marker (the objects' comments,
    // the guest's tag) and changes nothing else.
    let plan = plan_of(&pve, &repo, &[]);
    let acts = actions(&plan);
    assert_eq!(acts.len(), 4, "{plan}");
    for a in &acts {
        assert!(a["reason"].as_str().unwrap().contains("claim"), "{a}");
    }
    converged(&pve, &repo);
    assert_eq!(
        get(&pve, &format!("{fw}/aliases"))[0]["comment"],
        "the office [proxops]"
    );
    assert_eq!(
        rule_words(&get(&pve, &format!("{vm}/rules"))),
        ["group web 1"]
    );
}

#[test]
fn a_marked_object_without_a_manifest_is_pruned_under_the_empty_desired_guard() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    converged(&pve, &repo);

    // mgmt-net's manifest leaves the composition: its alias is pruned,
    // the delete carrying the digest of the list it read.
    let without = |drop: &[&str]| {
        let mut resources = vec!["../../vm/base/monitoring.yaml".to_owned()];
        resources.extend(
            FILES
                .iter()
                .filter(|(p, _)| !drop.contains(p))
                .map(|(p, _)| format!("../../{p}")),
        );
        let refs: Vec<&str> = resources.iter().map(String::as_str).collect();
        repo.set_resources(&refs);
    };
    without(&["firewallalias/home/mgmt-net.yaml"]);
    let (_, saved) = save(&pve, &repo);
    let prune = &saved["clusters"][0]["actions"][0];
    assert_eq!(prune["op"], "prune", "{saved}");
    let delete = &prune["work"]["calls"][0];
    assert_eq!(delete["method"], "DELETE", "{saved}");
    assert_eq!(delete["read"]["send_digest"], true, "{saved}");
    assert_eq!(
        delete["read"]["expect"][0],
        "mgmt-net cidr=10.20.0.0/16 # the management network [proxops]",
        "{saved}"
    );
    converged(&pve, &repo);
    let deleted = writes_below(&pve, "/cluster/firewall/aliases/mgmt-net");
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    let aliases = get(&pve, "/cluster/firewall/aliases");
    assert_eq!(aliases.as_array().unwrap().len(), 1, "{aliases}");

    // No alias manifest left: the guard holds the last marked one.
    repo.write(
        "firewallipset/home/admins.yaml",
        &IPSET_ADMINS.replace("    - {cidr: dc/backup-host}\n", ""),
    );
    without(&[
        "firewallalias/home/mgmt-net.yaml",
        "firewallalias/home/backup-host.yaml",
    ]);
    let plan = plan_of(&pve, &repo, &[]);
    assert!(
        plan["anomalies"]
            .to_string()
            .contains("0 desired FirewallAlias"),
        "{plan}"
    );
    assert!(
        !actions(&plan).iter().any(|a| a["kind"] == "FirewallAlias"),
        "{plan}"
    );
}
