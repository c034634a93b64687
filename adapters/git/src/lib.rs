//! The git adapter: where the desired state comes from.
//!
//! It owns finding the GitOps repository from a start directory
//! ([`discover`]), reading the HEAD commit id ([`head_commit`]), reading the
//! files ProxOps cares about from the work tree ([`read_tree`]), and URL mode:
//! fetching a remote into a local cache and reading the fetched commit
//! ([`UrlSource`]), with [`GitSource`] keeping the last good tree when a later
//! fetch fails.
//!
//! It hands out bytes and a commit id and nothing else: it never parses a
//! manifest, never writes the operator's work tree, never logs, and never lets
//! a git token reach an error, a remote URL, the cache's configuration or
//! `Debug` output.
//!
//! **Architecture Invariant:** only this crate knows git; core sees a
//! [`RepoTree`] and a commit id.

mod commit;
mod discover;
mod error;
mod local;
mod scope;
mod source;
mod url;

pub use discover::{RepoRoot, discover, start_dir};
pub use error::GitError;
pub use local::{head_commit, read_bounded, read_tree, read_tree_with};
pub use scope::{KIND_ROOTS, RepoTree};
pub use source::{DesiredTree, GitSource};
pub use url::{DEFAULT_IO_TIMEOUT, FetchOutcome, GitToken, UrlSource};
