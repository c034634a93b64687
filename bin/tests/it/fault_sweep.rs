//! A fault sweep over every read a plan makes: the demo repository is
//! planned against its recordings with exactly one PVE answer broken at a
//! time (an HTTP error PVE really gives, a missing answer, a body of the
//! wrong shape), for every answer the plan reads.
//!
//! What must hold for each broken answer: the process ends with a documented
//! exit code (never a panic), and the plan holds no action the intact plan
//! does not — a failed read may hold work back or abort the cluster, but it
//! never turns into a create, a download or a prune of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const CLUSTERS: [&str; 2] = ["home", "edge"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// One way to break one recorded answer.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// PVE's own failure text in the reason phrase, as pveproxy sends it.
    Status(u16, &'static str),
    /// The request is not in the recording: replay fails it like a
    /// connection that got no answer.
    Missing,
    /// A 200 whose body is not what PVE sends for that path.
    Body(fn() -> Value),
}

const FAULTS: [Fault; 8] = [
    Fault::Status(500, "got timeout"),
    Fault::Status(595, "No route to host"),
    Fault::Status(401, "permission denied - invalid PVE ticket"),
    Fault::Status(403, "Permission check failed (/vms/101, VM.Audit)"),
    Fault::Missing,
    Fault::Body(|| json!({ "data": null })),
    Fault::Body(|| json!({ "data": "unexpected" })),
    Fault::Body(|| json!({})),
];

fn recording(cluster: &str) -> Value {
    let path = root().join(format!("fixtures/live/demo/{cluster}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The recording with answer `index` broken by `fault`.
fn broken(mut rec: Value, index: usize, fault: Fault) -> Value {
    let responses = rec["responses"].as_array_mut().unwrap();
    match fault {
        Fault::Missing => {
            responses.remove(index);
        }
        Fault::Status(status, reason) => {
            let r = &mut responses[index];
            r["status"] = json!(status);
            r["reason"] = json!(reason);
            r["body"] = json!({ "data": null });
        }
        Fault::Body(body) => responses[index]["body"] = body(),
    }
    rec
}

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn plan(replay_dir: &Path) -> Outcome {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(root())
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .args(["--git-path", "fixtures/repos/demo", "diff", "--replay"])
        .arg(replay_dir)
        .args(["--output", "json"])
        .output()
        .unwrap();
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// Every planned action as (cluster, action, kind, name, node, id).
fn actions(stdout: &str) -> Option<BTreeSet<String>> {
    let plan: Value = serde_json::from_str(stdout).ok()?;
    let mut out = BTreeSet::new();
    for cluster in plan["clusters"].as_array().unwrap() {
        for a in cluster["actions"].as_array().unwrap() {
            let field = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            out.insert(format!(
                "{}: {} {}/{} on {} ({})",
                field(&cluster["name"]),
                field(&a["action"]),
                field(&a["kind"]),
                field(&a["name"]),
                field(&a["node"]),
                field(&a["id"])
            ));
        }
    }
    Some(out)
}

fn write_recordings(dir: &Path, recs: &[(&str, &Value)]) {
    for (cluster, rec) in recs {
        std::fs::write(
            dir.join(format!("{cluster}.json")),
            serde_json::to_vec_pretty(rec).unwrap(),
        )
        .unwrap();
    }
}

#[test]
fn no_single_broken_answer_adds_an_action_or_panics() {
    let intact: Vec<(&str, Value)> = CLUSTERS.iter().map(|c| (*c, recording(c))).collect();
    let dir = tempfile::tempdir().unwrap();
    write_recordings(
        dir.path(),
        &intact.iter().map(|(c, r)| (*c, r)).collect::<Vec<_>>(),
    );
    let baseline = plan(dir.path());
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);
    let allowed = actions(&baseline.stdout).unwrap();
    assert!(allowed.len() > 5, "the demo plan should have work in it");

    let mut runs = 0;
    let mut held_back = 0;
    let mut violations = Vec::new();
    for (cluster, rec) in &intact {
        let count = rec["responses"].as_array().unwrap().len();
        for index in 0..count {
            let path = rec["responses"][index]["path"].as_str().unwrap().to_owned();
            for fault in FAULTS {
                let faulted = broken(rec.clone(), index, fault);
                let others: Vec<(&str, &Value)> = intact
                    .iter()
                    .filter(|(c, _)| c != cluster)
                    .map(|(c, r)| (*c, r))
                    .collect();
                let dir = tempfile::tempdir().unwrap();
                write_recordings(dir.path(), &others);
                write_recordings(dir.path(), &[(cluster, &faulted)]);
                let out = plan(dir.path());
                runs += 1;
                let what = format!("{cluster} {path} {fault:?}");
                if out.stderr.contains("panicked") || ![0, 1].contains(&out.code) {
                    violations.push(format!("{what}: exit {}\n{}", out.code, out.stderr));
                    continue;
                }
                let Some(got) = actions(&out.stdout) else {
                    violations.push(format!("{what}: no JSON plan on stdout\n{}", out.stderr));
                    continue;
                };
                let extra: Vec<&String> = got.difference(&allowed).collect();
                if !extra.is_empty() {
                    violations.push(format!("{what}: actions not in the intact plan: {extra:?}"));
                }
                if got.len() < allowed.len() {
                    held_back += 1;
                }
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    // Most broken answers must visibly cost work: a sweep where nothing is
    // ever held back would mean the faults never reached the planner.
    assert!(
        held_back * 2 > runs,
        "only {held_back} of {runs} broken answers changed the plan"
    );
}
