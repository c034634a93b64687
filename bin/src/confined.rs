//! Writing files inside a folder, never through a symlink that leads out of
//! it: `adopt` writes manifests into the work tree, `record` recordings into
//! its `--out` folder.
//!
//! A repository can carry symlinks (`vm/home -> /etc/cron.d`), and so can a
//! folder someone else prepared; following one would turn adoption or a
//! recording into a write wherever the user may write. So every path
//! component from the folder down to the file is looked at before writing:
//! a symlink is allowed only when it resolves inside the folder. The file
//! itself is replaced by a rename of a freshly created sibling, which never
//! follows a link.
//!
//! Must never: write before every component was checked, or open a file
//! for writing in a way that follows a symlink.

use std::fmt;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

/// Why a file was not written.
#[derive(Debug)]
pub enum WriteRefused {
    /// A path component is a symlink leading out of the folder (or nowhere).
    Escapes {
        link: PathBuf,
        target: Option<PathBuf>,
        folder: PathBuf,
    },
    /// The relative path is absolute or climbs with `..`.
    NotRelative(PathBuf),
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl fmt::Display for WriteRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteRefused::Escapes {
                link,
                target: Some(target),
                folder,
            } => write!(
                f,
                "refusing to write through {}: it is a symlink to {}, outside {}",
                link.display(),
                target.display(),
                folder.display()
            ),
            WriteRefused::Escapes {
                link,
                target: None,
                folder,
            } => write!(
                f,
                "refusing to write through {}: it is a symlink that leads nowhere inside {}",
                link.display(),
                folder.display()
            ),
            WriteRefused::NotRelative(p) => write!(
                f,
                "refusing to write {}: not a path inside the folder",
                p.display()
            ),
            WriteRefused::Io { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for WriteRefused {}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WriteRefused + '_ {
    move |error| WriteRefused::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Checks that writing `folder/rel` would not pass through a symlink that
/// leads out of `folder`. Components that do not exist yet are fine: they
/// will be created as plain directories.
pub fn check_inside(folder: &Path, rel: &Path) -> Result<(), WriteRefused> {
    if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(WriteRefused::NotRelative(rel.to_path_buf()));
    }
    let fence = folder.canonicalize().map_err(io(folder))?;
    let mut at = folder.to_path_buf();
    for part in rel.components() {
        at.push(part);
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io(&at)(e)),
        };
        if meta.file_type().is_symlink() {
            let target = at.canonicalize().ok();
            if !target.as_ref().is_some_and(|t| t.starts_with(&fence)) {
                let target = target.or_else(|| std::fs::read_link(&at).ok());
                return Err(WriteRefused::Escapes {
                    link: at,
                    target,
                    folder: fence,
                });
            }
        }
    }
    Ok(())
}

/// Writes `bytes` to `folder/rel` (creating its directories) after
/// [`check_inside`], through a fresh sibling renamed over the file.
pub fn write_inside(folder: &Path, rel: &Path, bytes: &[u8]) -> Result<(), WriteRefused> {
    check_inside(folder, rel)?;
    let path = folder.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    // The directories may have been created just now: check once more
    // before the write itself.
    check_inside(folder, rel)?;
    replace(&path, bytes)
}

/// Replaces `path` with `bytes` through `<path>.proxops-tmp`, created anew
/// (a leftover, even a symlink, is removed first and never followed), then
/// renamed over `path` (which replaces a symlink rather than following it).
pub fn replace(path: &Path, bytes: &[u8]) -> Result<(), WriteRefused> {
    replace_as(path, bytes, None)
}

/// As [`replace`], the new file getting `permissions` before any byte is
/// written (a SOPS file keeps its mode).
pub fn replace_with_permissions(
    path: &Path,
    bytes: &[u8],
    permissions: std::fs::Permissions,
) -> Result<(), WriteRefused> {
    replace_as(path, bytes, Some(permissions))
}

fn replace_as(
    path: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
) -> Result<(), WriteRefused> {
    let mut sidecar = path.as_os_str().to_owned();
    sidecar.push(".proxops-tmp");
    let sidecar = PathBuf::from(sidecar);
    match std::fs::remove_file(&sidecar) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&sidecar)(e)),
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&sidecar)
        .and_then(|mut f| {
            if let Some(p) = permissions {
                f.set_permissions(p)?;
            }
            f.write_all(bytes)
        })
        .and_then(|()| std::fs::rename(&sidecar, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&sidecar);
        return Err(io(&sidecar)(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn writes_create_directories_inside_the_folder() {
        let folder = tempfile::tempdir().unwrap();
        write_inside(folder.path(), Path::new("vm/home/web.yaml"), b"x").unwrap();
        assert_eq!(
            std::fs::read(folder.path().join("vm/home/web.yaml")).unwrap(),
            b"x"
        );
        assert!(!folder.path().join("vm/home/web.yaml.proxops-tmp").exists());
    }

    #[test]
    fn a_directory_symlink_leading_out_is_refused_and_nothing_written() {
        let folder = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(folder.path().join("vm")).unwrap();
        symlink(outside.path(), folder.path().join("vm/home")).unwrap();
        let err = write_inside(folder.path(), Path::new("vm/home/web.yaml"), b"x").unwrap_err();
        assert!(matches!(err, WriteRefused::Escapes { .. }), "{err}");
        assert!(err.to_string().contains("vm/home"), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_file_symlink_or_a_planted_sidecar_is_never_followed() {
        let folder = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        symlink(&victim, folder.path().join("home.json")).unwrap();
        assert!(write_inside(folder.path(), Path::new("home.json"), b"x").is_err());
        std::fs::remove_file(folder.path().join("home.json")).unwrap();
        symlink(&victim, folder.path().join("home.json.proxops-tmp")).unwrap();
        write_inside(folder.path(), Path::new("home.json"), b"x").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(
            std::fs::read(folder.path().join("home.json")).unwrap(),
            b"x"
        );
    }

    #[test]
    fn a_symlink_that_stays_inside_is_followed() {
        let folder = tempfile::tempdir().unwrap();
        std::fs::create_dir(folder.path().join("real")).unwrap();
        symlink(folder.path().join("real"), folder.path().join("alias")).unwrap();
        write_inside(folder.path(), Path::new("alias/a.yaml"), b"x").unwrap();
        assert!(folder.path().join("real/a.yaml").exists());
    }

    #[test]
    fn climbing_paths_are_refused() {
        let folder = tempfile::tempdir().unwrap();
        for rel in ["../x", "/etc/x", "a/../../x", ""] {
            assert!(
                matches!(
                    check_inside(folder.path(), Path::new(rel)),
                    Err(WriteRefused::NotRelative(_))
                ),
                "{rel}"
            );
        }
    }
}
