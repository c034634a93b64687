//! `adopt --vmid N` / `adopt --name NAME`: adoption of one guest. Which
//! guest is meant ([`pick_guest`]), whether a manifest already manages it
//! ([`already_managed`]), and the adoption cut down to its manifest
//! ([`only_guest`]).
//!
//! Must never: pick a guest a name leaves in doubt (two guests of one name
//! are an error naming both), or keep another object's file. No I/O.

use proxops_model::live::LiveSnapshot;
use proxops_model::names::Vmid;
use proxops_model::repo::{ClusterDesired, DesiredObject};

use super::Adoption;

/// How the operator named the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestPick {
    Vmid(Vmid),
    /// Its PVE name.
    Name(String),
}

/// The vmid of the one guest of `snapshot` that `pick` names, or why there
/// is none: no such guest, or a name several guests carry (each named, so
/// `--vmid` can say which).
pub fn pick_guest(snapshot: &LiveSnapshot, pick: &GuestPick) -> Result<Vmid, String> {
    match pick {
        GuestPick::Vmid(v) => snapshot
            .guest_by_vmid(*v)
            .map(|g| g.vmid)
            .ok_or_else(|| format!("--vmid {v}: no guest with that id on PVE")),
        GuestPick::Name(name) => {
            let found: Vec<_> = snapshot
                .guests
                .values()
                .filter(|g| &g.name == name)
                .collect();
            match found.as_slice() {
                [one] => Ok(one.vmid),
                [] => {
                    let names = snapshot.guests.values().map(|g| g.name.as_str());
                    let hint = proxops_model::suggest::did_you_mean(name, names)
                        .map(|h| format!(" ({h})"))
                        .unwrap_or_default();
                    Err(format!(
                        "--name {name:?}: no guest of that name on PVE{hint}"
                    ))
                }
                many => {
                    let ids: Vec<String> = many
                        .iter()
                        .map(|g| format!("{} on {}", g.vmid, g.node))
                        .collect();
                    Err(format!(
                        "--name {name:?}: {} guests carry that name ({}); use --vmid",
                        many.len(),
                        ids.join(", ")
                    ))
                }
            }
        }
    }
}

/// The manifest of `desired` that manages guest `vmid`: its `spec.vmid`,
/// or the `proxops/adopted-vmid` annotation that claims it.
pub fn already_managed(desired: &ClusterDesired, vmid: Vmid) -> Option<&DesiredObject> {
    desired.objects.values().find(|o| {
        o.spec.guest_id().is_some_and(|(_, v)| v == vmid) || o.metadata.adopted_vmid() == Some(vmid)
    })
}

/// `adoption` cut down to guest `vmid`: its manifest, its gaps, its
/// INCOMPLETE entry and its `resources.yaml` line; no other file, no
/// skipped list. Empty when the guest was not adopted.
pub fn only_guest(adoption: Adoption, vmid: Vmid) -> Adoption {
    let Some(path) = adoption.guests.get(&vmid).cloned() else {
        return Adoption::default();
    };
    let id = vmid.to_string();
    let ours = |line: &str| line.starts_with(&format!("{path}:"));
    // `<kind-dir>/<cluster>/<name>.yaml`: the manifest's name.
    let name = path
        .rsplit('/')
        .next()
        .and_then(|f| f.strip_suffix(".yaml"))
        .unwrap_or_default()
        .to_owned();
    Adoption {
        files: adoption
            .files
            .into_iter()
            .filter(|(p, _)| *p == path)
            .collect(),
        resources_lines: adoption
            .resources_lines
            .into_iter()
            .filter(|l| l.ends_with(&format!("/{path}")))
            .collect(),
        gaps: adoption.gaps.into_iter().filter(|g| g.id == id).collect(),
        incomplete: adoption
            .incomplete
            .into_iter()
            .filter(|l| ours(l))
            .collect(),
        skipped: Vec::new(),
        cipassword_guests: adoption
            .cipassword_guests
            .into_iter()
            .filter(|g| g.rsplit('/').next() == Some(name.as_str()))
            .collect(),
        guests: [(vmid, path)].into(),
    }
}
