//! `proxops adopt --cluster NAME [--replay DIR]`: write manifests for one
//! cluster's live guests, templates and storage files (core's reverse
//! translation), reading PVE with GET requests only.
//!
//! **Architecture Invariant:** adoption never writes to PVE. Every request
//! goes through `ReadOnly`, which refuses anything but GET; a refused
//! request aborts the run as a bug. It never edits `resources.yaml` and
//! never overwrites a manifest an operator may have edited.
//!
//! With `--adopt-secrets` (spec §15.6) it also adds the live SSH public
//! keys the cluster's SOPS file lacks to `cloud-init.ssh-keys`, before any
//! manifest is written, so the manifests can reference them. That merge
//! never renames or overwrites an existing entry, never imports a
//! password, keeps the plaintext in memory (the file is re-encrypted for
//! its own recipients and replaced through a sidecar and `rename`), and
//! leaves the file untouched when there is nothing new or anything fails.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use proxops_core::adopt::{self, AdoptOptions, Adoption, GuestPick};
use proxops_core::config::ClusterConfig;
use proxops_core::live::LiveSnapshot;
use proxops_core::names::NodeName;
use proxops_core::wire::{SshKey, SshKeyId, SshKeys};
use proxops_driver::readonly::ReadOnly;
use proxops_pve::reader;
use proxops_pve::transport::Transport;
use proxops_sops::{SecretNode, SecretValue};
use sha2::{Digest, Sha256};

use crate::args::{CommandArgs, GlobalArgs};
use crate::context::{self, Env};
use crate::creds;
use crate::exit::{Exit, Failure};
use crate::out;
use crate::prepare::{self, Source};

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let ws = context::load_workspace(g, env)?;
    let known: Vec<&str> = ws
        .loaded
        .config
        .clusters
        .keys()
        .map(|c| c.as_str())
        .collect();
    let cluster = one_cluster(g, &known)?;
    let Some(root) = ws.root.clone() else {
        return Err(Failure::input(
            "adopt writes manifests into a work tree: run it inside a checkout or with --git-path",
        ));
    };
    let source = match &a.replay {
        Some(dir) => Source::Replay(dir.clone()),
        None => Source::Live,
    };
    let session = prepare::prepare(g, env, &ws, &source)?;
    let Some(prepared) = session
        .clusters
        .into_iter()
        .find(|p| p.name.as_str() == cluster)
    else {
        return Err(Failure::input(format!(
            "--cluster {cluster:?} is not in pve.clusters (known: [{}])",
            known.join(" ")
        )));
    };
    let ready = prepared
        .ready
        .map_err(|reason| Failure::runtime(format!("cluster {cluster}: {reason}")))?;
    let cfg = &ws.loaded.config;
    let cc = &cfg.clusters[&prepared.name];
    if a.adopt_secrets && cc.secrets_file.is_none() {
        return Err(no_secrets_file(&cluster));
    }
    // `--adopt-secrets` rewrites the SOPS file a daemon reads; it takes the
    // cluster like a cycle does, before its read.
    let _lock = if a.adopt_secrets {
        let locking = prepare::locking(cfg, "proxops adopt --adopt-secrets");
        Some(
            locking
                .acquire(&prepared.name, &cc.base_url)
                .map_err(|e| Failure::runtime(format!("adopt: {e}")))?,
        )
    } else {
        None
    };
    let (snapshot, nodes) = read_live(ready.transport.as_ref(), cc)?;
    let pick = match guest_pick(a, &snapshot)? {
        Pick::All => None,
        Pick::One(vmid) => Some(vmid),
    };
    if let (Some(vmid), Some(Ok(desired))) = (pick, ws.loaded.clusters.get(&prepared.name))
        && let Some(o) = adopt::already_managed(desired, vmid)
    {
        out::report(&format!(
            "{} (vmid {vmid}) is already managed by {}: nothing written\n",
            o.r#ref, o.file
        ))?;
        return Ok(Exit::Ok);
    }
    let mut report = String::new();
    let sops_ssh_keys = ssh_keys(a, &ws, cc, &cluster, &snapshot, &nodes, &mut report)?;
    let options = AdoptOptions {
        nodes,
        sops_ssh_keys,
    };
    let mut adoption = adopt::adopt(&prepared.name, &snapshot, &options)
        .map_err(|e| Failure::runtime(format!("adopt: {e}")))?;
    if let Some(vmid) = pick {
        adoption = adopt::only_guest(adoption, vmid);
    }
    if adoption.is_empty() {
        report.push_str(match pick {
            Some(_) => {
                "the guest is not adoptable here (outside the node allowlist?): nothing written\n"
            }
            None => "no adoptable objects found\n",
        });
        out::report(&report)?;
        return Ok(Exit::Ok);
    }
    write_files(&root, &adoption, &mut report)?;
    report.push_str(&adopt::render_gaps(&adoption));
    if !adoption.resources_lines.is_empty() {
        let _ = writeln!(report, "add to clusters/{}/resources.yaml:", prepared.name);
        for line in &adoption.resources_lines {
            let _ = writeln!(report, "{line}");
        }
    }
    // Printed once every file is written: a reader that goes away early
    // cannot leave the adoption half done.
    out::report(&report)?;
    Ok(Exit::Ok)
}

/// The one cluster `--cluster` names: adopt writes one cluster's files.
fn one_cluster(g: &GlobalArgs, known: &[&str]) -> Result<String, Failure> {
    match g.clusters.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Failure::input(format!(
            "adopt requires an explicit --cluster=<name>; configured clusters: [{}]",
            known.join(" ")
        ))),
        _ => Err(Failure::input(
            "adopt works on one cluster at a time: give --cluster once",
        )),
    }
}

fn no_secrets_file(cluster: &str) -> Failure {
    Failure::input(format!(
        "adopt --adopt-secrets: cluster {cluster:?} declares no secrets-file to add SSH keys to"
    ))
}

/// PVE as it is, read through a transport that refuses every write, and the
/// nodes adoption may look at.
fn read_live(
    transport: &dyn Transport,
    cc: &ClusterConfig,
) -> Result<(LiveSnapshot, BTreeSet<NodeName>), Failure> {
    let guard = ReadOnly::new(transport);
    let scope = reader::adoption_scope(&guard, &cc.nodes, cc.read_concurrency)
        .map_err(|e| Failure::runtime(format!("adopt: {e}")))?;
    let mut snapshot = reader::read_snapshot(&guard, &scope)
        .map_err(|e| Failure::runtime(format!("adopt: pve inventory read failed: {e}")))?;
    // The firewall of the cluster and of every guest PVE lists.
    let guests: BTreeSet<_> = snapshot.guests.keys().map(|(_, v)| *v).collect();
    snapshot.firewall = Some(reader::read_firewall(&guard, &snapshot, &guests));
    if guard.refused() > 0 {
        return Err(Failure::runtime(format!(
            "adopt: BUG: {} write request(s) were attempted and refused; nothing was written to PVE",
            guard.refused()
        )));
    }
    Ok((snapshot, scope.allowlist.clone().unwrap_or_default()))
}

/// The SSH keys adoption names by their SOPS entry: with `--adopt-secrets`
/// the live keys merged into the secrets file first (each addition noted in
/// `report`), else the file's keys as they are; none without a file.
fn ssh_keys(
    a: &CommandArgs,
    ws: &context::Workspace,
    cc: &ClusterConfig,
    cluster: &str,
    snapshot: &LiveSnapshot,
    nodes: &BTreeSet<NodeName>,
    report: &mut String,
) -> Result<Option<BTreeMap<String, String>>, Failure> {
    Ok(if a.adopt_secrets {
        let Some(path) = creds::secrets_path(cc, ws.root.as_deref())? else {
            return Err(no_secrets_file(cluster));
        };
        let live = adopt::live_ssh_keys(
            snapshot,
            &AdoptOptions {
                nodes: nodes.clone(),
                sops_ssh_keys: None,
            },
        );
        let merged = merge_ssh_keys(
            &path,
            &live,
            &proxops_sops::IdentitySources::from_process_env(),
            now_rfc3339(),
        )
        .map_err(|e| Failure::runtime(format!("adopt: SOPS merge failed: {e}")))?;
        for name in &merged.added {
            let _ = writeln!(
                report,
                "added cloud-init.ssh-keys.{name} to {}",
                path.file_name().map_or_else(
                    || path.display().to_string(),
                    |f| f.to_string_lossy().into_owned()
                )
            );
        }
        Some(merged.keys)
    } else if cc.secrets_file.is_some() {
        let c = creds::resolve(
            &ws.loaded.config,
            cc,
            ws.root.as_deref(),
            &proxops_sops::IdentitySources::from_process_env(),
        )?;
        Some(c.cloud_init.ssh_keys)
    } else {
        None
    })
}

/// Writes adoption's files into the work tree: every path is checked before
/// the first write, so a symlink leading out of the work tree stops
/// adoption with nothing written; a file that exists and differs is kept.
fn write_files(root: &Path, adoption: &Adoption, report: &mut String) -> Result<(), Failure> {
    for rel in adoption.files.keys() {
        crate::confined::check_inside(root, Path::new(rel))
            .map_err(|e| Failure::runtime(format!("adopt: {e}")))?;
    }
    let mut kept = Vec::new();
    for (rel, text) in &adoption.files {
        let path = root.join(rel);
        match std::fs::read(&path) {
            Ok(existing) if existing == text.as_bytes() => continue,
            Ok(_) => {
                kept.push(rel.clone());
                continue;
            }
            Err(_) => {}
        }
        crate::confined::write_inside(root, Path::new(rel), text.as_bytes())
            .map_err(|e| Failure::runtime(format!("adopt: cannot write {rel}: {e}")))?;
        let _ = writeln!(report, "wrote {rel}");
    }
    for rel in &kept {
        let _ = writeln!(
            report,
            "kept {rel}: it exists and differs from what PVE holds now (not overwritten)"
        );
    }
    Ok(())
}

/// What `--vmid` / `--name` ask adoption for.
enum Pick {
    /// Every guest and file (neither flag).
    All,
    /// This guest alone.
    One(proxops_core::names::Vmid),
}

/// The guest `--vmid` or `--name` names on PVE, or every object without
/// either flag. Both flags, a vmid that is not one, or a guest PVE does
/// not hold is invalid input (exit 2).
fn guest_pick(a: &CommandArgs, snapshot: &LiveSnapshot) -> Result<Pick, Failure> {
    let pick = match (&a.vmid, &a.name) {
        (None, None) => return Ok(Pick::All),
        (Some(_), Some(_)) => {
            return Err(Failure::input("adopt: give --vmid or --name, not both"));
        }
        (Some(v), None) => GuestPick::Vmid(
            v.trim()
                .parse::<u64>()
                .ok()
                .and_then(|n| proxops_core::names::Vmid::new(n).ok())
                .ok_or_else(|| {
                    Failure::input(format!(
                        "adopt --vmid {v:?}: not a guest id (100 to 999999999)"
                    ))
                })?,
        ),
        (None, Some(n)) => GuestPick::Name(n.clone()),
    };
    adopt::pick_guest(snapshot, &pick)
        .map(Pick::One)
        .map_err(|e| Failure::input(format!("adopt {e}; nothing written")))
}

/// What `--adopt-secrets` did to the SOPS file.
#[derive(Debug)]
pub struct MergedKeys {
    /// Every `cloud-init.ssh-keys` entry after the merge (name → key line).
    pub keys: BTreeMap<String, String>,
    /// The names added, sorted; empty = the file was not written.
    pub added: Vec<String>,
}

/// Why the SOPS file could not be merged. It is untouched in every case.
#[derive(Debug)]
pub enum MergeError {
    Sops {
        file: String,
        source: proxops_sops::SopsError,
    },
    Shape {
        file: String,
        reason: String,
    },
    NoRecipients {
        file: String,
    },
    Io {
        file: String,
        what: String,
        reason: String,
    },
}

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MergeError::Sops { file, source } => write!(f, "{file}: {source}"),
            MergeError::Shape { file, reason } => write!(f, "{file}: {reason}"),
            MergeError::NoRecipients { file } => write!(
                f,
                "{file}: the file's sops metadata names no age recipient to re-encrypt for"
            ),
            MergeError::Io { file, what, reason } => {
                write!(f, "{file}: cannot write {what}: {reason}")
            }
        }
    }
}

impl std::error::Error for MergeError {}

/// The deterministic name of an adopted key (spec §15.6):
/// `adopted-<first 8 bytes of SHA-256("sshpki\0<type>\0<blob>") in hex>`,
/// the comment excluded so one key under two comments gets one name.
pub fn adopted_key_name(key: &SshKey) -> String {
    let mut h = Sha256::new();
    h.update(b"sshpki\0");
    h.update(key.key_type.as_bytes());
    h.update(b"\0");
    h.update(key.blob.as_bytes());
    let digest = h.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("adopted-{hex}")
}

/// The value under `key` in a SOPS map, an empty map added last when absent.
fn map_entry<'a>(entries: &'a mut Vec<(String, SecretNode)>, key: &str) -> &'a mut SecretNode {
    let i = match entries.iter().position(|(k, _)| k == key) {
        Some(i) => i,
        None => {
            entries.push((key.into(), SecretNode::Map(Vec::new())));
            entries.len() - 1
        }
    };
    &mut entries[i].1
}

/// Adds every `live` key line whose key (type and blob) is not yet in the
/// SOPS file's `cloud-init.ssh-keys` block under its `adopted-…` name,
/// re-encrypts for the file's own recipients and rule, and replaces the
/// file atomically through `<file>.proxops-tmp`. Existing names are never
/// overwritten; with nothing new the file is not written at all. The
/// plaintext stays in memory.
pub fn merge_ssh_keys(
    path: &Path,
    live: &[String],
    sources: &proxops_sops::IdentitySources,
    lastmodified: String,
) -> Result<MergedKeys, MergeError> {
    let file = path.display().to_string();
    let sops = |source| MergeError::Sops {
        file: file.clone(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| MergeError::Io {
        file: file.clone(),
        what: "it (read)".into(),
        reason: e.kind().to_string(),
    })?;
    let parsed = proxops_sops::SopsFile::parse(&text, &file).map_err(sops)?;
    let identities = proxops_sops::Identities::load(sources).map_err(sops)?;
    let mut doc = parsed.decrypt(&identities).map_err(sops)?;

    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    for (p, value) in doc.leaves() {
        if let Some(name) = p.strip_prefix("cloud-init.ssh-keys.") {
            keys.insert(name.to_owned(), value.to_string());
        }
    }
    let known: BTreeSet<SshKeyId> = keys
        .values()
        .filter_map(|line| SshKeys::from_text(line).ok())
        .filter_map(|k| match k.keys.as_slice() {
            [one] => Some(one.id()),
            _ => None,
        })
        .collect();
    let mut new: BTreeMap<String, String> = BTreeMap::new();
    for line in live {
        let Ok(key) = SshKey::parse(line) else {
            continue;
        };
        if known.contains(&key.id()) {
            continue;
        }
        let name = adopted_key_name(&key);
        if keys.contains_key(&name) {
            // Never overwrite: the guest keeps the `["*"]` sentinel.
            continue;
        }
        new.entry(name).or_insert_with(|| key.to_line());
    }
    if new.is_empty() {
        return Ok(MergedKeys {
            keys,
            added: Vec::new(),
        });
    }

    let shape = |reason: &str| MergeError::Shape {
        file: file.clone(),
        reason: reason.to_owned(),
    };
    let SecretNode::Map(ci_map) = map_entry(doc.entries_mut(), "cloud-init") else {
        return Err(shape("`cloud-init` is not a map"));
    };
    let SecretNode::Map(sk_map) = map_entry(ci_map, "ssh-keys") else {
        return Err(shape("`cloud-init.ssh-keys` is not a map"));
    };
    for (name, line) in &new {
        sk_map.push((
            name.clone(),
            SecretNode::Leaf(SecretValue::str(line.clone())),
        ));
    }

    let recipients = parsed.recipients();
    if recipients.is_empty() {
        return Err(MergeError::NoRecipients { file });
    }
    let cipher = proxops_sops::encrypt(
        &doc,
        &proxops_sops::EncryptOptions {
            recipients,
            rule: parsed.rule().clone(),
            mac_only_encrypted: parsed.mac_only_encrypted(),
            lastmodified,
        },
    )
    .map_err(sops)?;
    let permissions = std::fs::metadata(path).map(|m| m.permissions());
    let written = permissions
        .map_err(|e| crate::confined::WriteRefused::Io {
            path: path.to_path_buf(),
            error: e,
        })
        .and_then(|perms| {
            crate::confined::replace_with_permissions(path, cipher.as_bytes(), perms)
        });
    if let Err(e) = written {
        return Err(MergeError::Io {
            file,
            what: format!("{}.proxops-tmp", path.display()),
            reason: e.to_string(),
        });
    }
    let added: Vec<String> = new.keys().cloned().collect();
    keys.extend(new);
    Ok(MergedKeys { keys, added })
}

/// Now as RFC 3339 UTC whole seconds: the re-encrypted file's `lastmodified`.
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    proxops_core::time::rfc3339(secs)
}
