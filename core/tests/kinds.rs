//! Every kind is in every place docs/architecture.md's "Add a kind" recipe
//! names that a compiler cannot check: its docs page, its schema file,
//! `explain`, the scaffold `proxops init` writes, and for a cluster-level
//! kind the endpoints the reader lists (and recordings keep). What differs
//! per kind in code is one exhaustive match each (`Kind::class`,
//! `Kind::dir`, `Kind::word`, …), so a kind missing there does not compile.

#![allow(clippy::unwrap_used)]
// The check reads the docs pages and schema files from disk.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::PathBuf;

use proxops_core::names::{Class, ClusterName, Kind};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Kinds `proxops init` has no example of, each with its reason.
const NOT_IN_SCAFFOLD: &[(Kind, &str)] = &[
    (
        Kind::ReplicationJob,
        "needs a guest on ZFS storage and a second node; the scaffold converges on one node",
    ),
    (
        Kind::FirewallAlias,
        "its addresses are the operator's own networks",
    ),
    (
        Kind::FirewallIPSet,
        "its addresses are the operator's own networks",
    ),
    (
        Kind::SecurityGroup,
        "its rules admit the operator's own traffic",
    ),
    (
        Kind::ClusterFirewall,
        "enabling a cluster's firewall from a scaffold risks locking its operator out of ports 22 and 8006",
    ),
];

/// `Kind::ALL` holds every kind: the match has no `_`, so a new variant
/// does not compile until it is numbered here, and the count then fails
/// until ALL has it.
#[test]
fn all_holds_every_kind_once() {
    let number = |k: Kind| match k {
        Kind::VM => 0,
        Kind::TemplateVM => 1,
        Kind::LXC => 2,
        Kind::TemplateCT => 3,
        Kind::ISO => 4,
        Kind::CTTemplate => 5,
        Kind::DiskImage => 6,
        Kind::Pool => 7,
        Kind::BackupJob => 8,
        Kind::HAResource => 9,
        Kind::HARule => 10,
        Kind::ReplicationJob => 11,
        Kind::FirewallAlias => 12,
        Kind::FirewallIPSet => 13,
        Kind::SecurityGroup => 14,
        Kind::ClusterFirewall => 15,
    };
    let mut seen: Vec<usize> = Kind::ALL.map(number).to_vec();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (0..Kind::ALL.len()).collect::<Vec<_>>());
}

#[test]
fn every_kind_has_a_docs_page_that_names_it() {
    for k in Kind::ALL {
        let page = repo_root().join(format!("docs/resources/{}.md", k.word()));
        let text = std::fs::read_to_string(&page)
            .unwrap_or_else(|e| panic!("{k}: {}: {e}", page.display()));
        assert!(
            text.contains(k.as_str()),
            "{} does not name {k}",
            page.display()
        );
    }
}

#[test]
fn every_kind_has_its_schema_file_and_is_explained() {
    for k in Kind::ALL {
        let file = repo_root().join(format!("docs/schema/{}.json", k.word()));
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{k}: {}: {e}", file.display()));
        let on_disk: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            on_disk,
            proxops_core::schema::kind_schema(k),
            "{} is not {k}'s schema",
            file.display()
        );
        assert_eq!(proxops_core::schema::kind_by_name(k.word()), Some(k));
        let explained = proxops_core::schema::explain(k.word(), false)
            .unwrap_or_else(|e| panic!("explain {}: {e}", k.word()));
        assert!(!explained.is_empty(), "explain {} says nothing", k.word());
    }
}

#[test]
fn proxops_init_writes_an_example_of_every_kind_but_the_listed_ones() {
    let files = proxops_core::scaffold::scaffold(&ClusterName::new("lab").unwrap());
    for k in Kind::ALL {
        let has = files.iter().any(|(path, text)| {
            path.starts_with(&format!("{}/", k.dir())) && text.contains(&format!("kind: {k}\n"))
        });
        let exempt = NOT_IN_SCAFFOLD.iter().any(|(e, _)| *e == k);
        assert!(
            has != exempt,
            "{k}: the scaffold {} an example, and NOT_IN_SCAFFOLD {} it",
            if has { "has" } else { "lacks" },
            if exempt { "lists" } else { "does not list" }
        );
    }
}

/// A cluster-level kind is read (and recorded, and replayed) through its
/// endpoints; a kind of another class has none (the firewall's lists are
/// read and written through their own calls, `Class::Firewall`).
#[test]
fn exactly_the_cluster_level_kinds_have_endpoints() {
    for k in Kind::ALL {
        let ep = proxops_core::cluster::endpoints(k);
        match k.class() {
            Class::ClusterObject => {
                assert_eq!(ep.map(|e| e.kind), Some(k), "{k} has no endpoints")
            }
            Class::Guest(_) | Class::StorageFile | Class::Firewall => {
                assert!(ep.is_none(), "{k}")
            }
        }
    }
    assert_eq!(
        proxops_core::cluster::KINDS.len(),
        Kind::ALL
            .iter()
            .filter(|k| k.class() == Class::ClusterObject)
            .count()
    );
}
