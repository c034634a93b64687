//! `proxops apply` shows, then asks, then reports progress: the real binary
//! against a fakepve server, without a terminal, with `--yes`, and on a
//! pseudo-terminal (util-linux `script`) answering the question.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::io::{Read, Seek, Write};
use std::process::Stdio;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::json;

/// The demo's `home` cluster reduced to one ISO: one download task.
fn one_iso(pve: &FakePve) -> Repo {
    let repo = Repo::demo_for(pve);
    repo.set_resources(&["../../iso/base/debian-13-netinst.yaml"]);
    repo
}

/// Runs `args` with stdout and stderr into one file, so the order of the
/// plan (stdout) and the progress lines (stderr) is the order written.
fn interleaved(pve: &FakePve, repo: &Repo, args: &[&str]) -> (i32, String) {
    let mut file = tempfile::tempfile().unwrap();
    let status = command(pve, repo, args)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file.try_clone().unwrap())
        .status()
        .unwrap();
    let mut text = String::new();
    file.rewind().unwrap();
    file.read_to_string(&mut text).unwrap();
    (status.code().unwrap_or(-1), text)
}

fn line_of(text: &str, what: &str) -> usize {
    text.lines()
        .position(|l| l.contains(what))
        .unwrap_or_else(|| panic!("no line with {what:?} in:\n{text}"))
}

#[test]
fn apply_without_a_terminal_and_without_yes_refuses_before_any_request() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = one_iso(&pve);
    pve.forget_requests().unwrap();
    let run = proxops(&pve, &repo, &["apply"]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(run.stderr.contains("pass --yes"), "{}", run.all());
    assert!(run.stdout.is_empty(), "{}", run.all());
    let requests = pve.requests().unwrap();
    assert!(
        requests
            .iter()
            .all(|(m, _, _)| !["POST", "PUT", "DELETE"].contains(&m.as_str())),
        "{requests:?}"
    );
    // Known up front: PVE is not even read.
    assert!(requests.is_empty(), "{requests:?}");
    // A dry run writes nothing, so it needs no confirmation.
    let dry = proxops(&pve, &repo, &["apply", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.all());
    assert!(writes(&pve).is_empty());
}

#[test]
fn apply_yes_prints_the_plan_first_then_a_line_per_action_and_still_running_every_10s() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = one_iso(&pve);
    // A download is 5 PVE seconds; at 2.8 real seconds each it runs ~14 s.
    // Its status is read at 0.1, 0.3, 0.7, 1.5, 3.1, 6.3, 11.3 s (the wait
    // doubling up to 5 s): the read at 11.3 s finds it running past 10 s.
    pve.settings(json!({"time_scale": 2.8})).unwrap();
    let (code, text) = interleaved(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(code, 0, "{text}");

    let plan = line_of(&text, "=== will create (1) ===");
    let started = line_of(&text, "ISO/debian-13-netinst: download on pve1");
    let running = line_of(&text, "downloading\u{2026} 10s");
    let done = line_of(&text, "ok in ");
    let results = line_of(&text, "=== home results ===");
    let summary = line_of(&text, "applied: 1 action(s) ok, 0 failed, 0 deferred");
    assert!(
        plan < started && started < running && running < done && done < results,
        "{text}"
    );
    assert!(results < summary, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[started].ends_with(", 1 running)"), "{text}");
    assert!(lines[started].starts_with("home [1/1] "), "{text}");
    // The phase when the download starts, then only one reminder for a
    // 14 s task.
    assert_eq!(text.matches("downloading\u{2026}").count(), 2, "{text}");
    assert_eq!(text.matches("downloading\u{2026} 10s").count(), 1, "{text}");
    // The end line: the elapsed time; task ids are the JSON log's.
    let end = lines[done];
    let secs: f64 = end
        .split("ok in ")
        .nth(1)
        .and_then(|r| r.split('s').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no elapsed time in {end:?}"));
    assert!(secs >= 10.0, "{end}");
    assert!(!end.contains("UPID"), "{end}");
    assert!(
        writes(&pve)
            .iter()
            .any(|(m, p)| m == "POST" && p.ends_with("/storage/local/download-url")),
        "{text}"
    );
}

/// Runs `proxops … apply` on a pseudo-terminal (util-linux `script`), typing
/// `answer` into it.
fn on_a_terminal(pve: &FakePve, repo: &Repo, answer: &str) -> (i32, String) {
    let mut script = on_a_pty(pve, repo, &["apply"]);
    let mut child = script
        .spawn()
        .expect("util-linux `script` runs the binary on a pseudo-terminal");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text.replace('\r', ""))
}

#[test]
fn apply_on_a_terminal_asks_and_goes_on_only_with_yes() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = one_iso(&pve);
    pve.forget_requests().unwrap();

    let (code, text) = on_a_terminal(&pve, &repo, "no\n");
    assert_eq!(code, 1, "{text}");
    let plan = line_of(&text, "=== will create (1) ===");
    let question = line_of(&text, "Apply 1 action(s) to home? Only 'yes' goes on:");
    assert!(plan < question, "{text}");
    assert!(text.contains("apply cancelled"), "{text}");
    assert!(writes(&pve).is_empty(), "{text}");

    let (code, text) = on_a_terminal(&pve, &repo, "yes\n");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("applied: 1 action(s) ok, 0 failed"), "{text}");
    assert!(!writes(&pve).is_empty(), "{text}");
}

/// The progress lines of `stderr` (those of `[i/n]` actions), each elapsed
/// time (`in 0.4s`, `… 20s`) as `<ELAPSED>`: how long fakepve took is not
/// what is checked.
fn progress_lines(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| l.starts_with("home ["))
        .map(|l| {
            let words: Vec<String> = l
                .split(' ')
                .map(|w| {
                    let bare = w.trim_end_matches(':');
                    let timed = bare.strip_suffix('s').is_some_and(|n| {
                        !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.')
                    });
                    if timed {
                        format!("<ELAPSED>{}", &w[bare.len()..])
                    } else {
                        w.to_owned()
                    }
                })
                .collect();
            format!("{}\n", words.join(" "))
        })
        .collect()
}

#[test]
fn progress_names_each_guests_phases_in_order_and_ends_with_a_line_per_guest() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let created = apply(&pve, &repo, &[]);
    assert_eq!(created.code, 0, "{}", created.all());
    // More memory than a VM without memory hotplug takes live: stop-start.
    let p = repo.path().join("vm/base/monitoring.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.replace("memory: 1GiB", "memory: 2GiB")).unwrap();
    let updated = apply(&pve, &repo, &[]);
    assert_eq!(updated.code, 0, "{}", updated.all());

    let (create, update) = (
        progress_lines(&created.stderr),
        progress_lines(&updated.stderr),
    );
    let phases = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_once(": ").map(|(_, what)| what.to_owned()))
            .collect()
    };
    assert_eq!(
        phases(&update),
        [
            "update on pve1 (id 150, worker 1, 1 running)",
            // Written first: PVE holds it pending until the restart.
            "writing the config\u{2026}",
            "shutting down\u{2026}",
            "starting\u{2026}",
            "update ok in <ELAPSED>",
        ],
        "{}",
        updated.stderr
    );
    for text in [&created.stderr, &updated.stderr] {
        assert!(!text.contains("UPID"), "no task ids in the text: {text}");
    }
    insta::assert_snapshot!(
        "progress_create_then_stop_start_update",
        format!(
            "$ proxops apply --yes\n{create}$ proxops apply --yes (memory 1GiB -> 2GiB)\n{update}"
        )
    );
}
