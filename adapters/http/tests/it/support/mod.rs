//! A plain std `TcpStream` HTTP/1.1 client for loopback tests, and a
//! realistic status store.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use proxops_core::action::AnomalyType;
use proxops_core::exec::{ObjectReport, ObjectState};
use proxops_core::plan::AbortCause;
use proxops_core::report::{
    ActionKey, ActionResult, ClusterReport, CycleCounts, CycleReport, CycleResult, StatusStore,
};

pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request and reads the whole answer (`Connection: close`).
pub fn request(addr: SocketAddr, method: &str, target: &str) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

pub fn get(addr: SocketAddr, target: &str) -> Answer {
    request(addr, "GET", target)
}

pub const START: u64 = 1_798_675_200;

fn obj(kind: &str, name: &str, id: &str, state: ObjectState) -> ObjectReport {
    ObjectReport {
        kind: kind.into(),
        name: name.into(),
        node: "pve1".into(),
        id: id.into(),
        state,
        last_action: None,
        last_error: None,
        prune_reason: None,
        last_converged_at: None,
    }
}

/// One cycle over two clusters: `prod` executed (a create, a failed update
/// whose error carries quotes and a backslash, a prune, a deferred prune,
/// an anomaly); `lab` could not read PVE.
pub fn cycle(started_at: u64) -> CycleReport {
    let mut db = obj("LXC", "db", "200", ObjectState::Failed);
    db.last_action = Some("update".into());
    db.last_error = Some(r#"PVE 500: unable to parse "C:\x" value"#.into());
    let key = |kind: &str, action: &str, result| ActionKey {
        kind: kind.into(),
        action: action.into(),
        result,
    };
    let prod = ClusterReport {
        name: "prod".into(),
        result: CycleResult::Ok,
        aborted: false,
        abort_reason: String::new(),
        counts: CycleCounts {
            objects: 3,
            actions_ok: 2,
            actions_error: 1,
            pruned: 1,
            prune_deferred: 1,
            skipped: 0,
            anomalies: 1,
        },
        objects: vec![
            obj("VM", "web", "100", ObjectState::Converged),
            db,
            obj("VM", "old", "300", ObjectState::Pruned),
        ],
        anomalies: BTreeMap::from([(AnomalyType::LiveOnlySlot, 1)]),
        actions: BTreeMap::from([
            (key("VM", "create", ActionResult::Ok), 1),
            (key("VM", "prune", ActionResult::Ok), 1),
            (key("LXC", "update", ActionResult::Error), 1),
        ]),
        prune_deferred: BTreeMap::from([("VM".to_owned(), 1)]),
        desired_stale: false,
        read_only: false,
        pve_read_at: Some(started_at + 3),
        pending: Vec::new(),
        self_guests: Vec::new(),
        planned: Vec::new(),
        object_anomalies: Vec::new(),
        manifests: BTreeMap::new(),
        holds: Vec::new(),
        elapsed_ms: 0,
    };
    CycleReport {
        commit: "0123456789abcdef0123456789abcdef01234567".into(),
        started_at,
        finished_at: started_at + 12,
        duration_ms: 12_000,
        complete: true,
        git_fetched_at: Some(started_at + 1),
        clusters: vec![
            ClusterReport::aborted(
                "lab",
                AbortCause::PveRead,
                "pve inventory read failed: connection refused",
            ),
            prod,
        ],
    }
}

pub fn store() -> StatusStore {
    let mut s = StatusStore::new(START - 30);
    s.record_cycle(cycle(START));
    s.add_pve_requests(&[
        ("GET".into(), "ok".into(), 40),
        ("POST".into(), "error".into(), 1),
    ]);
    s
}

/// The workspace root (this crate lives at `adapters/http`).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// An external program the tests drive: `$PROXOPS_TOOLS_DIR/bin/<name>`
/// (default `<workspace>/.tools/bin`), else `PATH`. Missing is a failure
/// naming the install script, never a silent pass.
pub fn tool(name: &str, debian_package: &str) -> std::path::PathBuf {
    let tools = std::env::var_os("PROXOPS_TOOLS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools"));
    let candidate = tools.join("bin").join(name);
    if candidate.is_file() {
        return candidate;
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "{name} not found (looked in {} and PATH): run tools/install-test-tools.sh \
         (it installs the Debian package {debian_package}) and try again",
        candidate.display()
    );
}
