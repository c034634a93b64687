//! Files this process opens whose path someone else may have prepared: a
//! plan file, a `ca-file` a repository names, the data directory's locks
//! and records, the temporary file of an atomic write.
//!
//! Owns three rules: a read accepts a regular file only and reads at most
//! its cap (a symlink to `/dev/zero` or a FIFO is refused, never read
//! forever or waited on); a file this process writes whole is created new
//! (`O_EXCL`, which never follows a symlink) and renamed into place; a lock
//! or record file in the data directory is never opened through a symlink
//! and must be the very file that was checked.
//!
//! Must never: follow a symlink planted where a file is written, block on
//! opening a FIFO, or read without a cap.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use proxops_pve::localfile::{O_NONBLOCK, not_regular};
pub use proxops_pve::localfile::{read_capped, read_capped_nofollow};

/// Opens (creating it, mode 0600) a lock or record file at `path` for
/// reading and writing; refused when `path` is a symlink or not a regular
/// file, or was swapped between the check and the open.
pub fn open_lock_file(path: &Path) -> Result<File, String> {
    let shown = |e: io::Error| format!("{}: {e}", path.display());
    for _ in 0..3 {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                {
                    Ok(f) => return Ok(f),
                    // Another process made it first: check that one.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(shown(e)),
                }
            }
            Err(e) => return Err(shown(e)),
            Ok(meta) if !meta.is_file() => return Err(not_regular(path, &meta).to_string()),
            Ok(meta) => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .custom_flags(O_NONBLOCK)
                    .open(path)
                    .map_err(shown)?;
                let now = file.metadata().map_err(shown)?;
                if (now.dev(), now.ino()) != (meta.dev(), meta.ino()) || !now.is_file() {
                    return Err(format!(
                        "{} was replaced while it was being opened",
                        path.display()
                    ));
                }
                return Ok(file);
            }
        }
    }
    Err(format!("{} keeps changing", path.display()))
}

/// Writes `bytes` to `file` whole: into a temporary file created new
/// beside it (never through a symlink or into a FIFO someone put at that
/// name: another name is taken instead), then renamed over `file`, so a
/// reader never sees half of it.
pub fn write_atomically(file: &Path, bytes: &[u8]) -> io::Result<()> {
    let (tmp, mut out) = new_sibling(file)?;
    let written = out.write_all(bytes).and_then(|()| out.sync_all());
    drop(out);
    written
        .and_then(|()| std::fs::rename(&tmp, file))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}

/// A file created new next to `file`, named `<file>.proxops-tmp` or, when
/// something already has that name, `<file>.<n>.proxops-tmp`.
fn new_sibling(file: &Path) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for n in 0..64u32 {
        let mut name = file.as_os_str().to_owned();
        if n == 0 {
            name.push(".proxops-tmp");
        } else {
            name.push(format!(".{}.{n}.proxops-tmp", std::process::id()));
        }
        let tmp = PathBuf::from(name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

/// `~` and `~/…` at the start of a configured path mean the home directory.
pub fn expand_home(path: &str) -> PathBuf {
    let home = || std::env::var_os("HOME").filter(|h| !h.is_empty());
    if path == "~" {
        if let Some(h) = home() {
            return PathBuf::from(h);
        }
    } else if let Some(rest) = path.strip_prefix("~/")
        && let Some(h) = home()
    {
        return PathBuf::from(h).join(rest);
    }
    PathBuf::from(path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::time::{Duration, Instant};

    fn mkfifo(path: &Path) {
        let ok = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mkfifo {}", path.display());
    }

    #[test]
    fn a_read_takes_regular_files_only_and_at_most_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok");
        std::fs::write(&ok, b"12345").unwrap();
        assert_eq!(read_capped(&ok, 5).unwrap(), b"12345");
        assert!(
            read_capped(&ok, 4)
                .unwrap_err()
                .to_string()
                .contains("larger than 4")
        );
        // A link to a device is not read (it would never end).
        let zero = dir.path().join("zero");
        symlink("/dev/zero", &zero).unwrap();
        let started = Instant::now();
        let e = read_capped(&zero, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
        // A FIFO is refused at once, not waited on.
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        assert!(read_capped(&fifo, 10).is_err());
        // Not following: a link to a regular file is refused too.
        let link = dir.path().join("link");
        symlink(&ok, &link).unwrap();
        assert!(read_capped(&link, 10).is_ok());
        assert!(read_capped_nofollow(&link, 10).is_err());
    }

    #[test]
    fn an_atomic_write_never_goes_through_what_was_planted_at_its_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let plan = dir.path().join("plan.json");
        symlink(&victim, dir.path().join("plan.json.proxops-tmp")).unwrap();
        write_atomically(&plan, b"{}").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(&plan).unwrap(), b"{}");
        // A FIFO at the name does not hang it.
        let other = dir.path().join("other.json");
        mkfifo(&dir.path().join("other.json.proxops-tmp"));
        write_atomically(&other, b"[]").unwrap();
        assert_eq!(std::fs::read(&other).unwrap(), b"[]");
    }

    #[test]
    fn a_lock_file_is_never_opened_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let lock = dir.path().join("x.lock");
        symlink(&victim, &lock).unwrap();
        let e = open_lock_file(&lock).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::remove_file(&lock).unwrap();
        open_lock_file(&lock).unwrap();
        open_lock_file(&lock).unwrap();
    }
}
