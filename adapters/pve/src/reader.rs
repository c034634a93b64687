//! The snapshot reader: one cluster's PVE state read into a `LiveSnapshot`.
//!
//! Requests, for N guests and S (node, storage) pairs: exactly one
//! `GET /cluster/resources`, one `GET /cluster/replication` (a replicated
//! guest is destroyed only with `purge`; a server or recording without the
//! endpoint has no jobs), one `GET /pools`, one `GET /cluster/backup` and
//! one `GET /cluster/ha/resources` (the cluster-level kinds,
//! `proxops_core::cluster::KINDS`), then one `GET /nodes/{n}/{qemu|lxc}/{id}/pending`
//! per guest on an online node in scope, one bare
//! `GET /nodes/{n}/storage/{s}/content` per requested pair (never the
//! per-type `…/content/iso` form: PVE 9.2 answers 500 there on dir storage
//! [PROBE]), one `GET /nodes/{n}/qemu?full=1` per node running VMs
//! (`qmpstatus` tells a paused VM), then one `GET …/qemu/{id}/cloudinit`
//! per running VM with a cloud-init drive. Reads after the inventory run
//! with bounded concurrency, the cluster-level listings in one pool with
//! the per-guest, storage and VM-list reads (none needs another's
//! answer); results are assembled in a fixed order whatever the timing.
//!
//! `/pending` rather than `/config`: it lists every key with its current
//! value, its queued value and a queued removal, plus the `digest` (real
//! PVE: pve-guest-common `GuestHelpers.pm` `config_with_pending_array`,
//! called by qemu-server `API2/Qemu.pm` `vm_pending` and pve-container
//! `API2/LXC.pm` `vm_pending`), so one request gives both the config as PVE
//! will have it and what is still waiting for a restart. A server without
//! the endpoint (a 404 or 501, or a recording made before ProxOps read it)
//! is read through `/config` instead, which shows nothing pending.
//!
//! **Architecture Invariant:** a read that failed stays a failure. Only a
//! config read PVE answers with "does not exist" drops a guest (it vanished
//! between the two reads); every other failure is kept in the snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proxops_core::firewall::live::{LiveList, LiveOptions, LiveRules};
use proxops_core::live::{
    FirewallScope, GuestType, LiveConfig, LiveFirewall, LiveGuest, LiveSnapshot, NodeState, Power,
    ReadFailure, Replication, StorageContent,
};
use proxops_core::live_text::Envelope;
use proxops_core::names::{Kind, NodeName, StorageId, Vmid};
use proxops_core::wire::{TagSet, json_template_flag, json_to_text, json_vmid};

use proxops_core::step::{self, PveError};

use crate::retry::{pve_message, refusal_hint};
use crate::transport::{Method, Request, Response, Transport, TransportError, encode_segment};

/// What to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadScope {
    /// Nodes ProxOps may look at; `None` = every node. Rows on other nodes
    /// are ignored.
    pub allowlist: Option<BTreeSet<NodeName>>,
    /// The (node, storage) pairs whose content the desired artifacts need.
    pub storages: BTreeSet<(NodeName, StorageId)>,
    /// Most config/content reads in flight at once (0 is treated as 1).
    pub concurrency: usize,
    /// Read PVE's firewall: the cluster's, and the guests' of these vmids
    /// (their manifests declare `spec.firewall`); `None`: the repository
    /// declares none of it for this cluster, nothing is read.
    pub firewall: Option<BTreeSet<Vmid>>,
}

impl ReadScope {
    /// The configuration's default (`reconcile.read-concurrency`), so a
    /// caller without a configuration reads the way a configured one does.
    pub const DEFAULT_CONCURRENCY: usize = proxops_core::config::DEFAULT_READ_CONCURRENCY;

    fn allows(&self, node: &NodeName) -> bool {
        self.allowlist.as_ref().is_none_or(|a| a.contains(node))
    }
}

impl Default for ReadScope {
    fn default() -> ReadScope {
        ReadScope {
            allowlist: None,
            storages: BTreeSet::new(),
            concurrency: ReadScope::DEFAULT_CONCURRENCY,
            firewall: None,
        }
    }
}

/// The cluster could not be read at all: no snapshot, the cluster's cycle
/// aborts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error("cluster inventory unreadable: {0}")]
    ClusterResources(ReadFailure),
}

const RESOURCES_PATH: &str = "/cluster/resources";

/// The nodes and storages adoption reads: the allowlist (else every node
/// PVE lists), and on each node every storage that can hold guest volumes
/// or ISO/container-template files.
pub fn adoption_scope(
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
        for s in proxops_core::adopt::storages_to_read(node, r.data()).map_err(|e| e.to_string())? {
            storages.insert((node.clone(), s));
        }
    }
    Ok(ReadScope {
        allowlist: Some(nodes),
        storages,
        concurrency,
        firewall: None,
    })
}

/// Reads one cluster's live state. See the module docs for the requests.
pub fn read_snapshot(
    transport: &dyn Transport,
    scope: &ReadScope,
) -> Result<LiveSnapshot, ReadError> {
    let resources = Request::get(RESOURCES_PATH);
    let what = describe(&resources);
    let acting_as = transport.acting_as();
    let acting_as = acting_as.as_deref();
    let asked = Instant::now();
    let response = match recorded_inventory(transport, &resources) {
        Some(response) => response,
        None => transport.call(&resources).map_err(|e| {
            ReadError::ClusterResources(ReadFailure {
                what: what.clone(),
                message: e.cause(),
            })
        })?,
    };
    // From a recording the "round trip" was parsing the inventory: no
    // network wait for spread reads to overlap, so none is spread.
    let round_trip = if transport.is_local() {
        Duration::ZERO
    } else {
        asked.elapsed()
    };
    if !response.is_success() {
        return Err(ReadError::ClusterResources(ReadFailure {
            what,
            message: status_message(&response, acting_as),
        }));
    }
    let rows = response.data().as_array().ok_or_else(|| {
        ReadError::ClusterResources(ReadFailure {
            what: what.clone(),
            message: "expected a JSON array in data".into(),
        })
    })?;

    let mut snap = LiveSnapshot::default();
    let mut failures: Vec<ReadFailure> = Vec::new();
    // Guests whose resource row could not be fully read: no config read.
    let mut row_problems: BTreeMap<(NodeName, Vmid), String> = BTreeMap::new();

    for row in rows {
        let text = |k: &str| row.get(k).and_then(json_to_text);
        let (Some(kind), Some(node_text)) = (text("type"), text("node")) else {
            continue;
        };
        let Ok(node) = NodeName::new(&node_text) else {
            failures.push(ReadFailure {
                what: what.clone(),
                message: format!("ignored a row with node name {node_text:?}"),
            });
            continue;
        };
        if !scope.allows(&node) {
            continue;
        }
        if kind == "node" {
            snap.nodes
                .insert(node, NodeState::from_status(text("status").as_deref()));
            continue;
        }
        if kind == "storage" {
            // `shared` is storage.cfg's flag (pve-manager API2Tools.pm
            // `extract_storage_stats`): what decides whether a template's
            // volumes can be cloned to another node. No extra request.
            if let Some(id) = text("storage").and_then(|s| StorageId::new(&s).ok()) {
                let shared = text("shared").is_some_and(|v| v == "1");
                if let Some(plugin) = text("plugintype") {
                    snap.storage_types.insert(id.clone(), plugin);
                }
                // storage.cfg's `content` (pve-manager API2Tools.pm
                // `extract_storage_stats`), one list per storage.
                if let Some(content) = text("content") {
                    let types = content.split(',').map(str::trim).filter(|t| !t.is_empty());
                    snap.storage_contents
                        .entry(id.clone())
                        .or_default()
                        .extend(types.map(str::to_owned));
                }
                *snap.shared_storage.entry(id).or_default() |= shared;
            }
            continue;
        }
        let Some(guest_type) = GuestType::from_resource_type(&kind) else {
            continue;
        };
        let Some(vmid_value) = row.get("vmid").filter(|v| !v.is_null()) else {
            continue;
        };
        let vmid = match json_vmid(vmid_value) {
            Ok(v) => v,
            Err(e) => {
                failures.push(ReadFailure {
                    what: what.clone(),
                    message: format!("ignored a {kind} row on {node}: {e}"),
                });
                continue;
            }
        };
        let mut problems = Vec::new();
        let template = json_template_flag(row.get("template")).unwrap_or_else(|e| {
            problems.push(e.to_string());
            false
        });
        let tags = match row.get("tags").and_then(json_to_text) {
            None => TagSet::default(),
            Some(t) => TagSet::parse(&t).unwrap_or_else(|e| {
                problems.push(e.to_string());
                TagSet::default()
            }),
        };
        if !problems.is_empty() {
            row_problems.insert((node.clone(), vmid), problems.join("; "));
        }
        if let Some(pool) = text("pool").filter(|p| !p.is_empty()) {
            snap.cluster.guest_pools.insert(vmid, pool);
        }
        let guest = LiveGuest {
            node: node.clone(),
            vmid,
            guest_type,
            name: text("name").unwrap_or_default(),
            template,
            power: Power::from_status(text("status").as_deref()),
            lock: text("lock").filter(|l| !l.is_empty()),
            ha_state: text("hastate").filter(|h| !h.is_empty()),
            tags,
            config: Err(ReadFailure {
                what: String::new(),
                message: "not read".into(),
            }),
        };
        snap.guests.insert((node, vmid), guest);
    }
    // The inventory's rows are read: its JSON tree (the largest single
    // thing held for a 10,000-guest cluster) goes before the configs come.
    drop(response);
    // Nodes the scope names or guests sit on, but PVE listed no node row for.
    let mentioned: Vec<NodeName> = scope
        .allowlist
        .iter()
        .flatten()
        .cloned()
        .chain(snap.guests.keys().map(|(n, _)| n.clone()))
        .collect();
    for n in mentioned {
        snap.nodes.entry(n).or_insert(NodeState::Unknown);
    }

    // Plan the cluster-wide listings, then the per-guest and per-storage
    // reads: none needs another's answer, so all go through one bounded
    // pool (the listings first, as they were read before).
    let mut jobs: Vec<Request> = proxops_core::cluster::KINDS
        .iter()
        .map(|ep| Request::get(ep.collection))
        .collect();
    let mut config_jobs: Vec<((NodeName, Vmid), usize)> = Vec::new();
    for (key, guest) in snap.guests.iter_mut() {
        let req = Request::get(format!("{}/pending", guest_path(guest)));
        let what = describe(&req);
        if let Some(problem) = row_problems.get(key) {
            guest.config = Err(ReadFailure {
                what: describe(&resources),
                message: problem.clone(),
            });
            continue;
        }
        match snap
            .nodes
            .get(&guest.node)
            .copied()
            .unwrap_or(NodeState::Unknown)
        {
            NodeState::Online => {
                config_jobs.push((key.clone(), jobs.len()));
                jobs.push(req);
            }
            state => {
                guest.config = Err(ReadFailure {
                    what,
                    message: node_not_readable(&guest.node, state),
                })
            }
        }
    }
    let mut storage_jobs: Vec<((NodeName, StorageId), usize)> = Vec::new();
    for (node, storage) in &scope.storages {
        let req = Request::get(format!(
            "/nodes/{}/storage/{}/content",
            encode_segment(node.as_str()),
            encode_segment(storage.as_str())
        ));
        let what = describe(&req);
        let key = (node.clone(), storage.clone());
        if !scope.allows(node) {
            snap.storage.insert(
                key,
                Err(ReadFailure {
                    what,
                    message: format!("node {node} is outside the node allowlist"),
                }),
            );
            continue;
        }
        match snap.nodes.get(node).copied().unwrap_or(NodeState::Unknown) {
            NodeState::Online => {
                storage_jobs.push((key, jobs.len()));
                jobs.push(req);
            }
            state => {
                snap.storage.insert(
                    key,
                    Err(ReadFailure {
                        what,
                        message: node_not_readable(node, state),
                    }),
                );
            }
        }
    }

    // One list per node running VMs: `qmpstatus` shows the paused ones.
    let mut paused_jobs: Vec<usize> = Vec::new();
    let running_nodes: BTreeSet<&NodeName> = snap
        .guests
        .values()
        .filter(|g| g.guest_type == GuestType::Qemu && g.power == Power::Running)
        .filter(|g| snap.nodes.get(&g.node) == Some(&NodeState::Online))
        .map(|g| &g.node)
        .collect();
    for node in running_nodes {
        paused_jobs.push(jobs.len());
        jobs.push(Request::new(
            Method::Get,
            format!("/nodes/{}/qemu", encode_segment(node.as_str())),
            vec![("full".into(), "1".into())],
        ));
    }

    // A recording's answers wait on nothing: they are read on this
    // thread, each guest's config straight from the recording's text
    // (parsed into `Value` trees first, a 10,000-guest recording's config
    // answers were the longest stretch of a `diff --replay` after
    // planning). A second thread made it no faster and its heap, holding
    // half the configs, cost 8 MiB more at the peak. Over a network the
    // reading threads bring back answers and the configs are made here,
    // as they always were.
    let local = transport.is_local();
    let is_config: BTreeSet<usize> = config_jobs.iter().map(|(_, idx)| *idx).collect();
    let bound = if local { 1 } else { scope.concurrency };
    let mut results = run_bounded_with(&jobs, bound, round_trip, |i, job| {
        if local && is_config.contains(&i) {
            Read::Config(read_guest_config(transport, job, None, acting_as))
        } else {
            Read::Answer(transport.call(job))
        }
    });

    for (idx, ep) in proxops_core::cluster::KINDS.into_iter().enumerate() {
        let Some(listing) = listing_of(&jobs[idx], answer(&mut results, idx), acting_as, ep) else {
            snap.cluster.unsupported.insert(ep.kind);
            snap.cluster
                .listings
                .insert(ep.kind, Ok(Default::default()));
            continue;
        };
        if let Err(f) = &listing {
            failures.push(f.clone());
        }
        if ep.kind == Kind::ReplicationJob {
            // One read serves both: the guest prune rules' view by guest.
            snap.replication = Replication::of_listing(&listing);
        }
        snap.cluster.listings.insert(ep.kind, listing);
    }
    for idx in paused_jobs {
        // Unreadable or absent (an older recording): none known paused.
        if let Some(Ok(r)) = answer(&mut results, idx)
            && r.is_success()
        {
            snap.paused.extend(paused_vms(r.data()));
        }
    }

    for (key, idx) in config_jobs {
        let read = match results.get_mut(idx).and_then(Option::take) {
            Some(Read::Config(read)) => read,
            Some(Read::Answer(answer)) => {
                read_guest_config(transport, &jobs[idx], Some(answer), acting_as)
            }
            None => read_config(describe(&jobs[idx]), None, true, acting_as),
        };
        match read {
            ConfigRead::Vanished => {
                snap.guests.remove(&key);
            }
            ConfigRead::Read(result) => {
                if let Some(g) = snap.guests.get_mut(&key) {
                    g.config = result;
                }
            }
        }
    }
    read_cloudinit_pending(transport, &mut snap, scope.concurrency, &mut failures);
    if let Some(guests) = &scope.firewall {
        let fw = read_firewall(transport, &snap, guests);
        failures.extend(fw.cluster.failures().into_iter().cloned());
        failures.extend(fw.groups.as_ref().err().cloned());
        failures.extend(
            fw.group_rules
                .values()
                .filter_map(|r| r.as_ref().err().cloned()),
        );
        for g in fw.guests.values() {
            failures.extend(g.failures().into_iter().cloned());
        }
        snap.firewall = Some(fw);
    }
    for (key, idx) in storage_jobs {
        let what = describe(&jobs[idx]);
        let content = match answer(&mut results, idx) {
            None => Err(ReadFailure {
                what,
                message: "read did not complete".into(),
            }),
            Some(Err(e)) => Err(ReadFailure {
                what,
                message: e.cause(),
            }),
            Some(Ok(r)) if !r.is_success() => Err(ReadFailure {
                what,
                message: status_message(&r, acting_as),
            }),
            Some(Ok(r)) => StorageContent::from_json(r.data()).map_err(|e| ReadFailure {
                what,
                message: e.to_string(),
            }),
        };
        snap.storage.insert(key, content);
    }

    failures.extend(
        snap.guests
            .values()
            .filter_map(|g| g.config.as_ref().err().cloned()),
    );
    failures.extend(
        snap.storage
            .values()
            .filter_map(|c| c.as_ref().err().cloned()),
    );
    failures.sort();
    failures.dedup();
    snap.failures = failures;
    Ok(snap)
}

/// One `GET …/cloudinit` per running VM with a cloud-init drive: what the
/// guest has not seen yet is pending (PVE 9.2 fast-plugs cloud-init keys,
/// so `/pending` never lists them). A server or recording without the
/// endpoint shows nothing pending; a failed read is kept as a failure.
fn read_cloudinit_pending(
    transport: &dyn Transport,
    snap: &mut LiveSnapshot,
    bound: usize,
    failures: &mut Vec<ReadFailure>,
) {
    let keys: Vec<(NodeName, Vmid)> = snap
        .guests
        .iter()
        .filter(|(_, g)| g.guest_type == GuestType::Qemu && g.power == Power::Running)
        .filter(|(_, g)| g.config.as_ref().is_ok_and(LiveConfig::has_cloudinit_drive))
        .map(|(k, _)| k.clone())
        .collect();
    let jobs: Vec<Request> = keys
        .iter()
        .filter_map(|k| snap.guests.get(k))
        .map(|g| Request::get(format!("{}/cloudinit", guest_path(g))))
        .collect();
    // Few and after the config reads: started at once, not spread.
    let results = run_bounded(transport, &jobs, bound, Duration::ZERO);
    for ((key, job), result) in keys.iter().zip(&jobs).zip(results) {
        let answer = match result {
            Some(Ok(r)) if r.is_success() => r,
            Some(Ok(r)) if r.status == 404 || r.status == 501 => continue,
            Some(Err(TransportError::NotRecorded { .. })) => continue,
            other => {
                let message = match other {
                    Some(Ok(r)) => status_message(&r, None),
                    Some(Err(e)) => e.cause(),
                    None => "read did not complete".into(),
                };
                failures.push(ReadFailure {
                    what: describe(job),
                    message,
                });
                continue;
            }
        };
        if let Some(Ok(cfg)) = snap.guests.get_mut(key).map(|g| g.config.as_mut())
            && let Err(e) = cfg.add_cloudinit_pending(answer.data())
        {
            failures.push(ReadFailure {
                what: describe(job),
                message: e.to_string(),
            });
        }
    }
}

/// The VMs a `GET /nodes/{n}/qemu?full=1` answer shows paused (QEMU's
/// status `paused`, `prelaunch` or `suspended`: qemu-server
/// `QemuServer.pm` `vm_is_paused`).
fn paused_vms(data: &serde_json::Value) -> Vec<Vmid> {
    data.as_array()
        .into_iter()
        .flatten()
        .filter(|vm| {
            matches!(
                vm.get("qmpstatus").and_then(serde_json::Value::as_str),
                Some("paused" | "prelaunch" | "suspended")
            )
        })
        .filter_map(|vm| json_vmid(vm.get("vmid")?).ok())
        .collect()
}

/// One cluster-level kind's listing (`GET /pools`, `GET /cluster/backup`)
/// from its answer (`None` from the pool: a read that did not complete).
/// No answer in the recording being replayed is no objects (a recording
/// made before ProxOps read them; re-record to see them); any other
/// failure is kept, and nothing of the kind is then created or pruned.
/// `None`: this PVE predates the endpoint (`Endpoints::since`; PVE answers
/// an unknown API path with 501, pve-http-server `AnyEvent.pm`
/// `handle_api2_request` "Method '…' not implemented").
fn listing_of(
    request: &Request,
    outcome: Option<Result<Response, TransportError>>,
    acting_as: Option<&str>,
    ep: proxops_core::cluster::Endpoints,
) -> Option<proxops_core::cluster::Listing> {
    let fail = |message: String| ReadFailure {
        what: describe(request),
        message,
    };
    let Some(outcome) = outcome else {
        return Some(Err(fail("read did not complete".into())));
    };
    if ep.since.is_some() && lacks_endpoint(&outcome) {
        return None;
    }
    Some(match outcome {
        Err(TransportError::NotRecorded { .. }) => Ok(Default::default()),
        Err(e) => Err(fail(e.cause())),
        Ok(r) if !r.is_success() => Err(fail(status_message(&r, acting_as))),
        Ok(r) => ep.parse(r.data()).map_err(|e| fail(e.to_string())),
    })
}

/// PVE's firewall (pve-firewall `API2/Firewall/*.pm`): the cluster's
/// options, rules, aliases, IP sets with their entries and security
/// groups with their rules, and the same lists (no groups) of each live
/// guest among `guests`. One request at a time: a few per scope.
pub fn read_firewall(
    transport: &dyn Transport,
    snap: &LiveSnapshot,
    guests: &BTreeSet<Vmid>,
) -> LiveFirewall {
    let acting_as = transport.acting_as();
    let acting_as = acting_as.as_deref();
    let get = |path: String| fw_get(transport, acting_as, path);
    let groups = get("/cluster/firewall/groups".into())
        .and_then(|(what, data)| LiveList::from_json(&data, "group").map_err(|m| fail(what, m)));
    let mut group_rules = BTreeMap::new();
    if let Ok(list) = &groups {
        for g in &list.entries {
            let path = format!("/cluster/firewall/groups/{}", encode_segment(&g.name));
            let rules = get(path)
                .and_then(|(what, data)| LiveRules::from_json(&data).map_err(|m| fail(what, m)));
            group_rules.insert(g.name.clone(), rules);
        }
    }
    let mut by_guest = BTreeMap::new();
    for g in snap.guests.values().filter(|g| guests.contains(&g.vmid)) {
        let base = format!("{}/firewall", guest_path(g));
        by_guest.insert(g.vmid, read_fw_scope(&get, &base));
    }
    LiveFirewall {
        cluster: read_fw_scope(&get, "/cluster/firewall"),
        groups,
        group_rules,
        guests: by_guest,
    }
}

fn fail(what: String, message: String) -> ReadFailure {
    ReadFailure { what, message }
}

/// One scope's options, rules, aliases and IP sets.
fn read_fw_scope(
    get: &dyn Fn(String) -> Result<(String, serde_json::Value), ReadFailure>,
    base: &str,
) -> FirewallScope {
    let options = get(format!("{base}/options"))
        .and_then(|(what, data)| LiveOptions::from_json(&data).map_err(|m| fail(what, m)));
    let rules = get(format!("{base}/rules"))
        .and_then(|(what, data)| LiveRules::from_json(&data).map_err(|m| fail(what, m)));
    let aliases = get(format!("{base}/aliases"))
        .and_then(|(what, data)| LiveList::from_json(&data, "name").map_err(|m| fail(what, m)));
    let ipsets = get(format!("{base}/ipset"))
        .and_then(|(what, data)| LiveList::from_json(&data, "name").map_err(|m| fail(what, m)));
    let mut entries = BTreeMap::new();
    if let Ok(list) = &ipsets {
        for set in &list.entries {
            let path = format!("{base}/ipset/{}", encode_segment(&set.name));
            let read = get(path).and_then(|(what, data)| {
                LiveList::from_json(&data, "cidr").map_err(|m| fail(what, m))
            });
            entries.insert(set.name.clone(), read);
        }
    }
    FirewallScope {
        options,
        rules,
        aliases,
        ipsets,
        entries,
    }
}

/// One `GET` of the firewall: its `data`, or why not. A read a recording
/// lacks is an empty list (re-record to see it).
fn fw_get(
    transport: &dyn Transport,
    acting_as: Option<&str>,
    path: String,
) -> Result<(String, serde_json::Value), ReadFailure> {
    let request = Request::get(path);
    let what = describe(&request);
    match transport.call(&request) {
        Err(TransportError::NotRecorded { .. }) => Ok((what, serde_json::Value::Array(Vec::new()))),
        Err(e) => Err(fail(what, e.cause())),
        Ok(r) if !r.is_success() => Err(fail(what, status_message(&r, acting_as))),
        Ok(r) => Ok((what, r.data().clone())),
    }
}

/// The server has no such API path: 501, or a 404 that is not about an
/// object.
fn lacks_endpoint(outcome: &Result<Response, TransportError>) -> bool {
    matches!(outcome, Ok(r) if r.status == 501 || (r.status == 404 && !is_not_found_text(r)))
}

enum ConfigRead {
    Vanished,
    Read(Result<LiveConfig, ReadFailure>),
}

/// The members of a `/cluster/resources` row [`read_snapshot`] reads.
pub const ROW_MEMBERS: [&str; 14] = [
    "type",
    "node",
    "status",
    "storage",
    "shared",
    "plugintype",
    "content",
    "vmid",
    "template",
    "tags",
    "pool",
    "name",
    "lock",
    "hastate",
];

/// A recorded successful inventory answer, each row an object of only
/// its [`ROW_MEMBERS`] (every other member skipped unread, a row that is
/// no object `null`), so the rows read as the whole answer's would. The
/// whole answer's trees were a tenth of a 10,000-guest `diff --replay`.
/// `None`: read the answer through [`Transport::call`].
fn recorded_inventory(transport: &dyn Transport, request: &Request) -> Option<Response> {
    let (status, body) = transport.recorded_body(request)?;
    if !(200..300).contains(&status) {
        return None;
    }
    let Envelope(rows) = serde_json::from_str::<Envelope<Vec<Row>>>(body).ok()?;
    let rows: Vec<serde_json::Value> = rows.into_iter().map(|r| r.0).collect();
    let mut body = serde_json::Map::new();
    body.insert("data".into(), rows.into());
    Some(Response {
        status,
        reason: String::new(),
        body: body.into(),
    })
}

/// One inventory row with only the members [`read_snapshot`] reads.
struct Row(serde_json::Value);

impl<'de> serde::Deserialize<'de> for Row {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Row, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess};
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = Row;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an inventory row")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Row, A::Error> {
                let mut row = serde_json::Map::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if ROW_MEMBERS.contains(&&*key) {
                        // A member named twice keeps its last value, as
                        // in a whole answer's tree.
                        row.insert(key.into_owned(), map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Row(row.into()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Row, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Row(serde_json::Value::Null))
            }
            fn visit_unit<E>(self) -> Result<Row, E> {
                Ok(Row(serde_json::Value::Null))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Row, E> {
                Ok(Row(serde_json::Value::Null))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Row, E> {
                Ok(Row(serde_json::Value::Null))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Row, E> {
                Ok(Row(serde_json::Value::Null))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Row, E> {
                Ok(Row(serde_json::Value::Null))
            }
            fn visit_str<E>(self, _: &str) -> Result<Row, E> {
                Ok(Row(serde_json::Value::Null))
            }
        }
        d.deserialize_any(Members)
    }
}

/// What a reading thread brings back: an answer, or a guest's config read.
enum Read {
    Answer(Result<Response, TransportError>),
    Config(ConfigRead),
}

/// A guest's config from the answer to `GET …/pending` (`job`; `None`:
/// not asked yet), read through `GET …/config` when the server or
/// recording has no `/pending`.
fn read_guest_config(
    transport: &dyn Transport,
    job: &Request,
    answer: Option<Result<Response, TransportError>>,
    acting_as: Option<&str>,
) -> ConfigRead {
    let answer = match answer {
        Some(answer) => answer,
        None => match recorded_config(transport, job, LiveConfig::from_pending_body) {
            Some(cfg) => return ConfigRead::Read(Ok(cfg)),
            None => transport.call(job),
        },
    };
    let outcome = Some(answer);
    if lacks_pending(&outcome)
        && let Some(guest) = job.path.strip_suffix("/pending")
    {
        let req = Request::get(format!("{guest}/config"));
        if let Some(cfg) = recorded_config(transport, &req, LiveConfig::from_config_body) {
            return ConfigRead::Read(Ok(cfg));
        }
        let answer = transport.call(&req);
        return read_config(describe(&req), Some(answer), false, acting_as);
    }
    read_config(describe(job), outcome, true, acting_as)
}

/// A config read straight from a recorded answer's text (see
/// [`proxops_core::live_text`]), when the transport holds one that
/// succeeded and `read` reads it as the `Value` reader would; `None`
/// leaves it to [`Transport::call`] and [`read_config`].
fn recorded_config(
    transport: &dyn Transport,
    request: &Request,
    read: fn(&str) -> Option<LiveConfig>,
) -> Option<LiveConfig> {
    let (status, body) = transport.recorded_body(request)?;
    // A 2xx is never "not found" (`is_not_found`): only success is read here.
    (200..300).contains(&status).then(|| read(body)).flatten()
}

/// Job `i`'s answer, taken out of `results` (`None`: none came).
fn answer(results: &mut [Option<Read>], i: usize) -> Option<Result<Response, TransportError>> {
    match results.get_mut(i).and_then(Option::take) {
        Some(Read::Answer(a)) => Some(a),
        _ => None,
    }
}

/// `/{nodes}/{n}/{qemu|lxc}/{id}`.
fn guest_path(g: &LiveGuest) -> String {
    format!(
        "/nodes/{}/{}/{}",
        encode_segment(g.node.as_str()),
        g.guest_type.path_segment(),
        g.vmid
    )
}

/// The server has no `/pending` endpoint (404, 501), or the recording being
/// replayed holds no answer to it: the config is read through `/config`.
fn lacks_pending(outcome: &Option<Result<Response, TransportError>>) -> bool {
    match outcome {
        Some(Ok(r)) => r.status == 501 || (r.status == 404 && !is_not_found_text(r)),
        Some(Err(TransportError::NotRecorded { .. })) => true,
        _ => false,
    }
}

/// A 404 whose text says the guest is gone (not that the path is unknown).
fn is_not_found_text(r: &Response) -> bool {
    step::says_gone(&pve_message(r))
}

fn read_config(
    what: String,
    outcome: Option<Result<Response, TransportError>>,
    from_pending: bool,
    acting_as: Option<&str>,
) -> ConfigRead {
    let fail = |message: String| {
        ConfigRead::Read(Err(ReadFailure {
            what: what.clone(),
            message,
        }))
    };
    match outcome {
        None => fail("read did not complete".into()),
        Some(Err(e)) => fail(e.cause()),
        Some(Ok(r)) if is_not_found(&r) => ConfigRead::Vanished,
        Some(Ok(r)) if !r.is_success() => fail(status_message(&r, acting_as)),
        Some(Ok(r)) if from_pending => match LiveConfig::from_pending_json(r.data()) {
            Ok(c) => ConfigRead::Read(Ok(c)),
            Err(e) => fail(e.to_string()),
        },
        Some(Ok(r)) => match LiveConfig::from_json(r.data()) {
            Ok(c) => ConfigRead::Read(Ok(c)),
            Err(e) => fail(e.to_string()),
        },
    }
}

/// PVE answers a config read of a guest that is gone with 500 "Configuration
/// file '…' does not exist" (or 404 from some proxies). A 595 (node
/// unreachable) is never "not found". Read by the one classification of
/// PVE's answers, the one the runner and the retry policy use.
fn is_not_found(r: &Response) -> bool {
    matches!(
        step::classify(r.status, &pve_message(r)),
        PveError::NotFound { .. }
    )
}

fn status_message(r: &Response, acting_as: Option<&str>) -> String {
    let reason = r.reason.trim();
    let mut m = if reason.is_empty() {
        format!("HTTP {}", r.status)
    } else {
        format!("HTTP {} {reason}", r.status)
    };
    if let Some(errors) = r.body.get("errors").filter(|e| !e.is_null()) {
        m.push_str(&format!(" {errors}"));
    }
    if let Some(hint) = refusal_hint(r.status, &pve_message(r), acting_as) {
        m.push_str(&format!(". {hint}"));
    }
    m
}

fn node_not_readable(node: &NodeName, state: NodeState) -> String {
    match state {
        NodeState::Offline => format!("node {node} is offline; not read"),
        _ => format!("node {node} state is unknown; not read"),
    }
}

fn describe(r: &Request) -> String {
    format!("{} {}", r.method, r.path)
}

/// The most the workers' first reads are spread over (see
/// [`run_bounded`]): a slow inventory answer is no measure of one read.
const MAX_SPREAD: Duration = Duration::from_millis(100);

/// Runs `jobs` with at most `bound` calls in flight; result `i` belongs to
/// job `i` (`None` if a worker died before finishing it).
///
/// The workers start spread over one `round_trip` (the inventory read's,
/// at most [`MAX_SPREAD`]), worker `k` of `n` after `k/n` of it: started
/// together, their requests reached the server together every round and
/// queued behind each other there (measured against fakepve at 20 ms per
/// answer: 1.23 s for 201 requests at 4 in flight, against 1.0 s of
/// network time); spread, each arrives while the others wait on the
/// network. A real pveproxy's few workers see the same bursts.
pub(crate) fn run_bounded(
    transport: &dyn Transport,
    jobs: &[Request],
    bound: usize,
    round_trip: Duration,
) -> Vec<Option<Result<Response, TransportError>>> {
    run_bounded_with(jobs, bound, round_trip, |_, job| transport.call(job))
}

/// [`run_bounded`], each job done by `read(i, job)` on the thread that
/// took it.
fn run_bounded_with<T: Send>(
    jobs: &[Request],
    bound: usize,
    round_trip: Duration,
    read: impl Fn(usize, &Request) -> T + Sync,
) -> Vec<Option<T>> {
    let results: Mutex<Vec<Option<T>>> = Mutex::new(jobs.iter().map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let workers = bound.max(1).min(jobs.len());
    let spread = round_trip.min(MAX_SPREAD);
    let work = |k: usize| {
        // k < workers, both small: the division cannot overflow.
        let offset = spread * k as u32 / workers.max(1) as u32;
        if !offset.is_zero() {
            std::thread::sleep(offset);
        }
        loop {
            let i = next.fetch_add(1, Ordering::SeqCst);
            let Some(job) = jobs.get(i) else { break };
            let r = read(i, job);
            // A poisoned lock means another worker panicked; the vector
            // itself is still whole.
            results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
        }
    };
    if workers > 0 {
        std::thread::scope(|s| {
            // The calling thread is one of the workers; if a thread cannot
            // be spawned, fewer calls run at once (never more).
            for k in 1..workers {
                let _ = std::thread::Builder::new()
                    .name("pve-read".into())
                    .spawn_scoped(s, move || work(k));
            }
            work(0);
        });
    }
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}
