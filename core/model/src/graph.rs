//! The dependency graph of one cluster (spec §11): structured edges
//! (cdrom → ISO, disk image → DiskImage, clone → TemplateVM, template →
//! CTTemplate) plus `proxops/depends-on`, resolved only inside the cluster's
//! own composition. Unknown references and cycles are errors; every object
//! gets a topological level so prerequisites are created first.

use std::collections::{BTreeMap, BTreeSet};

use crate::desired::{DesiredObject, object_diag};
use crate::diag::{Diagnostic, YamlIndex};
use crate::manifest::{self, CdromIntent, Spec};
use crate::names::{Kind, Ref};

/// A prerequisite edge and the field that declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub target: Ref,
    pub field: String,
}

/// A guest reference of a cluster-level object (`web-01`, `LXC:dns`), as
/// an edge to the guest manifest it names among `objects` (a bare name
/// that names none is looked for as a VM, which the error then names).
fn guest_edge(text: &str, field: String, objects: &BTreeMap<Ref, DesiredObject>) -> Option<Edge> {
    let target =
        crate::cluster::spec::parse_guest_ref(text, |r| objects.contains_key(r)).or_else(|| {
            Some(Ref {
                kind: Kind::VM,
                name: crate::names::ResourceName::new(text.trim()).ok()?,
            })
        })?;
    Some(Edge { target, field })
}

/// Every prerequisite an object declares, in field order; guest
/// references are resolved among `objects`.
pub fn edges(object: &DesiredObject, objects: &BTreeMap<Ref, DesiredObject>) -> Vec<Edge> {
    let mut out = Vec::new();
    let pool = |name: &crate::names::ResourceName, field: &str| Edge {
        target: Ref {
            kind: Kind::Pool,
            name: name.clone(),
        },
        field: field.to_owned(),
    };
    match &object.spec {
        Spec::Vm(v) | Spec::TemplateVm(v) => {
            if let Some(h) = &v.hardware
                && let Some(c) = &h.cdrom
                && let CdromIntent::Attach(name) = c.intent()
            {
                out.push(Edge {
                    target: Ref {
                        kind: Kind::ISO,
                        name,
                    },
                    field: "spec.hardware.cdrom.iso".into(),
                });
            }
            for (i, d) in v.disks.iter().enumerate() {
                if let Some(img) = &d.image {
                    out.push(Edge {
                        target: Ref {
                            kind: Kind::DiskImage,
                            name: img.clone(),
                        },
                        field: format!("spec.disks[{i}].image"),
                    });
                }
            }
            if let Some(src) = &v.clone {
                out.push(Edge {
                    target: Ref {
                        kind: Kind::TemplateVM,
                        name: src.clone(),
                    },
                    field: "spec.clone".into(),
                });
            }
        }
        Spec::Lxc(l) | Spec::TemplateCt(l) => {
            out.push(Edge {
                target: Ref {
                    kind: Kind::CTTemplate,
                    name: l.template.clone(),
                },
                field: "spec.template".into(),
            });
        }
        Spec::Iso(_) | Spec::CtTemplate(_) | Spec::DiskImage(_) | Spec::Pool(_) => {}
        Spec::BackupJob(b) => {
            for (list, path) in [(&b.guests, "spec.guests"), (&b.exclude, "spec.exclude")] {
                out.extend(
                    list.iter()
                        .enumerate()
                        .filter_map(|(i, g)| guest_edge(g, format!("{path}[{i}]"), objects)),
                );
            }
            out.extend(b.pool.as_ref().map(|p| pool(p, "spec.pool")));
        }
        Spec::HaResource(h) => {
            out.extend(guest_edge(&h.guest, "spec.guest".to_owned(), objects));
        }
        Spec::ReplicationJob(j) => {
            out.extend(guest_edge(&j.guest, "spec.guest".to_owned(), objects));
        }
        Spec::FirewallAlias(_)
        | Spec::FirewallIpSet(_)
        | Spec::SecurityGroup(_)
        | Spec::ClusterFirewall(_) => {}
        Spec::HaRule(r) => {
            out.extend(r.resources.iter().enumerate().map(|(i, name)| Edge {
                target: Ref {
                    kind: Kind::HAResource,
                    name: name.clone(),
                },
                field: format!("spec.resources[{i}]"),
            }));
        }
    }
    out.extend(firewall_edges(object, objects));
    if let Some(p) = object.spec.vm().and_then(|v| v.pool.as_ref()) {
        out.push(pool(p, "spec.pool"));
    }
    if let Some(p) = object.spec.lxc().and_then(|v| v.pool.as_ref()) {
        out.push(pool(p, "spec.pool"));
    }
    if let Some(text) = object
        .metadata
        .annotations
        .get(manifest::ANNOTATION_DEPENDS_ON)
        && let Ok(refs) = manifest::parse_depends_on(text)
    {
        let field = format!("metadata.annotations.{}", manifest::ANNOTATION_DEPENDS_ON);
        out.extend(refs.into_iter().map(|target| Edge {
            target,
            field: field.clone(),
        }));
    }
    out
}

/// The firewall objects of the repository a manifest's rules and IP set
/// entries name, found by their PVE names (an alias's ignoring case). A
/// name no manifest holds is not an edge: the reference check tells it.
fn firewall_edges(object: &DesiredObject, objects: &BTreeMap<Ref, DesiredObject>) -> Vec<Edge> {
    let refs = crate::firewall_repo::document_refs(&object.spec);
    if refs.is_empty() {
        return Vec::new();
    }
    refs.into_iter()
        .filter_map(|r| {
            let target = objects.iter().find_map(|(key, o)| {
                let name = crate::firewall_repo::object_name(&key.name, &o.spec)?;
                (key.kind == r.kind && name.eq_ignore_ascii_case(&r.name)).then(|| key.clone())
            })?;
            Some(Edge {
                target,
                field: r.field,
            })
        })
        .collect()
}

/// Checks references, clone rules and cycles; returns each object's
/// prerequisites and level. Problems go to `diags`.
pub(crate) fn resolve(
    objects: &BTreeMap<Ref, DesiredObject>,
    indexes: &BTreeMap<String, YamlIndex>,
    diags: &mut Vec<Diagnostic>,
) -> BTreeMap<Ref, (BTreeSet<Ref>, u32)> {
    let mut deps: BTreeMap<Ref, BTreeSet<Ref>> = BTreeMap::new();
    for (r, o) in objects {
        let mut set = BTreeSet::new();
        for e in edges(o, objects) {
            if &e.target == r {
                diags.push(object_diag(
                    o,
                    indexes,
                    &e.field,
                    format!("{r} cannot depend on itself"),
                ));
                continue;
            }
            match objects.get(&e.target) {
                Some(target) => {
                    if e.field == "spec.clone" {
                        check_clone(o, target, indexes, diags);
                    }
                    set.insert(e.target);
                }
                None => diags.push(unknown_reference(o, &e, objects, indexes)),
            }
        }
        deps.insert(r.clone(), set);
    }

    let (level, remaining) = levels(&deps);
    if !remaining.is_empty() {
        let names: Vec<String> = remaining.iter().map(|r| r.to_string()).collect();
        for r in &remaining {
            if let Some(o) = objects.get(r) {
                let field = edges(o, objects)
                    .into_iter()
                    .find(|e| remaining.contains(&e.target))
                    .map(|e| e.field)
                    .unwrap_or_else(|| "metadata.name".into());
                diags.push(object_diag(
                    o,
                    indexes,
                    &field,
                    format!(
                        "dependency cycle among {}: remove one of the edges",
                        names.join(", ")
                    ),
                ));
            }
        }
    }
    deps.into_iter()
        .map(|(r, d)| {
            let l = level.get(&r).copied().unwrap_or(0);
            (r, (d, l))
        })
        .collect()
}

/// The diagnostic of an edge to a manifest the cluster does not have: what
/// the cluster has of that name under other kinds, or where to list it,
/// and the nearest name of the kind.
fn unknown_reference(
    o: &DesiredObject,
    e: &Edge,
    objects: &BTreeMap<Ref, DesiredObject>,
    indexes: &BTreeMap<String, YamlIndex>,
) -> Diagnostic {
    let other_kinds: Vec<String> = Kind::ALL
        .iter()
        .filter(|k| {
            objects.contains_key(&Ref {
                kind: **k,
                name: e.target.name.clone(),
            })
        })
        .map(|k| format!("{k}/{}", e.target.name))
        .collect();
    let hint = if other_kinds.is_empty() {
        "list its manifest in this cluster's resources.yaml".to_owned()
    } else {
        format!(
            "this cluster has {} but that is not a {}",
            other_kinds.join(", "),
            e.target.kind
        )
    };
    let near = crate::suggest::did_you_mean(
        e.target.name.as_str(),
        objects
            .keys()
            .filter(|k| k.kind == e.target.kind)
            .map(|k| k.name.as_str()),
    );
    object_diag(
        o,
        indexes,
        &e.field,
        format!("unknown reference {}: {hint}", e.target),
    )
    .with_hint(near)
}

/// Each object's level by Kahn's algorithm over the resolved edges, and
/// what remains: the objects in a cycle.
fn levels(deps: &BTreeMap<Ref, BTreeSet<Ref>>) -> (BTreeMap<Ref, u32>, BTreeSet<Ref>) {
    let mut level: BTreeMap<Ref, u32> = BTreeMap::new();
    let mut remaining: BTreeSet<Ref> = deps.keys().cloned().collect();
    loop {
        let ready: Vec<Ref> = remaining
            .iter()
            .filter(|r| {
                deps.get(*r).is_some_and(|d| {
                    d.iter()
                        .all(|p| level.contains_key(p) || !deps.contains_key(p))
                })
            })
            .cloned()
            .collect();
        if ready.is_empty() {
            break;
        }
        for r in ready {
            let l = deps
                .get(&r)
                .map(|d| {
                    d.iter()
                        .filter_map(|p| level.get(p))
                        .map(|l| l + 1)
                        .max()
                        .unwrap_or(0)
                })
                .unwrap_or(0);
            level.insert(r.clone(), l);
            remaining.remove(&r);
        }
    }
    (level, remaining)
}

fn check_clone(
    vm: &DesiredObject,
    template: &DesiredObject,
    indexes: &BTreeMap<String, YamlIndex>,
    diags: &mut Vec<Diagnostic>,
) {
    // A VM on another node than its template is no input error: PVE
    // clones there (`target`) when the template's volumes are on shared
    // storage, which only the live cluster can tell; the planner decides
    // per VM.
    let (Some((_, vid)), Some((_, tid))) = (vm.spec.guest_id(), template.spec.guest_id()) else {
        return;
    };
    if vid == tid {
        diags.push(object_diag(
            vm,
            indexes,
            "spec.clone",
            format!("the VM's vmid {vid} equals its template's vmid"),
        ));
    }
}
