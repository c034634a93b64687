//! `proxops init [DIR] --cluster NAME`: a new repository for one cluster
//! (core's [`proxops_core::scaffold`]) written into an empty directory.
//!
//! Must never: write into a directory that holds anything, or overwrite a
//! file (each is created new). Reads no PVE and no credentials.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use proxops_core::names::ClusterName;

use crate::args::{CommandArgs, GlobalArgs};
use crate::exit::{Exit, Failure};
use crate::out;

pub fn run(g: &GlobalArgs, a: &CommandArgs) -> Result<Exit, Failure> {
    let cluster = match g.clusters.as_slice() {
        [one] => ClusterName::new(one)
            .map_err(|e| Failure::input(format!("init --cluster {one:?}: {e}")))?,
        [] => {
            return Err(Failure::input(
                "init needs --cluster NAME: the cluster the new repository is for",
            ));
        }
        _ => {
            return Err(Failure::input(
                "init makes a repository for one cluster: give --cluster once (add more clusters under clusters/ later)",
            ));
        }
    };
    let dir = a.file.clone().unwrap_or_else(|| PathBuf::from("."));
    refuse_unless_empty(&dir)?;
    let files = proxops_core::scaffold::scaffold(&cluster);
    for (rel, text) in &files {
        create_new(&dir.join(rel), text).map_err(|e| {
            Failure::runtime(format!(
                "init: cannot write {}: {e}",
                dir.join(rel).display()
            ))
        })?;
    }
    let mut report = format!("initialised {} for cluster {cluster}:\n", dir.display());
    for (rel, _) in &files {
        report.push_str(&format!("  {rel}\n"));
    }
    report.push_str(&format!(
        "next: set base-url and nodes in clusters/{cluster}/config.yaml, then `proxops --git-path {} validate` and `diff` (docs/getting-started.md)\n",
        dir.display()
    ));
    out::report(&report)?;
    Ok(Exit::Ok)
}

/// `dir` must not exist, or be an empty directory.
fn refuse_unless_empty(dir: &Path) -> Result<(), Failure> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Failure::input(format!(
                    "init: {} is not empty; init writes only into an empty or new directory, nothing written",
                    dir.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Failure::input(format!(
            "init: {} is not a directory init can use: {e}; nothing written",
            dir.display()
        ))),
    }
}

/// Writes `text` to a new file at `path` (its directories made first); an
/// existing file is an error, never overwritten.
fn create_new(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(text.as_bytes())
}
