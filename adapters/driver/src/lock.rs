//! The cluster lock: one ProxOps process at a time reads, plans and writes
//! a cluster from this host (`apply`, each `run` cycle, `adopt
//! --adopt-secrets`). Two at once plan from the same live state and both
//! act on it: two overlapping runs each spend the prune budget.
//!
//! The lock is `flock(2)` on `<data-dir>/locks/<host>_<port>.lock`, one
//! file per PVE endpoint: two clusters of one configuration never share an
//! endpoint, and two configurations (the daemon's, a cron job's) that call
//! the same cluster by different names still meet at the same file. The
//! kernel releases it when the file is closed, so a process that dies
//! never leaves it held. The holder writes its pid, command, cluster and
//! the time it took the lock into the file, for the message of whoever
//! waits.
//!
//! Must never: write anything secret into the lock file, delete a lock
//! file (a process may hold or be opening it), or open one through a
//! symlink ([`crate::files::open_lock_file`]).
//!
//! It covers one host, or rather one data directory: processes on
//! different hosts are not serialised (docs/operations.md).

use std::fs::{File, TryLockError};
use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proxops_core::config::{Config, Endpoint};
use proxops_core::names::ClusterName;
use proxops_core::plan::AbortCause;
use proxops_pve::runner::unix_now;
use serde_json::json;

use crate::files::expand_home;

/// How often a waiting process tries the lock again.
const RETRY: Duration = Duration::from_millis(100);

/// Told once when a cluster's lock is held by another process and this one
/// waits: the cluster, who holds it (or that it is not recorded yet) and
/// the longest wait, e.g. `30s`.
pub type OnWait = fn(cluster: &str, holder: &str, wait: &str);

/// Taking cluster locks for one command.
#[derive(Debug, Clone)]
pub struct Locking {
    dir: PathBuf,
    command: String,
    wait: Duration,
    on_wait: Option<OnWait>,
}

/// A held cluster lock; dropping it releases it.
#[derive(Debug)]
pub struct ClusterLock {
    _file: File,
}

/// Who holds a lock, as its holder wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub command: String,
    pub cluster: String,
    /// RFC 3339 UTC: when the holder took the lock.
    pub since: String,
}

/// Why a cluster lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process held it for the whole wait.
    Held {
        cluster: String,
        path: PathBuf,
        holder: Option<Box<Holder>>,
        waited: Duration,
    },
    /// The lock file could not be created, opened, locked or written.
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held {
                cluster,
                path,
                holder,
                waited,
            } => write!(
                f,
                "locked: cluster {cluster} is held by another proxops process ({}); gave up after waiting {}s (reconcile.lock-wait); lock file {}",
                holder
                    .as_ref()
                    .map_or_else(|| "holder not recorded yet".to_owned(), |h| h.describe()),
                waited.as_secs_f64(),
                path.display()
            ),
            LockError::Io { path, error } => {
                write!(
                    f,
                    "cannot take the cluster lock {}: {error}",
                    path.display()
                )
            }
        }
    }
}

impl LockError {
    /// How the cluster's cycle counts when its lock was not taken.
    pub fn cause(&self) -> AbortCause {
        match self {
            LockError::Held { .. } => AbortCause::Locked,
            LockError::Io { .. } => AbortCause::LockUnavailable,
        }
    }
}

impl Holder {
    fn describe(&self) -> String {
        format!("pid {}, {}, since {}", self.pid, self.command, self.since)
    }
}

impl Locking {
    /// Locks under `<data-dir>/locks` for `command` (e.g. `proxops
    /// apply`), waiting up to the configured `reconcile.lock-wait`.
    pub fn new(cfg: &Config, command: &str) -> Locking {
        Locking {
            dir: expand_home(&cfg.data_dir).join("locks"),
            command: command.to_owned(),
            wait: cfg.lock_wait.as_std(),
            on_wait: None,
        }
    }

    /// Tells `on_wait` when a lock is found held and this process waits.
    pub fn telling(mut self, on_wait: OnWait) -> Locking {
        self.on_wait = Some(on_wait);
        self
    }

    /// Takes the lock of `cluster` at `base_url`, waiting while another
    /// process holds it (saying so once), at most the configured wait.
    pub fn acquire(&self, cluster: &ClusterName, base_url: &str) -> Result<ClusterLock, LockError> {
        let path = self.dir.join(lock_file_name(base_url));
        let io = |error| LockError::Io {
            path: path.clone(),
            error,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io)?;
        let file = crate::files::open_lock_file(&path).map_err(|e| io(std::io::Error::other(e)))?;
        let started = Instant::now();
        let mut told = false;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::Error(e)) => return Err(io(e)),
                Err(TryLockError::WouldBlock) => {}
            }
            let waited = started.elapsed();
            if waited >= self.wait {
                return Err(LockError::Held {
                    cluster: cluster.as_str().to_owned(),
                    holder: read_holder(&path).map(Box::new),
                    path,
                    waited,
                });
            }
            if !told {
                told = true;
                let holder = read_holder(&path)
                    .map_or_else(|| "holder not recorded yet".to_owned(), |h| h.describe());
                let wait = format!("{}s", self.wait.as_secs_f64());
                if let Some(tell) = self.on_wait {
                    tell(cluster.as_str(), &holder, &wait);
                }
            }
            std::thread::sleep(RETRY.min(self.wait - waited));
        }
        let holder = Holder {
            pid: std::process::id(),
            command: self.command.clone(),
            cluster: cluster.as_str().to_owned(),
            since: proxops_core::time::rfc3339(unix_now()),
        };
        write_holder(&file, &holder).map_err(io)?;
        Ok(ClusterLock { _file: file })
    }
}

/// `<host>_<port>.lock` of a base URL, from its normalised endpoint (the
/// one `validate` compares: host lower-cased without a trailing dot, the
/// port as written or the scheme's default), so two spellings of one
/// endpoint meet at one file; anything but letters, digits, `.` and `-`
/// becomes `_`.
pub fn lock_file_name(base_url: &str) -> String {
    let endpoint = match Endpoint::parse(base_url) {
        Some(e) => e.to_string(),
        // Not a URL `validate` lets through; still one file per spelling.
        None => base_url.to_ascii_lowercase(),
    };
    let mut name: String = endpoint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.push_str(".lock");
    name
}

fn write_holder(mut file: &File, holder: &Holder) -> std::io::Result<()> {
    file.set_len(0)?;
    let line = json!({
        "pid": holder.pid,
        "command": holder.command,
        "cluster": holder.cluster,
        "since": holder.since,
    })
    .to_string()
        + "\n";
    // The file was opened at offset 0 and nothing has been read from it.
    file.write_all(line.as_bytes())?;
    file.flush()
}

/// The holder recorded in `path`, if it can be read (the holder may be
/// between taking the lock and writing it).
fn read_holder(path: &Path) -> Option<Holder> {
    let bytes = crate::files::read_capped_nofollow(path, 4096).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let v: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    let field = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    Some(Holder {
        pid: u32::try_from(v.get("pid")?.as_u64()?).ok()?,
        command: field("command")?,
        cluster: field("cluster")?,
        since: field("since")?,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn locking(dir: &Path, wait: Duration) -> Locking {
        Locking {
            dir: dir.join("locks"),
            command: "proxops apply".into(),
            wait,
            on_wait: None,
        }
    }

    fn home() -> ClusterName {
        ClusterName::new("home").unwrap()
    }

    #[test]
    fn the_lock_file_is_named_by_the_endpoint() {
        assert_eq!(
            lock_file_name("https://pve1.Example.org:8006"),
            "pve1.example.org_8006.lock"
        );
        assert_eq!(
            lock_file_name("https://pve1.example.org:8006/"),
            "pve1.example.org_8006.lock"
        );
        assert_eq!(
            lock_file_name("https://pve.example.org"),
            "pve.example.org_443.lock"
        );
        assert_eq!(
            lock_file_name("https://[fd00::1]:8006"),
            "_fd00__1__8006.lock"
        );
        // Spellings `validate` takes for one endpoint share one file.
        for same in [
            "https://PVE.example.org.:443/api2/json",
            "https://pve.example.org:443",
            "https://user@pve.example.org",
        ] {
            assert_eq!(lock_file_name(same), "pve.example.org_443.lock", "{same}");
        }
        assert_eq!(
            lock_file_name("https://[::ffff:127.0.0.1]:8006"),
            lock_file_name("https://127.0.0.1:8006")
        );
        // No path separator ever reaches the name.
        assert!(!lock_file_name("https://../x:8006").contains('/'));
    }

    #[test]
    fn a_second_taker_waits_then_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = locking(dir.path(), Duration::ZERO)
            .acquire(&home(), "https://pve1:8006")
            .unwrap();
        let err = locking(dir.path(), Duration::from_millis(300))
            .acquire(&home(), "https://pve1:8006/")
            .unwrap_err();
        let LockError::Held { holder, waited, .. } = &err else {
            panic!("{err}");
        };
        assert!(*waited >= Duration::from_millis(300), "{waited:?}");
        let holder = holder.clone().unwrap();
        assert_eq!(holder.pid, std::process::id());
        assert_eq!(holder.command, "proxops apply");
        assert_eq!(holder.cluster, "home");
        let text = err.to_string();
        assert!(
            text.starts_with("locked: cluster home is held by another proxops process (pid "),
            "{text}"
        );
        assert!(text.contains("pve1_8006.lock"), "{text}");

        // Released on drop: the next taker gets it at once.
        drop(first);
        locking(dir.path(), Duration::ZERO)
            .acquire(&home(), "https://pve1:8006")
            .unwrap();
    }

    #[test]
    fn another_endpoint_is_another_lock() {
        let dir = tempfile::tempdir().unwrap();
        let _a = locking(dir.path(), Duration::ZERO)
            .acquire(&home(), "https://pve1:8006")
            .unwrap();
        locking(dir.path(), Duration::ZERO)
            .acquire(&home(), "https://pve2:8006")
            .unwrap();
    }

    #[test]
    fn an_unwritable_data_dir_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").unwrap();
        let err = Locking {
            dir: file.join("locks"),
            command: "proxops apply".into(),
            wait: Duration::ZERO,
            on_wait: None,
        }
        .acquire(&home(), "https://pve1:8006")
        .unwrap_err();
        assert!(matches!(err, LockError::Io { .. }), "{err}");
        assert!(err.to_string().contains("not-a-dir/locks"), "{err}");
    }
}
