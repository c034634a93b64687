//! The crate's one error enum. Texts name the path, URL (never with a
//! password), branch or commit a person needs; none carries a git token.

use std::path::PathBuf;

/// Everything that can go wrong reading desired state from git.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// No directory at or above the start directory holds a `.git` entry.
    #[error("no ProxOps GitOps repository found at or above {}", start.display())]
    NoRepository { start: PathBuf },

    /// The start directory of discovery does not exist or is not a directory.
    #[error("no ProxOps GitOps repository found: start directory {} cannot be used: {source}", start.display())]
    StartDir {
        start: PathBuf,
        source: std::io::Error,
    },

    /// A file or directory of the work tree could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    /// gix could not open the repository at `path`.
    #[error("cannot open git repository {}: {detail}", path.display())]
    Open { path: PathBuf, detail: String },

    /// HEAD could not be resolved to a commit.
    #[error("cannot resolve HEAD of {}: {detail}", path.display())]
    Head { path: PathBuf, detail: String },

    /// The configured URL is not one this adapter fetches from.
    #[error("unsupported git URL {url}: {reason}")]
    UnsupportedUrl { url: String, reason: &'static str },

    /// The URL-mode cache directory exists but is not a repository this
    /// adapter made; it is left alone rather than deleted.
    #[error("git cache {} exists but is not a git cache (missing HEAD, objects or refs); move it away or choose another data dir", path.display())]
    CacheInvalid { path: PathBuf },

    /// The URL-mode cache could not be created or opened.
    #[error("cannot prepare git cache {}: {detail}", path.display())]
    Cache { path: PathBuf, detail: String },

    /// The CA file for HTTPS could not be read or holds no certificate.
    #[error("cannot use git CA file {}: {detail}", path.display())]
    CaFile { path: PathBuf, detail: String },

    /// The remote repository is gone (its path no longer exists).
    #[error("git repository vanished: {url}")]
    RemoteVanished { url: String },

    /// Connecting to, authenticating with, or fetching from the remote failed.
    #[error("cannot fetch {url}: {detail}")]
    Fetch { url: String, detail: String },

    /// The remote has no branch of that name.
    #[error("branch {branch} not found on {url}")]
    BranchNotFound { url: String, branch: String },

    /// The fetched commit or one of its trees or blobs could not be read.
    #[error("cannot read commit {commit}: {detail}")]
    ReadCommit { commit: String, detail: String },

    /// No fetch ever succeeded, so there is no tree to fall back to.
    #[error("no desired state: the git source was never fetched successfully: {last_error}")]
    NeverFetched { last_error: Box<GitError> },
}

/// Flattens a gix error and its causes into one line: gix's top-level text
/// alone ("fetch failed") rarely says why.
pub(crate) fn detail(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let text = e.to_string();
        if !parts.iter().any(|p| p == &text) {
            parts.push(text);
        }
        next = e.source();
    }
    parts.join(": ")
}
