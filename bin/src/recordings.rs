//! Recordings read ahead. `diff`, `status` and `adopt` with `--replay DIR`
//! parse the selected clusters' recordings on a second thread while the
//! repository loads: the two largest reads of an offline run (the
//! manifests, the recorded answers) then overlap instead of following one
//! another.
//!
//! Which recording a cluster replays, and every error it reports, are as if
//! it were read when needed: the read-ahead calls the same
//! [`ReplayTransport::load`] on the same path, and a path it did not take
//! (a cluster it could not know of, one over its byte allowance, a file
//! that was not there) is read when the cluster asks for it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use proxops_pve::recording::RecordingError;
use proxops_pve::replay::ReplayTransport;

use crate::args::GlobalArgs;
use crate::context::{self, Env, Workspace};
use crate::exit::Failure;
use crate::prepare::Source;

/// The most recording bytes read ahead: about 190,000 guests' answers. A
/// directory holding more (recordings of clusters this configuration does
/// not declare, say) is read on demand beyond it, as without a read-ahead.
const AHEAD_BYTES: u64 = 256 << 20;

type Loaded = Result<ReplayTransport, RecordingError>;

/// Recordings `<dir>/<cluster>.json`, some already read.
pub struct Recordings {
    dir: PathBuf,
    ahead: Mutex<BTreeMap<PathBuf, Loaded>>,
}

impl fmt::Debug for Recordings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recordings")
            .field("dir", &self.dir)
            .finish()
    }
}

impl Recordings {
    /// Recordings read only when asked for.
    pub fn on_demand(dir: PathBuf) -> Recordings {
        Recordings {
            dir,
            ahead: Mutex::new(BTreeMap::new()),
        }
    }

    /// The recording of `cluster`: the one read ahead, else read now.
    pub fn load(&self, cluster: &str) -> (PathBuf, Loaded) {
        let path = self.dir.join(format!("{cluster}.json"));
        let early = self.ahead.lock().ok().and_then(|mut m| m.remove(&path));
        let loaded = early.unwrap_or_else(|| ReplayTransport::load(&path));
        (path, loaded)
    }

    /// Drops what was read ahead and not asked for (a recording of a
    /// cluster the configuration does not declare), before planning.
    pub fn forget_the_rest(&self) {
        if let Ok(mut m) = self.ahead.lock() {
            m.clear();
        }
    }
}

/// The workspace, and where live state comes from: with `--replay DIR`, the
/// selected clusters' recordings are read while the workspace loads.
pub fn load_with_source(
    g: &GlobalArgs,
    env: &Env,
    replay: Option<&Path>,
) -> Result<(Workspace, Source), Failure> {
    let Some(dir) = replay else {
        return Ok((context::load_workspace(g, env)?, Source::Live));
    };
    let (ws, ahead) = std::thread::scope(|s| {
        // A thread the system will not start leaves every read on demand.
        let reader = std::thread::Builder::new()
            .name("recordings".into())
            .spawn_scoped(s, || read_ahead(dir, g))
            .ok();
        let ws = context::load_workspace(g, env);
        let ahead = reader.map(|r| r.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        (ws, ahead.unwrap_or_default())
    });
    let recordings = Recordings {
        dir: dir.to_path_buf(),
        ahead: Mutex::new(ahead),
    };
    Ok((ws?, Source::Replay(recordings)))
}

/// Reads every `<cluster>.json` in `dir` whose cluster `--cluster` selects,
/// in name order, while the bytes stay within [`AHEAD_BYTES`]. Anything it
/// cannot list or size is left for the on-demand read to report.
fn read_ahead(dir: &Path, g: &GlobalArgs) -> BTreeMap<PathBuf, Loaded> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .is_some_and(|c| context::selected(g, c))
        })
        .collect();
    paths.sort();
    let mut left = AHEAD_BYTES;
    let mut ahead = BTreeMap::new();
    for path in paths {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() || meta.len() > left {
            continue;
        }
        left -= meta.len();
        let loaded = ReplayTransport::load(&path);
        ahead.insert(path, loaded);
    }
    ahead
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn recording(cluster: &str) -> String {
        format!(
            r#"{{"format":"{}","cluster":"{cluster}","responses":[]}}"#,
            proxops_pve::recording::RECORDING_FORMAT
        )
    }

    #[test]
    fn a_recording_read_ahead_is_the_one_read_on_demand() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("lab.json"), recording("lab")).unwrap();
        std::fs::write(dir.path().join("broken.json"), "{").unwrap();
        let ahead = read_ahead(dir.path(), &GlobalArgs::default());
        assert_eq!(ahead.len(), 2, "both selected recordings are read ahead");
        let recordings = Recordings {
            dir: dir.path().to_path_buf(),
            ahead: Mutex::new(ahead),
        };
        let fresh = Recordings::on_demand(dir.path().to_path_buf());
        for cluster in ["lab", "broken", "missing"] {
            let (path, early) = recordings.load(cluster);
            let (fresh_path, late) = fresh.load(cluster);
            assert_eq!(path, fresh_path);
            assert_eq!(
                format!("{:?}", early.map(|t| t.len())),
                format!("{:?}", late.map(|t| t.len())),
                "{cluster}"
            );
        }
        assert!(
            recordings.ahead.lock().unwrap().is_empty(),
            "each taken once"
        );
    }

    #[test]
    fn only_the_selected_clusters_are_read_ahead() {
        let dir = tempfile::tempdir().unwrap();
        for c in ["lab", "prod"] {
            std::fs::write(dir.path().join(format!("{c}.json")), recording(c)).unwrap();
        }
        std::fs::write(dir.path().join("notes.txt"), "not a recording").unwrap();
        let g = GlobalArgs {
            clusters: vec!["prod".into()],
            ..GlobalArgs::default()
        };
        let ahead = read_ahead(dir.path(), &g);
        let read: Vec<PathBuf> = ahead.keys().cloned().collect();
        assert_eq!(read, vec![dir.path().join("prod.json")]);
    }
}
