//! Reads the desired-state files of one commit straight from the object
//! database (URL mode has no checkout). Symlinks recorded in the commit are
//! resolved inside the commit's own tree, mirroring what the work-tree reader
//! does on disk, so a repository gives the same files in both modes.

use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::objs::tree::EntryMode;

use proxops_model::bounds::READ_LIMIT;

use crate::GitError;
use crate::error::detail;
use crate::scope::{PROCESS_CONFIG, RepoTree, is_scoped_top_dir, note_cluster_dir};

/// A symlink chain longer than this is treated as a loop and skipped.
const MAX_LINK_HOPS: usize = 8;

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Reads `proxops.yaml`, everything under `clusters/` and under the kind
/// roots from `commit`.
///
/// - A symlink whose target (relative, normalized against the link's
///   directory) stays inside the commit's tree and outside `.git` is
///   followed: to a file, its bytes are served under the link's path; to a
///   directory, that directory is walked under the link's path. Absolute
///   targets, targets escaping the root, dangling links, chains longer than
///   eight links, targets reached through another symlinked directory, and
///   directory links back into their own ancestors are skipped.
/// - Submodule entries (nested repositories) are skipped: not ours.
/// - Names that are not UTF-8 are skipped: no manifest can list them.
pub(crate) fn read_commit_tree(repo: &gix::Repository, commit: &str) -> Result<RepoTree, GitError> {
    let read_err = |e: &(dyn std::error::Error + 'static)| GitError::ReadCommit {
        commit: commit.to_string(),
        detail: detail(e),
    };
    let id = ObjectId::from_hex(commit.as_bytes()).map_err(|e| read_err(&e))?;
    let root = repo
        .find_commit(id)
        .map_err(|e| read_err(&e))?
        .tree()
        .map_err(|e| read_err(&e))?;
    let reader = CommitReader { repo, root };
    let mut out = RepoTree::default();
    reader.walk_top(&mut out).map_err(|e| read_err(&*e))?;
    Ok(out)
}

struct CommitReader<'r> {
    repo: &'r gix::Repository,
    root: gix::Tree<'r>,
}

/// A tree or blob an entry stands for, and where it really sits in the
/// commit (a symlink's resolved path).
struct Resolved {
    mode: EntryMode,
    oid: ObjectId,
    real: String,
}

impl CommitReader<'_> {
    fn walk_top(&self, out: &mut RepoTree) -> Result<(), BoxError> {
        let mut stack = vec![self.root.id];
        for (name, mode, oid) in entries(&self.root)? {
            let Some(r) = self.resolve(&name, mode, oid)? else {
                continue;
            };
            if name == PROCESS_CONFIG && r.mode.is_blob() {
                out.files.insert(name, self.blob(r.oid)?);
            } else if is_scoped_top_dir(&name) && r.mode.is_tree() {
                self.walk_dir(&r, &name, out, &mut stack)?;
            }
        }
        Ok(())
    }

    /// A blob's bytes. A blob longer than [`READ_LIMIT`] is longer than any
    /// cap core applies: it is not inflated at all, and `READ_LIMIT` zero
    /// bytes stand for it, which core refuses by their length before
    /// looking at any of them.
    fn blob(&self, oid: ObjectId) -> Result<Vec<u8>, BoxError> {
        if self.repo.find_header(oid)?.size() > READ_LIMIT as u64 {
            return Ok(vec![0; READ_LIMIT]);
        }
        Ok(self.repo.find_blob(oid)?.data.clone())
    }

    /// Walks the tree `dir`, storing its files under `rel`. Relative symlink
    /// targets resolve against `dir.real`, where the tree really sits (it
    /// differs from `rel` below a directory symlink), as the filesystem
    /// resolves them.
    fn walk_dir(
        &self,
        dir: &Resolved,
        rel: &str,
        out: &mut RepoTree,
        stack: &mut Vec<ObjectId>,
    ) -> Result<(), BoxError> {
        if stack.contains(&dir.oid) {
            return Ok(());
        }
        note_cluster_dir(out, rel);
        stack.push(dir.oid);
        for (name, mode, oid) in entries(&self.repo.find_tree(dir.oid)?)? {
            let path = format!("{rel}/{name}");
            match self.resolve(&format!("{}/{name}", dir.real), mode, oid)? {
                Some(r) if r.mode.is_tree() => self.walk_dir(&r, &path, out, stack)?,
                Some(r) if r.mode.is_blob() => {
                    out.files.insert(path, self.blob(r.oid)?);
                }
                _ => {}
            }
        }
        stack.pop();
        Ok(())
    }

    /// The entry at `real` itself, or for a symlink the tree or blob its
    /// chain ends at; `None` for anything not to be read.
    fn resolve(
        &self,
        real: &str,
        mode: EntryMode,
        oid: ObjectId,
    ) -> Result<Option<Resolved>, BoxError> {
        if mode.is_tree() || mode.is_blob() {
            return Ok(Some(Resolved {
                mode,
                oid,
                real: real.to_string(),
            }));
        }
        if !mode.is_link() {
            return Ok(None);
        }
        let (mut link_path, mut link_oid) = (real.to_string(), oid);
        for _ in 0..MAX_LINK_HOPS {
            let blob = self.repo.find_blob(link_oid)?;
            let Ok(target) = std::str::from_utf8(&blob.data) else {
                return Ok(None);
            };
            let base = link_path.rsplit_once('/').map_or("", |(dir, _)| dir);
            let Some(components) = normalize(base, target) else {
                return Ok(None);
            };
            if components.first().is_some_and(|c| c == ".git") {
                return Ok(None);
            }
            let Some(entry) = self
                .root
                .lookup_entry(components.iter().map(String::as_str))?
            else {
                return Ok(None);
            };
            let mode = entry.mode();
            let target_path = components.join("/");
            if mode.is_link() {
                link_path = target_path;
                link_oid = entry.object_id();
                continue;
            }
            return Ok((mode.is_tree() || mode.is_blob()).then(|| Resolved {
                mode,
                oid: entry.object_id(),
                real: target_path,
            }));
        }
        Ok(None)
    }
}

fn entries(tree: &gix::Tree<'_>) -> Result<Vec<(String, EntryMode, ObjectId)>, BoxError> {
    let mut out = Vec::new();
    for entry in tree.iter() {
        let entry = entry?;
        if let Ok(name) = entry.inner.filename.to_str() {
            out.push((
                name.to_string(),
                entry.inner.mode,
                entry.inner.oid.to_owned(),
            ));
        }
    }
    Ok(out)
}

/// Joins a relative symlink `target` onto `base` (a repo-relative directory)
/// and resolves `.` and `..`; `None` for an absolute target, one climbing
/// above the root, or one naming the root itself.
fn normalize(base: &str, target: &str) -> Option<Vec<String>> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<String> = base
        .split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p.to_string()),
        }
    }
    (!parts.is_empty()).then_some(parts)
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn normalize_resolves_relative_targets_inside_the_root() {
        assert_eq!(
            normalize("vm/base", "a.yaml"),
            Some(vec!["vm".into(), "base".into(), "a.yaml".into()])
        );
        assert_eq!(
            normalize("vm/base", "../../lxc/./b.yaml"),
            Some(vec!["lxc".into(), "b.yaml".into()])
        );
    }

    #[test]
    fn normalize_refuses_absolute_escaping_and_root_targets() {
        assert_eq!(normalize("vm", "/etc/passwd"), None);
        assert_eq!(normalize("vm", "../../x"), None);
        assert_eq!(normalize("vm", ".."), None);
    }
}
