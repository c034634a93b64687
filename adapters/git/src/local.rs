//! Local mode: the work tree, uncommitted edits included, is the desired
//! state (spec §2.3 step 5, §22.7). This module reads it and the HEAD commit
//! id; it never writes, resets or checks out anything.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proxops_model::bounds::READ_LIMIT;
use proxops_model::repo::{FanOut, InOrder};

use crate::error::detail;
use crate::scope::{CLUSTERS, KIND_ROOTS, PROCESS_CONFIG, RepoTree, note_cluster_dir};
use crate::{GitError, RepoRoot};

/// The id (40 hex digits) of the commit HEAD points at, or `None` while the
/// repository has no commit yet (unborn HEAD). Works for worktrees, whose
/// `.git` is a file. The repository is opened isolated: no global or system
/// git configuration and no `GIT_*` environment variables are consulted.
pub fn head_commit(root: &RepoRoot) -> Result<Option<String>, GitError> {
    let repo = gix::open_opts(root.path(), gix::open::Options::isolated()).map_err(|e| {
        GitError::Open {
            path: root.path().to_path_buf(),
            detail: detail(&e),
        }
    })?;
    let head_err = |e: &(dyn std::error::Error + 'static)| GitError::Head {
        path: root.path().to_path_buf(),
        detail: detail(e),
    };
    let head = repo.head().map_err(|e| head_err(&e))?;
    if head.is_unborn() {
        return Ok(None);
    }
    let commit = repo.head_commit().map_err(|e| head_err(&e))?;
    Ok(Some(commit.id.to_string()))
}

/// Reads the desired-state files of the work tree at `root`: `proxops.yaml`,
/// everything under `clusters/` and under each kind root ([`crate::KIND_ROOTS`]).
/// Uncommitted edits and untracked files are included; nothing else at the
/// top level is listed or read.
///
/// - `.git` entries are skipped, and a directory holding its own `.git` (a
///   nested repository or submodule) is not entered: its files are not ours.
/// - A symlink is followed only when its target resolves inside the root
///   (and not into `.git`); a symlink pointing outside the root, a dangling
///   one, or one looping back to a directory being walked is skipped. No file
///   above the root is ever read.
/// - Only regular files are read (never a FIFO or device).
/// - Names that are not UTF-8 are skipped: no manifest can list them.
/// - A file that vanishes between listing and reading (an editor's rename)
///   is skipped; any other read failure is an error.
pub fn read_tree(root: &RepoRoot) -> Result<RepoTree, GitError> {
    read_tree_with(root, &InOrder)
}

/// [`read_tree`], the files read through `fan_out` (the walk lists them
/// first; a caller with threads to give passes its own). They are taken
/// in walk order whatever order they were read in: a 10,000-manifest
/// repository spent a sixth of a `diff --replay` reading its files one
/// after another.
pub fn read_tree_with(root: &RepoRoot, fan_out: &dyn FanOut) -> Result<RepoTree, GitError> {
    let walker = Walker {
        root: root.path(),
        git_dir: root.path().join(".git"),
    };
    let mut walked = Walked::default();
    // A walk that fails still has its files before the failure read: one
    // of them failing is the error a walk reading as it went would give.
    let walk = std::iter::once(PROCESS_CONFIG)
        .chain(std::iter::once(CLUSTERS))
        .chain(KIND_ROOTS)
        .try_for_each(|name| {
            let path = root.path().join(name);
            let mut stack = vec![root.path().to_path_buf()];
            let expect = if name == PROCESS_CONFIG {
                Expect::File
            } else {
                Expect::Dir
            };
            walker.visit(&path, None, name, &mut walked, &mut stack, expect)
        });
    let Walked { mut tree, files } = walked;
    for (file, read) in files.iter().zip(read_all(&files, fan_out)) {
        match read {
            Ok(bytes) => {
                tree.files.insert(file.rel.clone(), bytes);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(GitError::Io {
                    path: file.path.clone(),
                    source,
                });
            }
        }
    }
    walk.map(|()| tree)
}

/// What the walk has found so far: the directories it noted, the files
/// it will read.
#[derive(Default)]
struct Walked {
    tree: RepoTree,
    files: Vec<Found>,
}

/// A file the walk found, to be read.
struct Found {
    /// Repo-relative, `/`-separated.
    rel: String,
    /// As listed (what an error names).
    path: PathBuf,
    /// Where its bytes are, a symlink followed.
    real: PathBuf,
}

/// Every file's bytes, in `files`' order, each read once through
/// `fan_out`.
fn read_all(files: &[Found], fan_out: &dyn FanOut) -> Vec<io::Result<Vec<u8>>> {
    let slots: Vec<OnceLock<io::Result<Vec<u8>>>> = files.iter().map(|_| OnceLock::new()).collect();
    fan_out.run(files.len(), &|i| {
        if let (Some(file), Some(slot)) = (files.get(i), slots.get(i)) {
            // Each job fills its own slot once.
            let _ = slot.set(read_bounded(&file.real));
        }
    });
    // A job that did not run (its thread died) leaves its file to be read
    // here.
    slots
        .into_iter()
        .zip(files)
        .map(|(slot, f)| slot.into_inner().unwrap_or_else(|| read_bounded(&f.real)))
        .collect()
}

/// Reads at most [`READ_LIMIT`] bytes of a file: a longer file is longer
/// than any cap core applies and is refused there by its size, so it is
/// never held in memory whole.
///
/// The buffer is sized from the file's length first: without a size,
/// `read_to_end` probes with small reads and doubles its buffer, four or
/// more system calls per file and up to twice the memory, which for a
/// 10,000-manifest repository was most of the time spent reading it.
pub fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    let file = fs::File::open(path)?;
    let size = file
        .metadata()
        .map_or(0, |m| m.len())
        .min(READ_LIMIT as u64);
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(READ_LIMIT as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

struct Walker<'a> {
    root: &'a Path,
    git_dir: PathBuf,
}

/// What a path must be to be read: top-level names have a fixed shape
/// (`proxops.yaml` a file, `clusters/` and the kind roots directories).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    File,
    Dir,
    Any,
}

enum Entry {
    File(PathBuf),
    Dir(PathBuf),
    Skip,
}

impl Walker<'_> {
    /// Visits `path` (repo-relative `rel`), reading it only when it has the
    /// `expect`ed shape. `listed` is its type as its directory's listing
    /// gave it, if known.
    fn visit(
        &self,
        path: &Path,
        listed: Option<fs::FileType>,
        rel: &str,
        walked: &mut Walked,
        stack: &mut Vec<PathBuf>,
        expect: Expect,
    ) -> Result<(), GitError> {
        let entry = match listed {
            Some(t) => Self::classify_listed(path, t),
            None => None,
        };
        let entry = match entry {
            Some(entry) => entry,
            None => self.classify(path)?,
        };
        match entry {
            Entry::Skip => Ok(()),
            Entry::File(_) if expect == Expect::Dir => Ok(()),
            Entry::File(real) => {
                walked.files.push(Found {
                    rel: rel.to_string(),
                    path: path.to_path_buf(),
                    real,
                });
                Ok(())
            }
            Entry::Dir(_) if expect == Expect::File => Ok(()),
            Entry::Dir(real) => {
                if stack.contains(&real) || real.join(".git").symlink_metadata().is_ok() {
                    return Ok(());
                }
                note_cluster_dir(&mut walked.tree, rel);
                let mut names: Vec<(String, Option<fs::FileType>)> = Vec::new();
                let entries = fs::read_dir(&real).map_err(|source| GitError::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
                for entry in entries {
                    let entry = entry.map_err(|source| GitError::Io {
                        path: path.to_path_buf(),
                        source,
                    })?;
                    if let Ok(name) = entry.file_name().into_string()
                        && name != ".git"
                    {
                        names.push((name, entry.file_type().ok()));
                    }
                }
                names.sort_by(|a, b| a.0.cmp(&b.0));
                stack.push(real.clone());
                for (name, listed) in names {
                    self.visit(
                        &real.join(&name),
                        listed,
                        &format!("{rel}/{name}"),
                        walked,
                        stack,
                        Expect::Any,
                    )?;
                }
                stack.pop();
                Ok(())
            }
        }
    }

    /// What `path` is from the type its directory listing gave (the
    /// entry's `d_type`, no system call), as [`Self::classify`] would find
    /// it with `lstat`; `None` for a symlink, which is followed there.
    /// Reading 10,000 manifests made 10,000 `lstat` calls, 3% of a
    /// `diff --replay`, to learn what the listing already said.
    fn classify_listed(path: &Path, listed: fs::FileType) -> Option<Entry> {
        if listed.is_symlink() {
            return None;
        }
        Some(if listed.is_dir() {
            Entry::Dir(path.to_path_buf())
        } else if listed.is_file() {
            Entry::File(path.to_path_buf())
        } else {
            Entry::Skip
        })
    }

    /// What `path` is, after following a symlink that stays inside the root.
    fn classify(&self, path: &Path) -> Result<Entry, GitError> {
        let meta = match path.symlink_metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Entry::Skip),
            Err(source) => {
                return Err(GitError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let (real, meta) = if meta.file_type().is_symlink() {
            let Ok(target) = path.canonicalize() else {
                return Ok(Entry::Skip);
            };
            if !target.starts_with(self.root) || target.starts_with(&self.git_dir) {
                return Ok(Entry::Skip);
            }
            match target.metadata() {
                Ok(m) => (target, m),
                Err(_) => return Ok(Entry::Skip),
            }
        } else {
            (path.to_path_buf(), meta)
        };
        Ok(if meta.is_dir() {
            Entry::Dir(real)
        } else if meta.is_file() {
            Entry::File(real)
        } else {
            Entry::Skip
        })
    }
}
