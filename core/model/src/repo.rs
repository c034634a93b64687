//! Repository composition (spec §2): from the files of a GitOps tree to
//! each cluster's typed desired state, or the diagnostics that refuse it.
//!
//! Input is an in-memory map of repo-relative path → bytes; this module
//! reads no file. A cluster with any error gets no desired state at all
//! (fail closed); the other clusters go on. Errors that make the whole tree
//! untrustworthy (configuration, repository shape) refuse every cluster.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::bounds::{self, FileRole};
use crate::config::{self, Config, ConfigShape, ConfigSource, ConfigSources, Overrides};
use crate::desired::object_diag;
pub use crate::desired::{ClusterDesired, DesiredObject};
use crate::diag::{Diagnostic, YamlIndex};
use crate::extra::AllowList;
use crate::graph;
use crate::manifest::{self, Document, Metadata, Spec};
use crate::names::{ClusterName, Kind, NodeName, Ref, ResourceName, Vmid, article};
use crate::outcome::AbortCause;
use crate::units::{WireUnit, binary_spelling, surprise};
use crate::yaml::{deserialize_document, from_value, remaining_errors, serde_documents};
use crate::yaml_block::{self, Node};
use crate::yaml_node::from_node;

/// The files of a repository, as the git adapter read them.
#[derive(Debug, Clone, Copy)]
pub struct RepoInput<'a> {
    pub files: &'a BTreeMap<String, Vec<u8>>,
    /// Every directory directly under `clusters/`, including empty ones.
    pub cluster_dirs: &'a BTreeSet<String>,
}

/// The whole repository, loaded.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub clusters: BTreeMap<ClusterName, Result<ClusterDesired, Vec<Diagnostic>>>,
    /// Problems that refuse nothing but must not pass silently: a manifest
    /// file under a kind directory that no cluster lists. Sorted.
    pub warnings: Vec<Diagnostic>,
    /// Refused clusters whose only problem is a manifest naming a node
    /// outside the cluster's node allowlist.
    pub outside_allowlist: BTreeSet<ClusterName>,
}

impl Loaded {
    pub fn object_count(&self) -> usize {
        self.clusters
            .values()
            .filter_map(|c| c.as_ref().ok())
            .map(|c| c.objects.len())
            .sum()
    }

    /// Why a refused cluster does nothing this cycle: `unknown_node` when
    /// its only problem is a node outside its allowlist, else invalid input
    /// (`parse_error`).
    pub fn refusal_cause(&self, cluster: &ClusterName) -> AbortCause {
        if self.outside_allowlist.contains(cluster) {
            AbortCause::UnknownNode
        } else {
            AbortCause::InvalidInput
        }
    }

    pub fn diagnostics(&self) -> Vec<&Diagnostic> {
        self.clusters
            .values()
            .filter_map(|c| c.as_ref().err())
            .flatten()
            .collect()
    }
}

/// Runs a cluster's file readings, which are independent of one another.
/// Core starts no thread of its own: [`InOrder`] runs them one after
/// another, and a caller with threads to give passes its own. Whatever
/// the order they ran in, their results are merged in path order, so
/// every object, error and warning is the same.
pub trait FanOut: Sync {
    /// Calls `job(i)` once for each `i` in `0..n`, in any order and on any
    /// thread, and returns when every call has returned.
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync));
}

/// Every job on the caller's thread, in order.
pub struct InOrder;

impl FanOut for InOrder {
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        (0..n).for_each(job);
    }
}

/// Loads configuration and every cluster's composition. `Err` holds the
/// diagnostics that refuse the whole tree (configuration, repository shape);
/// per-cluster problems are inside `Loaded::clusters`.
pub fn load(
    input: RepoInput<'_>,
    explicit_config: Option<ConfigSource<'_>>,
    overrides: &Overrides,
) -> Result<Loaded, Vec<Diagnostic>> {
    load_with(input, explicit_config, overrides, &InOrder)
}

/// [`load`], each cluster's manifests read through `fan_out`.
pub fn load_with(
    input: RepoInput<'_>,
    explicit_config: Option<ConfigSource<'_>>,
    overrides: &Overrides,
    fan_out: &dyn FanOut,
) -> Result<Loaded, Vec<Diagnostic>> {
    let mut global = Vec::new();

    // A `--config` file decides which clusters run (spec §2.4): a URL-mode
    // file the ones it declares inline, a cluster-local file exactly its
    // own. Only without one (or with a process file declaring no cluster)
    // do the tree's clusters/<name>/config.yaml declare them.
    let shape = explicit_config.as_ref().map(ConfigShape::of);
    let cluster_local_only = shape.as_ref().is_some_and(ConfigShape::is_cluster_local);
    let url_mode = shape.as_ref().is_some_and(|s| s.git_url);
    let mut cluster_local = Vec::new();
    for dir in input.cluster_dirs {
        let path = format!("clusters/{dir}/config.yaml");
        if let Some(bytes) = input.files.get(&path)
            && !cluster_local_only
            && !url_mode
        {
            cluster_local.push((dir.clone(), ConfigSource { name: path, bytes }));
        }
    }
    let process_is_explicit = explicit_config.is_some();
    let explicit_name = explicit_config.as_ref().map(|s| s.name.clone());
    let tree_process = input.files.get("proxops.yaml").map(|b| ConfigSource {
        name: "proxops.yaml".into(),
        bytes: b,
    });
    // Under a cluster-local file, the tree's proxops.yaml fills what the
    // file leaves unset (its prune budget, listen address, poll interval).
    let underneath = if cluster_local_only {
        tree_process.clone()
    } else {
        None
    };
    let process = explicit_config.or(tree_process);
    let sources = ConfigSources {
        process,
        cluster_local,
        process_is_explicit,
    };
    let config = match config::load_over(&sources, underneath.as_ref(), overrides) {
        Ok(c) => Some(c),
        Err(d) => {
            global.extend(d);
            None
        }
    };

    check_shape(input, &mut global);

    if let Some(cfg) = &config
        && !cluster_local_only
    {
        check_cluster_dirs(
            input,
            cfg,
            url_mode,
            process_is_explicit,
            explicit_name.as_deref(),
            &mut global,
        );
    }

    let Some(config) = config else {
        global.sort();
        global.dedup();
        return Err(global);
    };
    if !global.is_empty() {
        global.sort();
        global.dedup();
        return Err(global);
    }

    let mut clusters = BTreeMap::new();
    // With one cluster of the tree loaded, a manifest only another cluster
    // lists would look unlisted: no warnings then.
    let mut listed = (!cluster_local_only).then(BTreeSet::new);
    let mut outside_allowlist = BTreeSet::new();
    let mut unit_warnings = Vec::new();
    for (name, cc) in &config.clusters {
        let extra = AllowList {
            keys: &cc.allow_extra_keys,
            cluster: name.as_str(),
            declared_in: &cc.declared_in,
            tag_case_sensitive: cc.tag_case_sensitive,
        };
        let mut outside = false;
        let composed = compose_cluster(
            (input, fan_out),
            name,
            &cc.nodes,
            &extra,
            &mut listed,
            &mut outside,
            &mut unit_warnings,
        );
        if outside && composed.is_err() {
            outside_allowlist.insert(name.clone());
        }
        clusters.insert(name.clone(), composed);
    }
    let mut warnings = listed.map_or_else(Vec::new, |l| unlisted_manifests(input, &l));
    warnings.extend(unit_warnings);
    warnings.sort();
    // A shared manifest is read once per cluster that lists it.
    warnings.dedup();
    Ok(Loaded {
        config,
        clusters,
        warnings,
        outside_allowlist,
    })
}

/// Every folder under `clusters/` must be a configured cluster (or, in URL
/// mode, one the configuration declares). Not under a cluster-local file:
/// the tree's other clusters are other processes'.
fn check_cluster_dirs(
    input: RepoInput<'_>,
    cfg: &Config,
    url_mode: bool,
    process_is_explicit: bool,
    explicit_name: Option<&str>,
    global: &mut Vec<Diagnostic>,
) {
    for dir in input.cluster_dirs {
        let has_files = input
            .files
            .keys()
            .any(|p| p.starts_with(&format!("clusters/{dir}/")));
        let configured = ClusterName::new(dir).is_ok_and(|n| cfg.clusters.contains_key(&n));
        let has_composition = input
            .files
            .contains_key(&format!("clusters/{dir}/resources.yaml"));
        let has_config = input
            .files
            .contains_key(&format!("clusters/{dir}/config.yaml"));
        if url_mode && !configured {
            global.push(Diagnostic::file(
                format!("clusters/{dir}/"),
                format!(
                    "composition directory {dir:?} is not a cluster the URL-mode configuration declares: declare pve.clusters.{dir} in {}, or remove the directory from the repository (declared: {})",
                    explicit_name.unwrap_or("the --config file"),
                    cfg.clusters.keys().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ));
        } else if !configured && !has_composition && !has_config && !process_is_explicit {
            global.push(Diagnostic::file(
                format!("clusters/{dir}/"),
                format!(
                    "cluster directory clusters/{dir}/ has no resources.yaml (and no config.yaml): declare the cluster in clusters/{dir}/config.yaml and list its manifests in clusters/{dir}/resources.yaml, or remove the directory"
                ),
            ));
        } else if !configured && (has_files || !process_is_explicit) {
            global.push(Diagnostic::file(
                format!("clusters/{dir}/"),
                format!(
                    "composition directory {dir:?} is not a configured cluster: add clusters/{dir}/config.yaml declaring pve.clusters.{dir}, or remove the directory (configured: {})",
                    cfg.clusters.keys().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
}

/// Every `.yaml`/`.yml` file under a kind directory that no composition
/// lists, as a warning naming it: a manifest someone wrote (or a composition
/// someone emptied) must not be ignored without a word. Its contents are not
/// read: an unlisted file is not reconciled, broken or not.
fn unlisted_manifests(input: RepoInput<'_>, listed: &BTreeSet<String>) -> Vec<Diagnostic> {
    input
        .files
        .keys()
        .filter(|p| {
            let mut parts = p.split('/');
            let top = parts.next().unwrap_or("");
            // Directly under a kind root is the legacy-layout error instead.
            Kind::from_dir(top).is_some()
                && parts.count() >= 2
                && is_yaml(p)
                && !listed.contains(p.as_str())
        })
        .map(|p| {
            let top = p.split('/').next().unwrap_or("");
            Diagnostic::file(
                p.clone(),
                format!(
                    "not listed in any clusters/<cluster>/resources.yaml, so ProxOps neither reads nor reconciles it: list it, or move it out of {top}/"
                ),
            )
            .warning()
        })
        .collect()
}

/// Repository-shape rules that hold for every cluster (§2.1).
fn check_shape(input: RepoInput<'_>, diags: &mut Vec<Diagnostic>) {
    for path in input.files.keys() {
        let mut parts = path.split('/');
        let (Some(top), Some(second), third) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if Kind::from_dir(top).is_some() && third.is_none() && is_yaml(second) {
            diags.push(Diagnostic::file(
                path.clone(),
                format!(
                    "legacy layout: manifests may not sit directly under {top}/; move the file to {top}/base/ (shared) or {top}/<cluster>/ and list it in clusters/<cluster>/resources.yaml"
                ),
            ));
        }
    }
}

fn is_yaml(p: &str) -> bool {
    p.ends_with(".yaml") || p.ends_with(".yml")
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum Composition {
    Map(CompositionMap),
    List(Vec<Option<String>>),
}

/// A composition lists every manifest of a cluster (10,000 lines for
/// 10,000 guests): read through the block-YAML reader when it can, else
/// (and for the error's position) by serde_norway from the text.
fn read_composition(text: &str) -> Result<Composition, crate::yaml::DocError> {
    let docs = yaml_block::nodes(text);
    let first = docs.as_ref().and_then(|d| d.first());
    first
        .and_then(from_node)
        .or_else(|| first.and_then(|doc| from_value(&doc.to_value())))
        .map_or_else(|| deserialize_document(text, 0), Ok)
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompositionMap {
    #[serde(default)]
    resources: Option<Vec<Option<String>>>,
}

/// Joins `rel` onto `base` and resolves `.` and `..`; `None` when the
/// result would leave the repository.
fn clean_join(base: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = if rel.starts_with('/') {
        Vec::new()
    } else {
        base.split('/').filter(|p| !p.is_empty()).collect()
    };
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    if rel.starts_with('/') {
        return None;
    }
    Some(parts.join("/"))
}

/// Composes one cluster. The files its composition lists are added to
/// `listed`, which becomes `None` when the composition cannot be read (then
/// nobody can say which files are unlisted).
fn compose_cluster(
    (input, fan_out): (RepoInput<'_>, &dyn FanOut),
    name: &ClusterName,
    allow: &BTreeSet<NodeName>,
    extra: &AllowList<'_>,
    listed_anywhere: &mut Option<BTreeSet<String>>,
    outside_allowlist: &mut bool,
    warnings: &mut Vec<Diagnostic>,
) -> Result<ClusterDesired, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let comp_path = format!("clusters/{name}/resources.yaml");
    let Some(bytes) = input.files.get(&comp_path) else {
        *listed_anywhere = None;
        return Err(vec![Diagnostic::file(
            comp_path,
            format!(
                "cluster \"{name}\" is configured but has no clusters/{name}/resources.yaml: create it (an empty `resources: []` is valid)"
            ),
        )]);
    };
    if let Err(d) = bounds::check_file(&comp_path, FileRole::Composition, bytes) {
        return Err(vec![*d]);
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(_) => {
            *listed_anywhere = None;
            return Err(vec![Diagnostic::file(
                comp_path,
                "the file is not UTF-8 text",
            )]);
        }
    };
    let index = YamlIndex::build(text);
    let entries = match composition_entries(text, &index, &comp_path) {
        Ok(entries) => entries,
        Err(d) => {
            *listed_anywhere = None;
            return Err(vec![*d]);
        }
    };
    let is_map = !text.trim_start().starts_with('-');
    let listed = listed_files(
        &entries, is_map, name, &input, &comp_path, &index, &mut diags,
    );

    if let Some(all) = listed_anywhere {
        all.extend(listed.keys().cloned());
    }

    // Read every listed file (through `fan_out`), then take what each
    // found in lexicographic path order.
    let files: Vec<(&String, &Vec<u8>)> = listed
        .keys()
        .filter_map(|file| Some((file, input.files.get(file)?)))
        .collect();
    let readings: Vec<std::sync::OnceLock<FileReading>> =
        files.iter().map(|_| std::sync::OnceLock::new()).collect();
    fan_out.run(files.len(), &|i| {
        if let (Some((file, bytes)), Some(slot)) = (files.get(i), readings.get(i)) {
            // Each job fills its own slot once.
            let _ = slot.set(read_file(file, bytes, extra));
        }
    });
    let readings: Vec<Option<FileReading>> = readings
        .into_iter()
        .map(std::sync::OnceLock::into_inner)
        .collect();
    // Sized once: grown by doubling, the objects (large, and 10,000 of
    // them) were copied over and over, a tenth of composing a cluster.
    let count = readings.iter().flatten().map(|r| r.objects.len()).sum();
    let mut found: Vec<DesiredObject> = Vec::with_capacity(count);
    let mut indexes: BTreeMap<String, YamlIndex> = BTreeMap::new();
    for ((file, _), reading) in files.iter().zip(readings) {
        if let Some(reading) = reading {
            diags.extend(reading.diags);
            warnings.extend(reading.warnings);
            found.extend(reading.objects);
            if let Some(index) = reading.index {
                indexes.insert((*file).clone(), index);
            }
        }
    }
    let mut objects = distinct(found, &indexes, &mut diags);

    let outside = cross_checks(&objects, &indexes, allow, &mut diags);
    let levels = graph::resolve(&objects, &indexes, &mut diags);
    // Only when nothing else is wrong: the original checked the allowlist
    // after a clean parse, and a dashboard's unknown_node must mean that.
    *outside_allowlist = outside > 0 && outside == diags.len();
    if !diags.is_empty() {
        diags.sort();
        diags.dedup();
        return Err(diags);
    }
    for (r, (deps, level)) in levels {
        if let Some(o) = objects.get_mut(&r) {
            o.deps = deps;
            o.level = level;
        }
    }
    Ok(ClusterDesired {
        name: name.clone(),
        objects,
        tag_case_sensitive: extra.tag_case_sensitive,
        allow_extra_keys: extra.keys.clone(),
    })
}

/// The entries of a cluster's `resources.yaml`: a mapping `resources:` or a
/// bare list, each a path or empty.
fn composition_entries(
    text: &str,
    index: &YamlIndex,
    comp_path: &str,
) -> Result<Vec<Option<String>>, Box<Diagnostic>> {
    Ok(if text.trim().is_empty() {
        Vec::new()
    } else {
        match read_composition(text) {
            Ok(Composition::Map(m)) => m.resources.unwrap_or_default(),
            Ok(Composition::List(l)) => l,
            Err(e) => {
                let pos = e.pos.or_else(|| index.locate(0, &e.path));
                // YAML that reads, yet as neither form of a composition.
                let message = if crate::yaml::is_yaml_document(text, 0) {
                    "invalid composition: use a mapping `resources:` holding a list of manifest paths relative to this directory, e.g. - ../../vm/base/web.yaml".to_owned()
                } else {
                    format!("invalid composition: {}", e.message)
                };
                let field = if e.path.is_empty() && !text.trim_start().starts_with('-') {
                    "resources".to_owned()
                } else {
                    e.path
                };
                let pos = index.locate(0, &field).or(pos);
                return Err(Box::new(
                    Diagnostic::file(comp_path, message)
                        .with_field(field)
                        .at(pos),
                ));
            }
        }
    })
}

/// The files a composition lists, each once, by repository path, with the
/// index of its entry; every entry that leaves the tree, names no manifest
/// under a kind folder, or repeats another is a diagnostic at its line.
fn listed_files(
    entries: &[Option<String>],
    is_map: bool,
    name: &ClusterName,
    input: &RepoInput<'_>,
    comp_path: &str,
    index: &YamlIndex,
    diags: &mut Vec<Diagnostic>,
) -> BTreeMap<String, usize> {
    let mut listed: BTreeMap<String, usize> = BTreeMap::new();
    for (i, entry) in entries.iter().enumerate() {
        let field = if is_map {
            format!("resources[{i}]")
        } else {
            format!("[{i}]")
        };
        let d = |m: String| {
            Diagnostic::file(comp_path, m)
                .with_field(field.clone())
                .at(index.locate(0, &field))
        };
        let Some(raw) = entry.as_deref().map(str::trim).filter(|s| !s.is_empty()) else {
            continue;
        };
        let Some(target) = clean_join(&format!("clusters/{name}"), raw) else {
            diags.push(d(format!("path {raw:?} leaves the repository: paths are relative to clusters/{name}/ and must stay inside the tree")));
            continue;
        };
        let top = target.split('/').next().unwrap_or("");
        if Kind::from_dir(top).is_none() {
            diags.push(d(format!(
                "{raw:?} (resolved to {target}) is not under a kind directory: manifests live under vm/, templatevm/, lxc/, templatect/, iso/, ctt/ or diskimage/"
            )));
            continue;
        }
        if input.files.contains_key(&target) {
            if !is_yaml(&target) {
                diags.push(d(format!(
                    "{raw:?} is not a YAML manifest: list files ending in .yaml or .yml"
                )));
                continue;
            }
        } else if input
            .files
            .keys()
            .any(|p| p.starts_with(&format!("{target}/")))
        {
            diags.push(d(format!(
                "{raw:?} is a directory: list each manifest file"
            )));
            continue;
        } else {
            diags.push(d(format!("{raw:?} does not exist (resolved to {target})")));
            continue;
        }
        if let Some(prev) = listed.insert(target.clone(), i) {
            let prev_field = if is_map {
                format!("resources[{prev}]")
            } else {
                format!("[{prev}]")
            };
            diags.push(d(format!(
                "{raw:?} is listed twice: it is the same file as {prev_field}"
            )));
        }
    }
    listed
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    api_version: Option<serde_yaml::Value>,
    #[serde(default)]
    kind: Option<serde_yaml::Value>,
}

/// What reading one file found, on its own: its objects in document
/// order, its errors and warnings, and its index of positions (kept only
/// when the file was read as YAML).
#[derive(Default)]
struct FileReading {
    objects: Vec<DesiredObject>,
    index: Option<YamlIndex>,
    diags: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

/// The objects `found` (in path order, each file's in document order) by
/// reference, each the first of its name; a later one is an error of its
/// own file. Built from sorted entries, the map's nodes are full: built
/// one insert at a time they were half empty, 8 MB of a 10,000-guest
/// cluster's 19, and the inserts were a sixth of composing it.
fn distinct(
    mut found: Vec<DesiredObject>,
    indexes: &BTreeMap<String, YamlIndex>,
    diags: &mut Vec<Diagnostic>,
) -> BTreeMap<Ref, DesiredObject> {
    // Stable: objects of one name stay in path order, the first first.
    found.sort_by(|a, b| a.r#ref.cmp(&b.r#ref));
    let mut kept: Vec<(Ref, DesiredObject)> = Vec::with_capacity(found.len());
    for o in found {
        if let Some((_, first)) = kept.last().filter(|(r, _)| *r == o.r#ref) {
            let at = indexes
                .get(&o.file)
                .and_then(|index| index.locate(o.doc, "metadata.name"));
            diags.push(
                Diagnostic::file(
                    &o.file,
                    format!(
                        "{} is defined twice in this cluster's composition (also in {})",
                        o.r#ref, first.file
                    ),
                )
                .with_field("metadata.name")
                .at(at),
            );
            continue;
        }
        kept.push((o.r#ref.clone(), o));
    }
    kept.into_iter().collect()
}

fn read_file(file: &str, bytes: &[u8], extra: &AllowList<'_>) -> FileReading {
    let mut reading = FileReading::default();
    parse_file(file, bytes, extra, &mut reading);
    reading
}

fn parse_file(file: &str, bytes: &[u8], extra: &AllowList<'_>, found: &mut FileReading) {
    let FileReading {
        objects,
        index: kept,
        diags,
        warnings,
    } = found;
    if let Err(d) = bounds::check_file(file, FileRole::Manifest, bytes) {
        diags.push(*d);
        return;
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        diags.push(Diagnostic::file(file, "the file is not UTF-8 text"));
        return;
    };
    let index = YamlIndex::build(text);
    let docs = match Docs::read(text) {
        Ok(docs) => docs,
        Err(e) => {
            let message = if e.path.is_empty() {
                format!("YAML syntax error: {}", e.message)
            } else {
                e.message
            };
            let pos = index.repeated_key(&e.path).or(e.pos);
            diags.push(Diagnostic::file(file, message).with_field(e.path).at(pos));
            return;
        }
    };
    let docs = docs.trees();
    if docs.iter().all(Tree::is_null) {
        // An emptied file would drop its objects without a word, and prune
        // their guests: refuse it instead.
        diags.push(Diagnostic::file(
            file,
            "the file holds no manifest (it is empty, only comments or only `---`): a listed file must hold at least one document; restore its manifests, or remove it from the resources.yaml that lists it",
        ));
        return;
    }
    let dir_kind = file.split('/').next().and_then(Kind::from_dir);
    for (doc, &tree) in docs.iter().enumerate() {
        if tree.is_null() {
            continue;
        }
        let at = |path: &str| index.locate(doc, path);
        let head = match tree.read::<Head>(text, doc) {
            Ok(h) => h,
            Err(e) => {
                let pos = e.pos.or_else(|| at(&e.path));
                diags.push(
                    Diagnostic::file(file, format!("document {} is not a manifest: a manifest is a mapping with apiVersion, kind, metadata and spec ({})", doc + 1, e.message))
                        .with_field(e.path)
                        .at(pos),
                );
                continue;
            }
        };
        let kind = match manifest_kind(&head, file, dir_kind, &at) {
            Ok(kind) => kind,
            Err(d) => {
                diags.push(*d);
                continue;
            }
        };
        let mut converted = None;
        let (tree, parsed) = read_manifest(kind, tree, text, doc, &mut converted);
        let before = diags.len();
        let (metadata, spec) = match parsed {
            Ok(p) => p,
            Err(unread) => {
                report_unread(*unread, file, extra, &at, diags);
                unit_notes(tree, file, &at, &mut diags[before..], warnings);
                continue;
            }
        };
        for fe in manifest::validate_in(&metadata, &spec, extra) {
            diags.push(
                Diagnostic::file(file, fe.message)
                    .with_field(fe.path.clone())
                    .at(at(&fe.path)),
            );
        }
        unit_notes(tree, file, &at, &mut diags[before..], warnings);
        let r = Ref {
            kind,
            name: metadata.name.clone(),
        };
        objects.push(DesiredObject {
            r#ref: r,
            file: file.to_owned(),
            doc,
            metadata,
            spec,
            deps: BTreeSet::new(),
            level: 0,
        });
    }
    *kept = Some(index);
}

/// A document's kind, from its `apiVersion` and `kind`, in the folder it
/// belongs under; or the diagnostic of the first that is wrong.
fn manifest_kind(
    head: &Head,
    file: &str,
    dir_kind: Option<Kind>,
    at: &dyn Fn(&str) -> Option<(usize, usize)>,
) -> Result<Kind, Box<Diagnostic>> {
    match head.api_version.as_ref().and_then(|v| v.as_str()) {
        Some(manifest::API_VERSION) => {}
        Some(other) => {
            return Err(Box::new(
                Diagnostic::file(
                    file,
                    format!(
                        "unsupported apiVersion {other:?}: use {:?}",
                        manifest::API_VERSION
                    ),
                )
                .with_field("apiVersion")
                .at(at("apiVersion")),
            ));
        }
        None => {
            return Err(Box::new(
                Diagnostic::file(
                    file,
                    format!("apiVersion is required: use {:?}", manifest::API_VERSION),
                )
                .with_field("apiVersion")
                .at(at("apiVersion")),
            ));
        }
    }
    let kind = match head.kind.as_ref().and_then(|v| v.as_str()) {
        Some(k) => match Kind::parse(k) {
            Some(kind) => kind,
            None => {
                return Err(Box::new(
                    Diagnostic::file(
                        file,
                        format!("unknown kind {k:?}: use one of {}", Kind::list()),
                    )
                    .with_field("kind")
                    .at(at("kind"))
                    .with_hint(crate::suggest::did_you_mean(k, Kind::ALL.map(Kind::as_str))),
                ));
            }
        },
        None => {
            return Err(Box::new(
                Diagnostic::file(file, format!("kind is required: one of {}", Kind::list()))
                    .with_field("kind")
                    .at(at("kind")),
            ));
        }
    };
    if let Some(dk) = dir_kind
        && dk != kind
    {
        return Err(Box::new(
            Diagnostic::file(
                file,
                format!(
                    "{} {kind} manifest belongs under {}/, not {}/",
                    article(kind),
                    kind.dir(),
                    dk.dir()
                ),
            )
            .with_field("kind")
            .at(at("kind")),
        ));
    }
    Ok(kind)
}

/// A file's documents: block YAML read into trees typed manifests are
/// read from directly; anything else by serde_norway into values.
enum Docs<'a> {
    Block(Vec<Node<'a>>),
    Values(Vec<serde_yaml::Value>),
}

impl<'a> Docs<'a> {
    fn read(text: &'a str) -> Result<Self, crate::yaml::DocError> {
        match yaml_block::nodes(text) {
            Some(nodes) => Ok(Docs::Block(nodes)),
            None => serde_documents(text).map(Docs::Values),
        }
    }

    fn trees(&self) -> Vec<Tree<'_, 'a>> {
        match self {
            Docs::Block(nodes) => nodes.iter().map(Tree::Block).collect(),
            Docs::Values(values) => values.iter().map(Tree::Value).collect(),
        }
    }
}

/// Document `doc` read as its `kind`'s manifest, and the tree it was read
/// from. Only a block-read document that reads as its kind's manifest
/// takes the fast path; any other is read from its value as before (made
/// into `converted`), which finds every error and its position.
fn read_manifest<'t, 'a>(
    kind: Kind,
    tree: Tree<'t, 'a>,
    text: &str,
    doc: usize,
    converted: &'t mut Option<serde_yaml::Value>,
) -> (Tree<'t, 'a>, Result<(Metadata, Spec), Box<Unread>>) {
    let value = match tree {
        Tree::Block(node) => {
            if let Some(read) = read_kind(kind, &FromNode(node)) {
                return (tree, Ok(read));
            }
            &*converted.insert(node.to_value())
        }
        Tree::Value(v) => v,
    };
    let parsed = read_kind(kind, &FromValue { value, text, doc });
    (Tree::Value(value), parsed)
}

/// A document as read: a tree from the block reader, typed values read
/// straight from it, or serde_norway's value (any other YAML, and any
/// block-read document the fast path refused).
#[derive(Clone, Copy)]
enum Tree<'t, 'a> {
    Block(&'t Node<'a>),
    Value(&'t serde_yaml::Value),
}

impl<'t> Tree<'t, '_> {
    fn is_null(&self) -> bool {
        match self {
            Tree::Block(n) => n.is_null(),
            Tree::Value(v) => v.is_null(),
        }
    }

    /// Document `doc` read as `T`: from the tree when it reads, else as
    /// before from its value, then (for the error's position) its text.
    fn read<T: serde::de::DeserializeOwned>(
        self,
        text: &str,
        doc: usize,
    ) -> Result<T, crate::yaml::DocError> {
        match self {
            Tree::Block(node) => {
                from_node(node).map_or_else(|| read_doc(&node.to_value(), text, doc), Ok)
            }
            Tree::Value(value) => read_doc(value, text, doc),
        }
    }

    /// The node under the text key `key` of a mapping.
    fn get(self, key: &str) -> Option<Self> {
        match self {
            Tree::Block(n) => n.get(key).map(Tree::Block),
            Tree::Value(v) => v.get(key).map(Tree::Value),
        }
    }

    /// The items of a list (none for anything else).
    fn items(self) -> Vec<Self> {
        match self {
            Tree::Block(Node::Seq(items)) => items.iter().map(Tree::Block).collect(),
            Tree::Value(serde_yaml::Value::Sequence(items)) => {
                items.iter().map(Tree::Value).collect()
            }
            _ => Vec::new(),
        }
    }

    /// A text or a number as written.
    fn scalar_text(self) -> Option<std::borrow::Cow<'t, str>> {
        match self {
            Tree::Block(Node::Str(s)) => Some(s.as_ref().into()),
            Tree::Block(Node::Int(n)) => Some(n.to_string().into()),
            Tree::Value(serde_yaml::Value::String(s)) => Some(s.as_str().into()),
            Tree::Value(serde_yaml::Value::Number(n)) => Some(n.to_string().into()),
            _ => None,
        }
    }
}

/// How a document is read as one kind's manifest, `S` its spec.
trait SpecReader {
    type Out;
    fn read<S: serde::de::DeserializeOwned>(&self, wrap: fn(S) -> Spec) -> Self::Out;
}

/// From the block reader's tree: `None` where that does not read, and
/// the document is then read as before.
struct FromNode<'t, 'a>(&'t Node<'a>);

impl SpecReader for FromNode<'_, '_> {
    type Out = Option<(Metadata, Spec)>;
    fn read<S: serde::de::DeserializeOwned>(&self, wrap: fn(S) -> Spec) -> Self::Out {
        from_node::<Document<S>>(self.0).map(|d| (d.metadata, wrap(d.spec)))
    }
}

/// From serde_norway's value, finding every error when it does not read.
struct FromValue<'t> {
    value: &'t serde_yaml::Value,
    text: &'t str,
    doc: usize,
}

impl SpecReader for FromValue<'_> {
    type Out = Result<(Metadata, Spec), Box<Unread>>;
    fn read<S: serde::de::DeserializeOwned>(&self, wrap: fn(S) -> Spec) -> Self::Out {
        read_spec(self.value, self.text, self.doc, wrap)
    }
}

/// The document read as its kind's manifest.
fn read_kind<R: SpecReader>(kind: Kind, reader: &R) -> R::Out {
    match kind {
        Kind::VM => reader.read(Spec::Vm),
        Kind::TemplateVM => reader.read(Spec::TemplateVm),
        Kind::LXC => reader.read(Spec::Lxc),
        Kind::TemplateCT => reader.read(Spec::TemplateCt),
        Kind::ISO => reader.read(Spec::Iso),
        Kind::CTTemplate => reader.read(Spec::CtTemplate),
        Kind::DiskImage => reader.read(Spec::DiskImage),
        Kind::Pool => reader.read(Spec::Pool),
        Kind::BackupJob => reader.read(Spec::BackupJob),
        Kind::HAResource => reader.read(Spec::HaResource),
        Kind::HARule => reader.read(Spec::HaRule),
        Kind::ReplicationJob => reader.read(Spec::ReplicationJob),
        Kind::FirewallAlias => reader.read(Spec::FirewallAlias),
        Kind::FirewallIPSet => reader.read(Spec::FirewallIpSet),
        Kind::SecurityGroup => reader.read(Spec::SecurityGroup),
        Kind::ClusterFirewall => reader.read(Spec::ClusterFirewall),
    }
}

/// A document that could not be read: each error at its line, and the
/// rules of what could still be read, except those the errors already tell.
fn report_unread(
    unread: Unread,
    file: &str,
    extra: &AllowList<'_>,
    at: &dyn Fn(&str) -> Option<(usize, usize)>,
    diags: &mut Vec<Diagnostic>,
) {
    for e in unread.errors {
        let pos = e.pos.or_else(|| at(&e.path));
        diags.push(
            Diagnostic::file(file, e.message)
                .with_field(e.path)
                .at(pos)
                .with_hint(e.hint),
        );
    }
    // The rest of the document still has its own rules; what
    // was taken out to read it would only repeat its error.
    if let Some((metadata, spec)) = unread.rest {
        let own = manifest::validate_in(&metadata, &spec, extra);
        for fe in own {
            if !unread.removed.iter().any(|r| related(r, &fe.path)) {
                diags.push(
                    Diagnostic::file(file, fe.message)
                        .with_field(fe.path.clone())
                        .at(at(&fe.path)),
                );
            }
        }
    }
}

/// Reads a document from its parsed value (linear in the number of
/// documents); only when that fails is it re-read from the text, which gives
/// the error its line and column.
fn read_doc<T: serde::de::DeserializeOwned>(
    value: &serde_yaml::Value,
    text: &str,
    doc: usize,
) -> Result<T, crate::yaml::DocError> {
    match from_value(value) {
        Some(t) => Ok(t),
        None => deserialize_document(text, doc),
    }
}

/// A document that did not read: every error found in it, the paths taken
/// out to find them, and the rest of the document when it then reads.
struct Unread {
    errors: Vec<crate::yaml::DocError>,
    removed: Vec<String>,
    rest: Option<(Metadata, Spec)>,
}

/// Reads one document as a `Document<S>` and wraps its spec by kind; on
/// failure reads on past each error to find the others.
fn read_spec<S: serde::de::DeserializeOwned>(
    value: &serde_yaml::Value,
    text: &str,
    doc: usize,
    wrap: fn(S) -> Spec,
) -> Result<(Metadata, Spec), Box<Unread>> {
    match read_doc::<Document<S>>(value, text, doc) {
        Ok(d) => Ok((d.metadata, wrap(d.spec))),
        Err(first) => {
            let more = remaining_errors::<Document<S>>(value, &first);
            let mut errors = vec![first];
            errors.extend(more.errors);
            Err(Box::new(Unread {
                errors,
                removed: more.removed,
                rest: more.rest.map(|d| (d.metadata, wrap(d.spec))),
            }))
        }
    }
}

/// Whether a rule's finding at `path` is about an entry taken out at
/// `removed`: the entry, what it holds, what holds it, or the rest of the
/// list item it was in (a disk without its size).
fn related(removed: &str, path: &str) -> bool {
    let within = |a: &str, b: &str| {
        a == b || a.starts_with(&format!("{b}.")) || a.starts_with(&format!("{b}["))
    };
    let item = removed
        .rfind('.')
        .map(|i| &removed[..i])
        .filter(|p| p.ends_with(']'));
    within(path, removed) || within(removed, path) || item.is_some_and(|i| within(path, i))
}

/// Quantities and the unit PVE takes each in.
const WIRE_QUANTITIES: &[(&str, WireUnit)] = &[
    ("spec.memory", WireUnit::MiB),
    ("spec.swap", WireUnit::MiB),
    ("spec.disks[].size", WireUnit::GiB),
    ("spec.root.size", WireUnit::GiB),
    ("spec.mount-points[].size", WireUnit::GiB),
];

/// Decimal and bare quantities read against the unit PVE takes them in: a
/// refused one (`memory: 4096` is 4096 bytes) is answered with its binary
/// spelling (`did you mean 4096MiB?`); a valid one that does not come out
/// whole on the wire (`size: 32G` is 29.80 GiB) is a warning.
fn unit_notes(
    tree: Tree<'_, '_>,
    file: &str,
    at: &dyn Fn(&str) -> Option<(usize, usize)>,
    errors: &mut [Diagnostic],
    warnings: &mut Vec<Diagnostic>,
) {
    // The errors by field, once: looking each quantity up in the list made
    // a document with many refused quantities (aliases expand to as many
    // as they like) quadratic.
    let mut by_field: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, d) in errors.iter().enumerate() {
        if let (Some(f), None) = (&d.field, &d.hint) {
            by_field.entry(f.clone()).or_default().push(i);
        }
    }
    for (schema, wire) in WIRE_QUANTITIES {
        for (indexes, text) in quantities_at(tree, schema) {
            // The concrete path is spelled out only when a diagnostic
            // needs it: a valid manifest (nearly all of them) needs none.
            let path = || concrete_path(schema, &indexes);
            if !by_field.is_empty()
                && let Some(refused) = by_field.get(&path())
            {
                let hint: Option<Box<str>> =
                    binary_spelling(&text, *wire).map(|m| format!("did you mean {m}?").into());
                for &i in refused {
                    errors[i].hint = hint.clone();
                }
                continue;
            }
            if let Some(message) = surprise(&text, *wire) {
                let path = path();
                warnings.push(
                    Diagnostic::file(file, message)
                        .with_field(path.clone())
                        .at(at(&path))
                        .with_hint(
                            binary_spelling(&text, *wire).map(|m| format!("did you mean {m}?")),
                        )
                        .warning(),
                );
            }
        }
    }
}

/// The scalars at a schema path (`spec.disks[].size`) of a document, with
/// the list indexes on the way to each and its text as written.
fn quantities_at<'t>(
    tree: Tree<'t, '_>,
    schema: &str,
) -> Vec<(Vec<usize>, std::borrow::Cow<'t, str>)> {
    let mut found: Vec<(Vec<usize>, Tree<'t, '_>)> = vec![(Vec::new(), tree)];
    for seg in schema.split('.') {
        let (key, list) = match seg.strip_suffix("[]") {
            Some(k) => (k, true),
            None => (seg, false),
        };
        let mut next = Vec::new();
        for (indexes, v) in found {
            let Some(child) = v.get(key) else { continue };
            if list {
                for (i, item) in child.items().into_iter().enumerate() {
                    let mut at = indexes.clone();
                    at.push(i);
                    next.push((at, item));
                }
            } else {
                next.push((indexes, child));
            }
        }
        found = next;
    }
    found
        .into_iter()
        .filter_map(|(indexes, v)| Some((indexes, v.scalar_text()?)))
        .collect()
}

/// `spec.disks[].size` with its list indexes filled in: `spec.disks[1].size`.
fn concrete_path(schema: &str, indexes: &[usize]) -> String {
    let mut out = String::new();
    let mut indexes = indexes.iter();
    for (n, seg) in schema.split('.').enumerate() {
        if n > 0 {
            out.push('.');
        }
        match seg.strip_suffix("[]") {
            Some(key) => {
                out.push_str(key);
                if let Some(i) = indexes.next() {
                    out.push_str(&format!("[{i}]"));
                }
            }
            None => out.push_str(seg),
        }
    }
    out
}

fn cross_checks(
    objects: &BTreeMap<Ref, DesiredObject>,
    indexes: &BTreeMap<String, YamlIndex>,
    allow: &BTreeSet<NodeName>,
    diags: &mut Vec<Diagnostic>,
) -> usize {
    let mut outside = 0;
    // PVE ids of cluster-level objects, unique per kind.
    let mut pve_ids: BTreeMap<(Kind, String), &Ref> = BTreeMap::new();
    // One vmid pool per PVE cluster, shared by qemu and lxc guests on
    // every node (pve-cluster keeps one `vmlist` for the whole cluster):
    // the same vmid on two nodes half-applies.
    let mut ids: BTreeMap<Vmid, &DesiredObject> = BTreeMap::new();
    for (r, o) in objects {
        if let Some(id) = crate::desired::id_of(o, objects)
            && let Some(prev) = pve_ids.insert((r.kind, id.clone()), r)
        {
            let field = match &o.spec {
                Spec::HaResource(_) => "spec.guest",
                Spec::ReplicationJob(_) => "spec.target",
                _ if o.spec_has_id() => "spec.id",
                _ => "metadata.name",
            };
            diags.push(object_diag(
                o,
                indexes,
                field,
                format!("PVE id {id:?} is already {prev}'s: one PVE object per manifest"),
            ));
        }
        if let Some((node, vmid)) = o.spec.guest_id() {
            if let Some(prev) = ids.get(&vmid) {
                let on = match prev.spec.guest_id() {
                    Some((n, _)) if n != node => format!(" on node {n}, this one on node {node}"),
                    _ => format!(" on node {node}"),
                };
                diags.push(object_diag(
                    o,
                    indexes,
                    "spec.vmid",
                    format!(
                        "vmid {vmid} is already used by {} ({}){on}: a vmid is unique across the PVE cluster, whatever the node, and qemu and lxc guests share the pool",
                        prev.r#ref, prev.file
                    ),
                ));
            } else {
                ids.insert(vmid, o);
            }
        }
        if !allow.is_empty() {
            let allowed = allow
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            // Every node the object names, with the field that names it.
            let named: Vec<(String, NodeName)> = match &o.spec {
                Spec::Iso(a) | Spec::CtTemplate(a) | Spec::DiskImage(a) => a
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (format!("spec.nodes[{i}]"), n.clone()))
                    .chain(a.node.iter().map(|n| ("spec.node".to_owned(), n.clone())))
                    .collect(),
                Spec::BackupJob(b) => b
                    .node
                    .iter()
                    .map(|n| ("spec.node".to_owned(), n.clone()))
                    .collect(),
                Spec::ReplicationJob(j) => vec![("spec.target".to_owned(), j.target.clone())],
                Spec::HaRule(r) => r
                    .nodes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, t)| {
                        let (n, _) = crate::cluster::spec::parse_node_priority(t)?;
                        Some((format!("spec.nodes[{i}]"), n))
                    })
                    .collect(),
                _ => o
                    .spec
                    .guest_id()
                    .map(|(n, _)| ("spec.node".to_owned(), n.clone()))
                    .into_iter()
                    .collect(),
            };
            for (field, n) in named {
                if !allow.contains(&n) {
                    outside += 1;
                    diags.push(object_diag(
                        o,
                        indexes,
                        &field,
                        format!(
                            "node {n} is not in this cluster's node allowlist (allowed: {allowed})"
                        ),
                    ));
                }
            }
        }
    }
    ha_rule_set(objects, indexes, allow, diags);
    replication_targets(objects, indexes, diags);
    crate::firewall_repo::check(objects, indexes, diags);
    outside
}

/// A replication job to its guest's own node: pve-manager
/// `API2/ReplicationConfig.pm` `create` refuses it ("Source and target
/// must not be identical").
fn replication_targets(
    objects: &BTreeMap<Ref, DesiredObject>,
    indexes: &BTreeMap<String, YamlIndex>,
    diags: &mut Vec<Diagnostic>,
) {
    for o in objects.values() {
        let Spec::ReplicationJob(j) = &o.spec else {
            continue;
        };
        let guest = crate::cluster::spec::parse_guest_ref(&j.guest, |r| objects.contains_key(r))
            .and_then(|r| Some((objects.get(&r)?.spec.guest_id()?, r)));
        if let Some(((node, _), r)) = guest
            && *node == j.target
        {
            diags.push(object_diag(
                o,
                indexes,
                "spec.target",
                format!(
                    "{r} runs on node {node}, the job's target: PVE refuses a replication job to the guest's own node (\"Source and target must not be identical\")"
                ),
            ));
        }
    }
}

/// What PVE checks over the whole HA rule set at every rule write that one
/// manifest cannot see (pve-ha-manager `HA/Rules.pm` `check_feasibility`,
/// over the enabled rules only): an HA resource in two node-affinity rules
/// (`HA/Rules/NodeAffinity.pm` `check_single_resource_reference`), and a
/// negative resource-affinity rule with more resources than the cluster
/// has nodes (`HA/Rules/ResourceAffinity.pm`
/// `check_negative_resource_affinity_resources_count`; known here only
/// with a node allowlist).
fn ha_rule_set(
    objects: &BTreeMap<Ref, DesiredObject>,
    indexes: &BTreeMap<String, YamlIndex>,
    allow: &BTreeSet<NodeName>,
    diags: &mut Vec<Diagnostic>,
) {
    let mut node_affinity: BTreeMap<&ResourceName, &Ref> = BTreeMap::new();
    for (r, o) in objects {
        let Spec::HaRule(rule) = &o.spec else {
            continue;
        };
        if rule.enabled == Some(false) {
            continue;
        }
        if rule.affinity.as_deref() == Some("negative")
            && !allow.is_empty()
            && rule.resources.len() > allow.len()
        {
            diags.push(object_diag(
                o,
                indexes,
                "spec.resources",
                format!(
                    "a negative rule keeps {} HA resources apart on {} nodes: PVE refuses it (\"rule defines more resources than available nodes\")",
                    rule.resources.len(),
                    allow.len()
                ),
            ));
        }
        if rule.r#type != "node-affinity" {
            continue;
        }
        for (i, res) in rule.resources.iter().enumerate() {
            if let Some(prev) = node_affinity.insert(res, r)
                && prev != r
            {
                diags.push(object_diag(
                    o,
                    indexes,
                    &format!("spec.resources[{i}]"),
                    format!(
                        "HAResource {res} is already in node-affinity rule {prev}: PVE allows one node-affinity rule per HA resource (\"resource is already used in another node affinity rule\")"
                    ),
                ));
            }
        }
    }
}

impl DesiredObject {
    /// A cluster-level manifest that names its PVE id in `spec.id`.
    fn spec_has_id(&self) -> bool {
        match &self.spec {
            Spec::Pool(p) => p.id.is_some(),
            Spec::BackupJob(b) => b.id.is_some(),
            Spec::HaRule(r) => r.id.is_some(),
            _ => false,
        }
    }
}

impl ClusterDesired {
    /// The `(node, storage)` pairs whose content listing the desired
    /// artifacts need.
    pub fn storage_pairs(&self) -> BTreeSet<(NodeName, crate::names::StorageId)> {
        let mut out = BTreeSet::new();
        for o in self.objects.values() {
            if let Some(a) = o.spec.artifact() {
                for n in a.all_nodes() {
                    out.insert((n, a.storage.clone()));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Head` and `Composition` read from the block tree as from the value.
    #[test]
    fn heads_and_compositions_read_the_same_from_the_block_tree() {
        let texts = [
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: a\nspec: {}\n",
            "apiVersion: 1\nkind: true\n",
            "apiVersion: [a, 1]\nkind:\n  x: 1\n",
            "apiVersion: ~\n",
            "1: a\nkind: VM\n",
            "- a\n- b\n",
            "resources:\n- ../../vm/a.yaml\n-\n- 1\n",
            "resources:\n  - ../../vm/a.yaml\n  - ''\n",
            "resources: ~\n",
            "resources: []\nother: 1\n",
            "- ../../vm/a.yaml\n- ~\n",
            "- [a]\n",
            "x\n---\n---\nkind: LXC\n",
        ];
        let mut read = 0;
        for text in texts {
            for node in yaml_block::nodes(text).unwrap_or_default() {
                let value = node.to_value();
                let head = from_node::<Head>(&node);
                assert_eq!(head, from_value::<Head>(&value), "{text}");
                let comp = from_node::<Composition>(&node);
                assert_eq!(comp, from_value::<Composition>(&value), "{text}");
                read += usize::from(head.is_some()) + usize::from(comp.is_some());
            }
        }
        assert!(read > 8, "only {read} read");
    }
}
