//! Which ProxOps cluster each PVE is managed as on this host: a record,
//! `<data-dir>/pve-claims.json`, of every PVE identity (`GET
//! /cluster/status`: the corosync cluster name and its member nodes) a
//! writing command confirmed, with the cluster name it was managed under.
//!
//! Two processes sharding one configuration (`--cluster a`, `--cluster
//! b`) whose `base-url`s reach one PVE in ways no comparison of URLs sees
//! would each prune the other's guests; the in-process comparison
//! ([`crate::cluster`]) cannot see the other process. The record can: a PVE
//! already claimed under another cluster name is refused, before any
//! inventory read. Writing commands (`apply`, `apply --plan`, `run`)
//! claim; read-only ones (`diff`, `status`, `run --dry-run`) only check.
//! A claim is released by removing its entry from the file (a cluster
//! renamed on purpose).
//!
//! Every read and write holds `<data-dir>/locks/pve-claims.lock`
//! (`flock(2)`), so two processes never both find a PVE free. The file is
//! written whole (a new file, then a rename) and never followed through a
//! symlink.
//!
//! Must never: decide from a record it could not read (it fails closed),
//! or hold the lock across a PVE request.

use std::fs::File;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use proxops_core::config::Config;
use proxops_core::names::ClusterName;
use proxops_pve::identity::PveIdentity;
use proxops_pve::runner::unix_now;
use serde_json::{Value, json};

use crate::files::expand_home;

/// The record's file name under the data directory.
pub const FILE: &str = "pve-claims.json";
/// Its lock, under `<data-dir>/locks`.
const LOCK: &str = "pve-claims.lock";
/// The record is a few hundred bytes per PVE.
const MAX_BYTES: u64 = 1024 * 1024;

/// The record of one data directory.
#[derive(Debug, Clone)]
pub struct Claims {
    dir: PathBuf,
}

/// One PVE claimed under a cluster name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub cluster: String,
    pub identity: PveIdentity,
    /// How the claiming configuration reached it, and where it said so.
    pub base_url: String,
    pub declared_in: String,
    /// RFC 3339 UTC: when it was claimed.
    pub since: String,
}

/// Why a PVE may not be managed as `cluster` from this host.
#[derive(Debug)]
pub enum ClaimError {
    /// Another cluster name holds it.
    Taken { by: Box<Claim>, file: PathBuf },
    /// The record or its lock could not be read or written.
    Io { file: PathBuf, message: String },
}

impl std::fmt::Display for ClaimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimError::Taken { by, file } => write!(
                f,
                "this host manages {} as cluster {:?} (base-url {:?} in {}, since {}), recorded in {}: one PVE is never managed under two cluster names (each would prune the other's guests); no inventory read, no write. If {:?} was renamed on purpose, remove its entry from that file",
                by.identity,
                by.cluster,
                by.base_url,
                by.declared_in,
                by.since,
                file.display(),
                by.cluster
            ),
            ClaimError::Io { file, message } => write!(
                f,
                "the record of which cluster manages which PVE ({}) cannot be used: {message}; no inventory read, no write",
                file.display()
            ),
        }
    }
}

impl Claims {
    /// The record under `cfg`'s data directory.
    pub fn new(cfg: &Config) -> Claims {
        Claims {
            dir: expand_home(&cfg.data_dir),
        }
    }

    fn file(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// Whether the PVE `identity` may be managed as `cluster`: no other
    /// cluster name holds it. With `record`, the claim is written (or its
    /// members brought up to date) while the lock is held.
    pub fn check(
        &self,
        cluster: &ClusterName,
        identity: &PveIdentity,
        reached: (&str, &str),
        record: bool,
    ) -> Result<(), ClaimError> {
        let file = self.file();
        let io = |message: String| ClaimError::Io {
            file: file.clone(),
            message,
        };
        let _held = self.lock().map_err(io)?;
        let mut claims = read(&file).map_err(io)?;
        if let Some(by) = claims
            .iter()
            .find(|c| c.cluster != cluster.as_str() && c.identity.same_pve(identity))
        {
            return Err(ClaimError::Taken {
                by: Box::new(by.clone()),
                file,
            });
        }
        if !record {
            return Ok(());
        }
        let (base_url, declared_in) = reached;
        let since = claims
            .iter()
            .find(|c| c.cluster == cluster.as_str() && c.identity.same_pve(identity))
            .map(|c| c.since.clone())
            .unwrap_or_else(|| proxops_core::time::rfc3339(unix_now()));
        let mine = Claim {
            cluster: cluster.as_str().to_owned(),
            identity: identity.clone(),
            base_url: base_url.to_owned(),
            declared_in: declared_in.to_owned(),
            since,
        };
        if claims.contains(&mine) {
            return Ok(());
        }
        // A cluster name stands for one PVE: the claim follows it.
        claims.retain(|c| c.cluster != cluster.as_str());
        claims.push(mine);
        claims.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        write(&file, &claims).map_err(io)
    }

    /// Takes the record's lock, creating its folder (0700) and file (0600)
    /// as needed; never through a symlink.
    fn lock(&self) -> Result<File, String> {
        let locks = self.dir.join("locks");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&locks)
            .map_err(|e| format!("{}: {e}", locks.display()))?;
        let path = locks.join(LOCK);
        let file = crate::files::open_lock_file(&path)?;
        file.lock()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(file)
    }
}

/// The claims in `file`; none when there is no file yet.
fn read(file: &Path) -> Result<Vec<Claim>, String> {
    let text = match crate::files::read_capped_nofollow(file, MAX_BYTES) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.to_string()),
    };
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("not the record ProxOps writes: {e}"))?;
    let rows = doc
        .get("claims")
        .and_then(Value::as_array)
        .ok_or("not the record ProxOps writes: no claims list")?;
    rows.iter()
        .map(|r| claim_of(r).ok_or_else(|| format!("an entry ProxOps cannot read: {r}")))
        .collect()
}

fn claim_of(r: &Value) -> Option<Claim> {
    let text = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
    let nodes = r
        .get("nodes")?
        .as_array()?
        .iter()
        .map(|n| {
            let pair = n.as_array()?;
            Some((
                pair.first()?.as_str()?.to_owned(),
                pair.get(1)?.as_str()?.to_owned(),
            ))
        })
        .collect::<Option<_>>()?;
    Some(Claim {
        cluster: text("cluster")?,
        identity: PveIdentity {
            cluster: text("pve-cluster"),
            nodes,
        },
        base_url: text("base-url")?,
        declared_in: text("declared-in")?,
        since: text("since")?,
    })
}

/// Writes the record whole: a new file beside it, then a rename.
fn write(file: &Path, claims: &[Claim]) -> Result<(), String> {
    let rows: Vec<Value> = claims
        .iter()
        .map(|c| {
            json!({
                "cluster": c.cluster,
                "pve-cluster": c.identity.cluster,
                "nodes": c.identity.nodes.iter().map(|(n, ip)| json!([n, ip])).collect::<Vec<_>>(),
                "base-url": c.base_url,
                "declared-in": c.declared_in,
                "since": c.since,
            })
        })
        .collect();
    let doc = json!({"format": "proxops-pve-claims", "version": 1, "claims": rows});
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())? + "\n";
    crate::files::write_atomically(file, text.as_bytes())
        .map_err(|e| format!("{}: {e}", file.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn pve(cluster: Option<&str>, nodes: &[(&str, &str)]) -> PveIdentity {
        PveIdentity {
            cluster: cluster.map(str::to_owned),
            nodes: nodes
                .iter()
                .map(|(n, ip)| ((*n).to_owned(), (*ip).to_owned()))
                .collect::<BTreeSet<_>>(),
        }
    }

    fn name(n: &str) -> ClusterName {
        ClusterName::new(n).unwrap()
    }

    fn claims(dir: &Path) -> Claims {
        Claims {
            dir: dir.to_path_buf(),
        }
    }

    const AT: (&str, &str) = ("https://pve1:8006", "clusters/home/config.yaml");

    #[test]
    fn a_pve_claimed_under_one_name_is_refused_under_another() {
        let dir = tempfile::tempdir().unwrap();
        let c = claims(dir.path());
        let lab = pve(Some("lab"), &[("pve1", "10.0.0.1"), ("pve2", "10.0.0.2")]);
        // Checking alone records nothing.
        c.check(&name("home"), &lab, AT, false).unwrap();
        c.check(&name("edge"), &lab, AT, true).unwrap();
        c.check(&name("edge"), &lab, AT, true).unwrap();
        let e = c.check(&name("home"), &lab, AT, false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("as cluster \"edge\""), "{text}");
        assert!(text.contains(FILE), "{text}");
        // Seen from another member, with a new node: still the same PVE.
        let grown = pve(Some("lab"), &[("pve2", "10.0.0.2"), ("pve3", "10.0.0.3")]);
        assert!(c.check(&name("home"), &grown, AT, true).is_err());
        // Another PVE is free.
        let other = pve(None, &[("pve1", "10.9.0.1")]);
        c.check(&name("home"), &other, AT, true).unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(text.contains("\"cluster\": \"edge\"") && text.contains("\"cluster\": \"home\""));
    }

    #[test]
    fn an_unreadable_record_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "not json").unwrap();
        let c = claims(dir.path());
        let e = c
            .check(&name("home"), &pve(None, &[("pve1", "")]), AT, false)
            .unwrap_err();
        assert!(matches!(e, ClaimError::Io { .. }), "{e}");
        // A symlink in its place is not followed.
        std::fs::remove_file(dir.path().join(FILE)).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join(FILE)).unwrap();
        assert!(
            c.check(&name("home"), &pve(None, &[("pve1", "")]), AT, false)
                .is_err()
        );
    }
}
