//! Which paths of a GitOps repository are desired state, shared by the work
//! tree reader and the commit reader so both modes see the same shape.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The kind roots of the tree (spec §2.1): every file under them is read.
pub const KIND_ROOTS: [&str; 12] = [
    "vm",
    "lxc",
    "iso",
    "ctt",
    "templatevm",
    "templatect",
    "diskimage",
    "pool",
    "backupjob",
    "haresource",
    "harule",
    "replicationjob",
];

/// The optional process-wide configuration file at the repository root.
pub(crate) const PROCESS_CONFIG: &str = "proxops.yaml";

/// The directory holding one sub-directory per cluster.
pub(crate) const CLUSTERS: &str = "clusters";

/// The desired-state files of a repository, as read from the work tree or a
/// commit.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RepoTree {
    /// Repo-relative path (`/`-separated, e.g. `clusters/pve1/resources.yaml`)
    /// to the file's bytes: `proxops.yaml`, every file under `clusters/` and
    /// every file under the kind roots. Sorted, so iteration is deterministic.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The name of every directory directly under `clusters/`, including one
    /// that holds no file at all (local mode; git itself cannot record an
    /// empty directory, so a commit never has one) — composition reports a
    /// `clusters/<name>/` without `resources.yaml`.
    pub cluster_dirs: BTreeSet<String>,
}

impl fmt::Debug for RepoTree {
    /// Paths and sizes only: file bytes may be large and SOPS files, while
    /// encrypted, have no business in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RepoTree")
            .field(
                "files",
                &self
                    .files
                    .iter()
                    .map(|(p, b)| (p, b.len()))
                    .collect::<Vec<_>>(),
            )
            .field("cluster_dirs", &self.cluster_dirs)
            .finish()
    }
}

impl RepoTree {
    /// The borrowed view core's repository loader takes.
    pub fn as_input(&self) -> proxops_model::repo::RepoInput<'_> {
        proxops_model::repo::RepoInput {
            files: &self.files,
            cluster_dirs: &self.cluster_dirs,
        }
    }
}

/// True for the top-level directories whose whole content is desired state.
pub(crate) fn is_scoped_top_dir(name: &str) -> bool {
    name == CLUSTERS || KIND_ROOTS.contains(&name)
}

/// Records `rel` (a path of a directory) as a cluster directory when it sits
/// directly under `clusters/`.
pub(crate) fn note_cluster_dir(tree: &mut RepoTree, rel: &str) {
    if let Some(name) = rel.strip_prefix("clusters/")
        && !name.is_empty()
        && !name.contains('/')
    {
        tree.cluster_dirs.insert(name.to_string());
    }
}

#[cfg(test)]
mod tests {
    /// A kind whose folder is not read would be a kind no repository can
    /// declare: the roots are exactly the kinds' folders.
    #[test]
    fn the_kind_roots_are_every_kinds_folder() {
        let mut roots: Vec<&str> = super::KIND_ROOTS.to_vec();
        let mut dirs: Vec<&str> = proxops_model::names::Kind::ALL.map(|k| k.dir()).to_vec();
        roots.sort_unstable();
        dirs.sort_unstable();
        assert_eq!(roots, dirs);
    }
}
