//! Repository discovery (local mode): from a start directory, walk upward to
//! the innermost directory holding a `.git` entry. Reads directory metadata
//! only; never opens a repository, never touches the network.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::GitError;

/// The root of a GitOps work tree: a canonical, absolute directory that holds
/// a `.git` entry (a directory, or a file for worktrees and submodules).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RepoRoot(PathBuf);

impl RepoRoot {
    /// The root directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Takes a directory as the root without walking upward, for callers that
    /// were given the root itself (an absolute `git.path`). The directory must
    /// exist and hold a `.git` entry.
    pub fn from_dir(dir: &Path) -> Result<RepoRoot, GitError> {
        let canonical = canonical_dir(dir)?;
        if has_git_entry(&canonical) {
            Ok(RepoRoot(canonical))
        } else {
            Err(GitError::NoRepository {
                start: dir.to_path_buf(),
            })
        }
    }
}

impl RepoRoot {
    /// Takes a directory named explicitly by the operator (`--git-path`,
    /// `PROXOPS_GIT_PATH`) as the work tree root, with or without a `.git`
    /// entry: the operator said which tree is desired state (a mounted or
    /// rsync'd checkout, a fixture). No upward walk happens.
    pub fn explicit(dir: &Path) -> Result<RepoRoot, GitError> {
        canonical_dir(dir).map(RepoRoot)
    }

    /// Whether the root holds a `.git` entry (a commit id can be read).
    pub fn is_git(&self) -> bool {
        has_git_entry(&self.0)
    }
}

impl AsRef<Path> for RepoRoot {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl fmt::Display for RepoRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.display().fmt(f)
    }
}

/// The directory discovery starts from: `--git-path` if given, else the
/// `PROXOPS_GIT_PATH` environment value if set and non-empty, else the
/// process's current directory. A relative flag or env value is taken
/// relative to `cwd`. Pure: the caller reads the flag, the env and the CWD.
pub fn start_dir(
    git_path_flag: Option<&Path>,
    env_git_path: Option<&OsStr>,
    cwd: &Path,
) -> PathBuf {
    let chosen = git_path_flag
        .filter(|p| !p.as_os_str().is_empty())
        .or_else(|| env_git_path.filter(|v| !v.is_empty()).map(Path::new));
    match chosen {
        Some(p) => cwd.join(p),
        None => cwd.to_path_buf(),
    }
}

/// Walks upward from `start` (inclusive) to the first directory holding an
/// entry named `.git`; the innermost one wins, so a repository nested in
/// another resolves to itself. `start` is canonicalized first (symlinks
/// resolved), so the returned root is canonical too.
pub fn discover(start: &Path) -> Result<RepoRoot, GitError> {
    let canonical = canonical_dir(start)?;
    canonical
        .ancestors()
        .find(|dir| has_git_entry(dir))
        .map(|dir| RepoRoot(dir.to_path_buf()))
        .ok_or_else(|| GitError::NoRepository {
            start: start.to_path_buf(),
        })
}

fn canonical_dir(dir: &Path) -> Result<PathBuf, GitError> {
    let canonical = dir.canonicalize().map_err(|source| GitError::StartDir {
        start: dir.to_path_buf(),
        source,
    })?;
    if canonical.is_dir() {
        Ok(canonical)
    } else {
        Err(GitError::StartDir {
            start: dir.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        })
    }
}

/// A `.git` directory or a `.git` file (worktrees, submodules) both count;
/// `symlink_metadata` so a dangling `.git` symlink still marks the root.
fn has_git_entry(dir: &Path) -> bool {
    dir.join(".git").symlink_metadata().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_wins_over_env_and_cwd() {
        let got = start_dir(
            Some(Path::new("/flag")),
            Some(OsStr::new("/env")),
            Path::new("/cwd"),
        );
        assert_eq!(got, PathBuf::from("/flag"));
    }

    #[test]
    fn env_wins_over_cwd_when_no_flag() {
        let got = start_dir(None, Some(OsStr::new("/env")), Path::new("/cwd"));
        assert_eq!(got, PathBuf::from("/env"));
    }

    #[test]
    fn cwd_is_used_when_neither_flag_nor_env() {
        assert_eq!(
            start_dir(None, None, Path::new("/cwd")),
            PathBuf::from("/cwd")
        );
    }

    #[test]
    fn empty_env_value_counts_as_unset() {
        assert_eq!(
            start_dir(None, Some(OsStr::new("")), Path::new("/cwd")),
            PathBuf::from("/cwd")
        );
    }

    #[test]
    fn relative_flag_is_taken_from_cwd() {
        let got = start_dir(Some(Path::new("sub/dir")), None, Path::new("/cwd"));
        assert_eq!(got, PathBuf::from("/cwd/sub/dir"));
    }
}
