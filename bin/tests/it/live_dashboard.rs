//! The dashboard of a real `proxops run --dry-run` over a drifting
//! fakepve cluster, loaded by headless Chromium (Debian package chromium,
//! tools/install-test-tools.sh): the rendered DOM shows the cluster
//! drifting, the drifting guest's field change as the text plan words it,
//! and a filter that lists exactly the drifting objects; then the page as
//! a picture, on a desktop and on a phone.
//!
//! `PROXOPS_UPDATE_SCREENSHOTS=1` writes the pictures to docs/img/ (the
//! README shows them); otherwise they go to a temporary directory and are
//! only checked to be PNGs of the asked size.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::time::{Duration, Instant};

use live_support::browser::Browser;
use live_support::daemon::{Daemon, get};
use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(120);

/// Rows of the objects table in a dumped DOM: (data-state, object label).
fn object_rows(dom: &str) -> Vec<(String, String)> {
    let table = dom
        .split("<table class=\"objects\">")
        .nth(1)
        .and_then(|t| t.split("</table>").next())
        .unwrap_or("");
    table
        .split("<tr data-state=\"")
        .skip(1)
        .map(|row| {
            let state = row.split('"').next().unwrap().to_owned();
            let label = row
                .split("/objects/")
                .nth(1)
                .and_then(|r| r.split("\">").nth(1))
                .and_then(|r| r.split("</a>").next())
                .unwrap()
                .to_owned();
            (state, label)
        })
        .collect()
}

#[test]
fn a_browser_shows_the_drifting_cluster_its_field_change_and_a_filter() {
    let deadline = Instant::now() + DEADLINE;
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.write(".gitignore", ".proxops-data/\n");
    repo.git(&["init", "-q", "-b", "main"]);
    repo.commit_all("the demo cluster");
    let first = apply(&pve, &repo, &[]);
    assert_eq!(first.code, 0, "{}", first.all());

    // Drift, two ways: someone halves web-01's memory by hand, and a
    // commit changes monitoring's description.
    edit_by_hand(&pve, 101, "memory", "2048");
    repo.set_monitoring_description("metrics and alerting");
    repo.commit_all("monitoring: say what it is for");

    let mut cmd = command(
        &pve,
        &repo,
        &[
            "--git-poll-sec",
            "1",
            "--listen",
            "127.0.0.1:0",
            "run",
            "--dry-run",
        ],
    );
    cmd.env_remove("NO_COLOR");
    let mut daemon = Daemon::spawn(cmd);
    let addr = daemon.address(deadline);
    // A few cycles, so the chart has bars.
    daemon.wait_for(addr, "/status", deadline, "four cycles", |a| {
        let doc: Value = serde_json::from_str(&a.body).unwrap_or_default();
        doc["recent_cycles"]
            .as_array()
            .is_some_and(|c| c.len() >= 4)
    });
    let page = get(addr, "/");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.starts_with("default-src 'none';"), "{csp}");

    let browser = Browser::find();
    let base = format!("http://{addr}");

    // The overview: home is drifting, and says so in words.
    let dom = browser.dom(&format!("{base}/"));
    let card = dom
        .split("<article class=\"card sync-drifting\" id=\"cluster-home\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no drifting home card:\n{dom}"));
    let card = card.split("</article>").next().unwrap();
    assert!(card.contains(">drifting</span>"), "{card}");
    assert!(card.contains("2 drift"), "{card}");
    assert!(card.contains("8 converged"), "{card}");
    let rows = object_rows(&dom);
    assert_eq!(rows.len(), 10, "{rows:?}");

    // The filter: exactly the two drifting guests.
    let filtered = browser.dom(&format!("{base}/?cluster=home&state=drift"));
    let mut rows = object_rows(&filtered);
    rows.sort();
    assert_eq!(
        rows,
        [
            ("drift".to_owned(), "VM/monitoring".to_owned()),
            ("drift".to_owned(), "VM/web-01".to_owned()),
        ]
    );
    assert!(
        filtered.contains("<option value=\"drift\" selected=\"\">"),
        "the chosen state stays chosen"
    );

    // The drifting guest's page: its field change as `proxops diff` words it.
    let guest = browser.dom(&format!("{base}/objects/home/VM/web-01"));
    let plan = guest
        .split("<pre class=\"plan\">")
        .nth(1)
        .and_then(|p| p.split("</pre>").next())
        .unwrap_or_else(|| panic!("no plan on the page:\n{guest}"));
    assert!(
        plan.contains("update         VM/web-01") && plan.contains("~ memory (spec.memory)"),
        "{plan}"
    );
    assert!(plan.contains("2GiB → 4GiB"), "{plan}");
    assert!(
        guest.contains("<code>vm/home/web-01.yaml</code>"),
        "{guest}"
    );

    // Pictures: a desktop and a phone.
    let update = std::env::var_os("PROXOPS_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1");
    let scratch = tempfile::tempdir().unwrap();
    let dir = if update {
        workspace_root().join("docs/img")
    } else {
        scratch.path().to_path_buf()
    };
    std::fs::create_dir_all(&dir).unwrap();
    browser.screenshot(
        &format!("{base}/"),
        (1280, 1500),
        &dir.join("dashboard.png"),
    );
    browser.screenshot(
        &format!("{base}/objects/home/VM/web-01"),
        (390, 844),
        &dir.join("dashboard-phone.png"),
    );
    assert!(Instant::now() < deadline);
}
