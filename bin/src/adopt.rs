//! `proxops adopt --cluster NAME [--replay DIR]`: write manifests for one
//! cluster's live guests, templates and storage files (core's reverse
//! translation), reading PVE with GET requests only.
//!
//! **Architecture Invariant:** adoption never writes to PVE. Every request
//! goes through `ReadOnly`, which refuses anything but GET; a refused
//! request aborts the run as a bug. It never edits `resources.yaml` and
//! never overwrites a manifest an operator may have edited.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use proxops_core::adopt::{self, AdoptOptions};
use proxops_core::names::{NodeName, StorageId};
use proxops_pve::reader::{self, ReadScope};
use proxops_pve::transport::{
    Method, Request, Response, Transport, TransportError, encode_segment,
};

use crate::args::{CommandArgs, GlobalArgs};
use crate::context::{self, Env};
use crate::creds;
use crate::cycle::{self, Source};
use crate::exit::{Exit, Failure};

/// Passes GETs through and refuses (and counts) everything else.
pub struct ReadOnly<'t> {
    inner: &'t dyn Transport,
    refused: AtomicU64,
}

impl<'t> ReadOnly<'t> {
    pub fn new(inner: &'t dyn Transport) -> ReadOnly<'t> {
        ReadOnly {
            inner,
            refused: AtomicU64::new(0),
        }
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Transport for ReadOnly<'_> {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        if request.method != Method::Get {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(TransportError::ReadOnly {
                method: request.method,
                path: request.path.clone(),
            });
        }
        self.inner.call(request)
    }
}

/// The nodes and storages adoption reads: the allowlist (else every node
/// PVE lists), and on each node every storage that can hold guest volumes
/// or ISO/container-template files.
pub fn scope(
    transport: &dyn Transport,
    allowlist: &BTreeSet<NodeName>,
    concurrency: usize,
) -> Result<ReadScope, String> {
    let nodes: BTreeSet<NodeName> = if allowlist.is_empty() {
        let r = transport
            .call(&Request::get("/cluster/nodes"))
            .map_err(|e| e.to_string())?;
        if !r.is_success() {
            return Err(format!(
                "GET /cluster/nodes answered {} {}: configure the cluster's node allowlist (nodes:) to adopt without it",
                r.status, r.reason
            ));
        }
        r.data()
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|row| row.get("node")?.as_str())
                    .filter_map(|n| NodeName::new(n).ok())
                    .collect()
            })
            .unwrap_or_default()
    } else {
        allowlist.clone()
    };
    let mut storages: BTreeSet<(NodeName, StorageId)> = BTreeSet::new();
    for node in &nodes {
        let path = format!("/nodes/{}/storage", encode_segment(node.as_str()));
        let r = transport
            .call(&Request::get(path.clone()))
            .map_err(|e| e.to_string())?;
        if !r.is_success() {
            return Err(format!("GET {path} answered {} {}", r.status, r.reason));
        }
        for s in adopt::storages_to_read(node, r.data()).map_err(|e| e.to_string())? {
            storages.insert((node.clone(), s));
        }
    }
    Ok(ReadScope {
        allowlist: Some(nodes),
        storages,
        concurrency,
    })
}

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let ws = context::load_workspace(g, env)?;
    let known: Vec<&str> = ws
        .loaded
        .config
        .clusters
        .keys()
        .map(|c| c.as_str())
        .collect();
    let cluster = match g.clusters.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(Failure::input(format!(
                "adopt requires an explicit --cluster=<name>; configured clusters: [{}]",
                known.join(" ")
            )));
        }
        _ => {
            return Err(Failure::input(
                "adopt works on one cluster at a time: give --cluster once",
            ));
        }
    };
    let Some(root) = ws.root.clone() else {
        return Err(Failure::input(
            "adopt writes manifests into a work tree: run it inside a checkout or with --git-path",
        ));
    };
    let source = match &a.replay {
        Some(dir) => Source::Replay(dir.clone()),
        None => Source::Live,
    };
    let session = cycle::prepare(g, env, &ws, &source)?;
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
    let guard = ReadOnly::new(ready.transport.as_ref());
    let scope = scope(&guard, &cc.nodes, cc.read_concurrency)
        .map_err(|e| Failure::runtime(format!("adopt: {e}")))?;
    let snapshot = reader::read_snapshot(&guard, &scope)
        .map_err(|e| Failure::runtime(format!("adopt: pve inventory read failed: {e}")))?;
    let sops_ssh_keys = if cc.secrets_file.is_some() {
        let c = creds::resolve(
            cfg,
            cc,
            ws.root.as_deref(),
            &proxops_sops::IdentitySources::from_process_env(),
        )?;
        Some(c.cloud_init.ssh_keys)
    } else {
        None
    };
    let options = AdoptOptions {
        nodes: scope.allowlist.clone().unwrap_or_default(),
        sops_ssh_keys,
    };
    let adoption = adopt::adopt(&prepared.name, &snapshot, &options)
        .map_err(|e| Failure::runtime(format!("adopt: {e}")))?;
    if guard.refused() > 0 {
        return Err(Failure::runtime(format!(
            "adopt: BUG: {} write request(s) were attempted and refused; nothing was written to PVE",
            guard.refused()
        )));
    }
    if adoption.is_empty() {
        println!("no adoptable objects found");
        return Ok(Exit::Ok);
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
        write_atomic(&path, text.as_bytes())
            .map_err(|e| Failure::runtime(format!("adopt: cannot write {rel}: {e}")))?;
        println!("wrote {rel}");
    }
    for rel in &kept {
        println!("kept {rel}: it exists and differs from what PVE holds now (not overwritten)");
    }
    print!("{}", adopt::render_gaps(&adoption));
    if !adoption.resources_lines.is_empty() {
        println!("add to clusters/{}/resources.yaml:", prepared.name);
        for line in &adoption.resources_lines {
            println!("{line}");
        }
    }
    Ok(Exit::Ok)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("yaml.proxops-tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}
