//! The URL-mode fallback rule (spec §2.5): the first fetch must succeed; a
//! later failure keeps the last good tree and marks the desired state stale
//! ("fail open on stale reads, never on garbage"). Pure state: the fetching
//! is [`crate::UrlSource`]'s.

use crate::{GitError, RepoTree, UrlSource};

/// What a cycle reconciles against.
#[derive(Debug)]
pub struct DesiredTree<'a> {
    /// The commit the tree was read from.
    pub commit: &'a str,
    /// The desired-state files.
    pub tree: &'a RepoTree,
    /// Why this tree is not the remote's current state, when the latest
    /// fetch failed; `None` when it is fresh.
    pub stale: Option<GitError>,
}

impl DesiredTree<'_> {
    /// `true` when the last fetch failed and an older tree is served
    /// (gauge `proxops_desired_stale`).
    pub fn desired_stale(&self) -> bool {
        self.stale.is_some()
    }
}

/// The last good fetched tree of a URL-mode source.
#[derive(Debug, Default)]
pub struct GitSource {
    last_good: Option<(String, RepoTree)>,
}

impl GitSource {
    /// A source that has never fetched.
    pub fn new() -> GitSource {
        GitSource::default()
    }

    /// The last good commit and tree, if any fetch ever succeeded.
    pub fn last_good(&self) -> Option<(&str, &RepoTree)> {
        self.last_good.as_ref().map(|(c, t)| (c.as_str(), t))
    }

    /// Fetches `url` and reads the branch head's tree (re-reading it only
    /// when the commit moved), then applies [`GitSource::record`].
    pub fn refresh(&mut self, url: &mut UrlSource) -> Result<DesiredTree<'_>, GitError> {
        let fetched = url.fetch().and_then(|outcome| match &self.last_good {
            Some((commit, tree)) if *commit == outcome.commit => Ok((outcome.commit, tree.clone())),
            _ => url
                .read_tree(&outcome.commit)
                .map(|tree| (outcome.commit, tree)),
        });
        self.record(fetched)
    }

    /// Takes the result of one fetch-and-read: success replaces the last good
    /// tree; failure serves the last good tree marked stale, or is an error
    /// ([`GitError::NeverFetched`]) when there never was a good one.
    pub fn record(
        &mut self,
        fetched: Result<(String, RepoTree), GitError>,
    ) -> Result<DesiredTree<'_>, GitError> {
        match fetched {
            Ok(good) => {
                let (commit, tree) = self.last_good.insert(good);
                Ok(DesiredTree {
                    commit,
                    tree,
                    stale: None,
                })
            }
            Err(e) => match &self.last_good {
                Some((commit, tree)) => Ok(DesiredTree {
                    commit,
                    tree,
                    stale: Some(e),
                }),
                None => Err(GitError::NeverFetched {
                    last_error: Box::new(e),
                }),
            },
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tree(path: &str) -> RepoTree {
        let mut t = RepoTree::default();
        t.files.insert(path.to_string(), b"x".to_vec());
        t
    }

    fn failure() -> GitError {
        GitError::Fetch {
            url: "git://127.0.0.1/r".into(),
            detail: "connection refused".into(),
        }
    }

    #[test]
    fn failure_before_any_good_fetch_is_an_error() {
        let mut s = GitSource::new();
        let err = s.record(Err(failure())).unwrap_err();
        assert!(matches!(err, GitError::NeverFetched { .. }));
        assert!(err.to_string().contains("connection refused"));
    }

    #[test]
    fn good_fetch_is_fresh() {
        let mut s = GitSource::new();
        let d = s
            .record(Ok(("a".repeat(40), tree("proxops.yaml"))))
            .unwrap();
        assert!(!d.desired_stale());
        assert_eq!(d.commit, "a".repeat(40));
    }

    #[test]
    fn failure_after_good_fetch_serves_last_good_tree_as_stale() {
        let mut s = GitSource::new();
        s.record(Ok(("a".repeat(40), tree("vm/base/a.yaml"))))
            .unwrap();
        let d = s.record(Err(failure())).unwrap();
        assert!(d.desired_stale());
        assert_eq!(d.commit, "a".repeat(40));
        assert!(d.tree.files.contains_key("vm/base/a.yaml"));
    }

    #[test]
    fn recovery_after_failure_is_fresh_again() {
        let mut s = GitSource::new();
        s.record(Ok(("a".repeat(40), tree("a")))).unwrap();
        s.record(Err(failure())).unwrap();
        let d = s.record(Ok(("b".repeat(40), tree("b")))).unwrap();
        assert!(!d.desired_stale());
        assert_eq!(d.commit, "b".repeat(40));
    }
}
