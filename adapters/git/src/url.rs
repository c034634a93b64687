//! URL mode (spec §2.5, §22.7): fetch a remote branch into a cache
//! repository and read the fetched commit.
//!
//! The cache is a **bare** repository and the desired tree is read straight
//! from the fetched commit's tree objects, never from a checkout. That makes
//! the snapshot exactly the commit (no stray or half-written files, no
//! hard-reset of a work tree, symlinks cannot point anywhere) and keeps the
//! cache free of anything an operator might edit. The remote is used
//! anonymously: its URL is never written into the cache's configuration.
//!
//! Transports are gix's own: `file://` (gix runs `git upload-pack` as its
//! local transport), `git://` (gix's TCP client) and `https://`/`http://`
//! (gix over reqwest with rustls). SSH is not supported (§22.7).
//!
//! A token is sent only as the HTTP basic-auth password (user `git`) through
//! gix's credentials callback, so it is never part of a URL and so never
//! reaches an error text; [`GitToken`]'s `Debug` is redacted.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gix::protocol::transport::client::blocking_io::Transport as BlockingTransport;

use gix::bstr::ByteSlice;
use gix::remote::Direction;

use crate::GitError;
use crate::commit::read_commit_tree;
use crate::error::detail;
use crate::scope::RepoTree;

/// A git HTTPS token. Its text is reachable only inside this crate and never
/// printed: `Debug` shows `GitToken(<redacted>)` and there is no `Display`.
#[derive(Clone)]
pub struct GitToken(String);

impl GitToken {
    /// Wraps a token; an empty one means "no authentication" (§22.7), so it
    /// yields `None`.
    pub fn new(token: impl Into<String>) -> Option<GitToken> {
        let token = token.into();
        (!token.is_empty()).then_some(GitToken(token))
    }
}

impl fmt::Debug for GitToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GitToken(<redacted>)")
    }
}

/// The result of one successful fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchOutcome {
    /// The commit id (40 hex digits) at the head of the branch.
    pub commit: String,
    /// `true` when the commit differs from the one this source's previous
    /// successful fetch returned (always `true` for its first fetch).
    pub changed: bool,
}

/// A remote branch fetched into a local cache repository.
pub struct UrlSource {
    url: gix::Url,
    /// The URL as shown in errors (it never carries a password: `open`
    /// rejects one).
    shown_url: String,
    branch: String,
    cache_dir: PathBuf,
    token: Option<GitToken>,
    ca_file: Option<PathBuf>,
    io_timeout: Duration,
    last_commit: Option<String>,
}

impl fmt::Debug for UrlSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UrlSource")
            .field("url", &self.shown_url)
            .field("branch", &self.branch)
            .field("cache_dir", &self.cache_dir)
            .field("token", &self.token)
            .field("ca_file", &self.ca_file)
            .field("io_timeout", &self.io_timeout)
            .field("last_commit", &self.last_commit)
            .finish()
    }
}

/// The most a PEM file of CA certificates may hold.
const PEM_MAX_BYTES: u64 = 1024 * 1024;

/// Reads the CA file a configuration names: a regular file (a link to one
/// is followed) of at most [`PEM_MAX_BYTES`]. A link to `/dev/zero` or a
/// FIFO is refused at once, never read forever or waited on (opened with
/// `O_NONBLOCK`, Linux's value on the architectures ProxOps is built for).
fn read_pem(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    const O_NONBLOCK: i32 = 0o4000;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let mut pem = Vec::new();
    file.take(PEM_MAX_BYTES + 1).read_to_end(&mut pem)?;
    if pem.len() as u64 > PEM_MAX_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {PEM_MAX_BYTES} bytes"),
        ));
    }
    Ok(pem)
}

/// Where fetched branches land in the cache; every remote branch is fetched.
const FETCH_REFSPEC: &str = "+refs/heads/*:refs/remotes/origin/*";
const TRACKING_PREFIX: &str = "refs/remotes/origin/";

/// How long a `git://` connect may take (gix's own choice for its daemon
/// transport, kept).
const GIT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a `git://` socket may sit without progress before the fetch
/// fails. A pack in flight keeps the socket busy, so this only trips on a
/// server that stalls; the next cycle tries again and meanwhile the last good
/// tree is served stale.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(60);

impl UrlSource {
    /// Checks the URL and remembers where to cache; does no I/O. Accepted
    /// schemes: `file`, `git`, `http`, `https`. A URL with an embedded
    /// password is refused (the token belongs in `token`, where it cannot
    /// leak into error texts).
    pub fn open(
        url: &str,
        branch: &str,
        cache_dir: &Path,
        token: Option<GitToken>,
    ) -> Result<UrlSource, GitError> {
        // Never echo a URL that failed to parse: it may hold a password.
        let parsed =
            gix::url::parse(url.as_bytes().as_bstr()).map_err(|_| GitError::UnsupportedUrl {
                url: "<unparsable URL>".to_string(),
                reason: "not a git URL",
            })?;
        if parsed.password().is_some() {
            return Err(GitError::UnsupportedUrl {
                url: "<URL with embedded password>".to_string(),
                reason: "put the token in the git token setting, not in the URL",
            });
        }
        let shown_url = parsed.to_bstring().to_string();
        match parsed.scheme {
            gix::url::Scheme::File
            | gix::url::Scheme::Git
            | gix::url::Scheme::Http
            | gix::url::Scheme::Https => {}
            gix::url::Scheme::Ssh => {
                return Err(GitError::UnsupportedUrl {
                    url: shown_url,
                    reason: "SSH remotes are not supported",
                });
            }
            _ => {
                return Err(GitError::UnsupportedUrl {
                    url: shown_url,
                    reason: "unknown scheme",
                });
            }
        }
        if token.is_some() && parsed.scheme == gix::url::Scheme::Http {
            return Err(GitError::UnsupportedUrl {
                url: shown_url,
                reason: "a git token is only sent over https",
            });
        }
        if branch.is_empty()
            || gix::validate::reference::name_partial(branch.as_bytes().as_bstr()).is_err()
        {
            return Err(GitError::UnsupportedUrl {
                url: shown_url,
                reason: "invalid branch name",
            });
        }
        Ok(UrlSource {
            url: parsed,
            shown_url,
            branch: branch.to_string(),
            cache_dir: cache_dir.to_path_buf(),
            token,
            ca_file: None,
            io_timeout: DEFAULT_IO_TIMEOUT,
            last_commit: None,
        })
    }

    /// Trust only the certificates in this PEM file for HTTPS (like git's
    /// `http.sslCAInfo`, which replaces the default trust store).
    pub fn with_ca_file(mut self, ca_file: PathBuf) -> UrlSource {
        self.ca_file = Some(ca_file);
        self
    }

    /// How long a `git://` socket may stall (default [`DEFAULT_IO_TIMEOUT`]).
    pub fn with_io_timeout(mut self, timeout: Duration) -> UrlSource {
        self.io_timeout = timeout;
        self
    }

    /// The URL as shown in errors and status.
    pub fn url(&self) -> &str {
        &self.shown_url
    }

    /// The branch whose head is the desired state.
    pub fn branch(&self) -> &str {
        &self.branch
    }

    /// Fetches every branch of the remote (forced, pruning stale tracking
    /// refs, no tags) into the cache, creating the cache on first use and
    /// reusing a valid existing one, and returns the branch's head commit.
    pub fn fetch(&mut self) -> Result<FetchOutcome, GitError> {
        if self.url.scheme == gix::url::Scheme::File
            && gix::path::from_bstr(self.url.path.as_bstr()).is_ok_and(|p| !p.exists())
        {
            return Err(GitError::RemoteVanished {
                url: self.shown_url.clone(),
            });
        }
        // gix builds its reqwest client itself, and reqwest (built without
        // a crypto provider of its own) takes the process default: ring,
        // the provider the PVE transport uses (`Err`: already installed,
        // and ring is the only provider built in).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let repo = self.open_cache()?;
        let fetch_err = |e: &gix::Error| {
            if is_http_not_found(e) {
                GitError::RemoteVanished {
                    url: self.shown_url.clone(),
                }
            } else {
                GitError::Fetch {
                    url: self.shown_url.clone(),
                    detail: detail(e),
                }
            }
        };
        let remote = repo
            .remote_at(self.url.clone())
            .and_then(|r| r.with_refspecs([FETCH_REFSPEC], Direction::Fetch))
            .map_err(|e| fetch_err(&e))?
            .with_fetch_tags(gix::remote::fetch::Tags::None);
        let transport = self.transport().map_err(|e| fetch_err(&e))?;
        let mut connection = match transport {
            Some(transport) => remote.to_connection_with_transport(transport),
            None => remote
                .connect(Direction::Fetch)
                .map_err(|e| fetch_err(&e))?,
        };
        if let Some(options) = self.transport_options(&repo)? {
            connection = connection.with_transport_options(options);
        }
        let (origin, token) = (self.url.clone(), self.token.clone());
        let connection =
            connection.with_credentials(move |action| credentials(&origin, token.as_ref(), action));
        let outcome = connection
            .prepare_fetch(gix::progress::Discard, Default::default())
            .map_err(|e| fetch_err(&e))?
            .receive(gix::progress::Discard, &AtomicBool::new(false))
            .map_err(|e| fetch_err(&e))?;

        let want = format!("refs/heads/{}", self.branch);
        let mut remote_branches = BTreeSet::new();
        let mut head = None;
        for r in &outcome.ref_map.remote_refs {
            let (name, target, peeled) = r.unpack();
            if let Some(short) = name.strip_prefix(b"refs/heads/") {
                remote_branches.insert(format!("{TRACKING_PREFIX}{}", short.as_bstr()));
            }
            if name == want.as_bytes() {
                head = peeled.or(target).map(|id| id.to_hex().to_string());
            }
        }
        self.prune(&repo, &remote_branches)?;
        let commit = head.ok_or_else(|| GitError::BranchNotFound {
            url: self.shown_url.clone(),
            branch: self.branch.clone(),
        })?;
        let changed = self.last_commit.as_deref() != Some(commit.as_str());
        self.last_commit = Some(commit.clone());
        Ok(FetchOutcome { commit, changed })
    }

    /// Reads the desired-state files of `commit` from the cache's object
    /// database: `proxops.yaml`, everything under `clusters/` and the kind
    /// roots, with the same symlink and nested-repository rules as the work
    /// tree reader (see [`crate::read_tree`]).
    pub fn read_tree(&self, commit: &str) -> Result<RepoTree, GitError> {
        read_commit_tree(&self.open_cache()?, commit)
    }

    fn open_cache(&self) -> Result<gix::Repository, GitError> {
        let cache_err = |e: &(dyn std::error::Error + 'static)| GitError::Cache {
            path: self.cache_dir.clone(),
            detail: detail(e),
        };
        let dir = &self.cache_dir;
        let is_cache = ["HEAD", "objects", "refs"]
            .iter()
            .all(|p| dir.join(p).exists());
        if !is_cache {
            let empty_or_missing = match std::fs::read_dir(dir) {
                Ok(mut entries) => entries.next().is_none(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
                Err(source) => {
                    return Err(GitError::Io {
                        path: dir.clone(),
                        source,
                    });
                }
            };
            if !empty_or_missing {
                return Err(GitError::CacheInvalid { path: dir.clone() });
            }
            std::fs::create_dir_all(dir).map_err(|source| GitError::Io {
                path: dir.clone(),
                source,
            })?;
            gix::ThreadSafeRepository::init_opts(
                dir,
                gix::create::Kind::Bare,
                gix::create::Options::default(),
                cache_open_options(),
            )
            .map_err(|e| cache_err(&e))?;
        }
        gix::open_opts(dir, cache_open_options()).map_err(|e| cache_err(&e))
    }

    /// For `git://`, a daemon connection whose socket reads and writes time
    /// out: gix's own git transport bounds only the connect, so a server that
    /// accepts and then stalls would hang the cycle forever. `None` for the
    /// other schemes, which gix connects itself (HTTP requests are bounded by
    /// the HTTP client's timeouts; `file://` is a local child process).
    fn transport(&self) -> Result<Option<Box<dyn BlockingTransport + Send>>, gix::Error> {
        use gix::protocol::transport::client::git;
        use std::net::{TcpStream, ToSocketAddrs};
        if self.url.scheme != gix::url::Scheme::Git {
            return Ok(None);
        }
        let io_err = |e: std::io::Error| gix::Error::from_error(e);
        let host = self.url.host().unwrap_or("localhost");
        let port = self.url.port_or_default().unwrap_or(9418);
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(io_err)?
            .next()
            .ok_or_else(|| {
                io_err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "host has no address",
                ))
            })?;
        let read = TcpStream::connect_timeout(&addr, GIT_CONNECT_TIMEOUT).map_err(io_err)?;
        read.set_read_timeout(Some(self.io_timeout))
            .map_err(io_err)?;
        read.set_write_timeout(Some(self.io_timeout))
            .map_err(io_err)?;
        let write = read.try_clone().map_err(io_err)?;
        let connection = git::blocking_io::Connection::new(
            read,
            write,
            gix::protocol::transport::Protocol::V2,
            self.url.path.clone(),
            Some((host.to_string(), self.url.port)),
            git::ConnectMode::Daemon,
            false,
        );
        Ok(Some(Box::new(connection)))
    }

    /// HTTP(S) options as gix would derive them, plus the CA file wired into
    /// reqwest's client (gix's reqwest backend does not read
    /// `http.sslCAInfo`, so the certificates go in through its client hook).
    fn transport_options(
        &self,
        repo: &gix::Repository,
    ) -> Result<Option<Box<dyn std::any::Any>>, GitError> {
        use gix::protocol::transport::client::blocking_io::http;
        if !matches!(
            self.url.scheme,
            gix::url::Scheme::Http | gix::url::Scheme::Https
        ) {
            return Ok(None);
        }
        let Some(ca_file) = &self.ca_file else {
            return Ok(None);
        };
        let ca_err = |detail: String| GitError::CaFile {
            path: ca_file.clone(),
            detail,
        };
        let pem = read_pem(ca_file).map_err(|e| ca_err(e.to_string()))?;
        let certs =
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ca_err(e.to_string()))?;
        if certs.is_empty() {
            return Err(ca_err("no PEM certificate in file".to_string()));
        }
        let options = repo
            .transport_options(self.shown_url.as_bytes().as_bstr(), None)
            .map_err(|e| GitError::Fetch {
                url: self.shown_url.clone(),
                detail: detail(&e),
            })?;
        let mut options: http::Options = match options.map(|o| o.downcast::<http::Options>()) {
            Some(Ok(o)) => *o,
            _ => http::Options::default(),
        };
        let backend = http::reqwest::Options {
            configure_client: Some(Box::new(move |builder| {
                Ok(builder.tls_certs_only(certs.clone()))
            })),
            configure_request: None,
        };
        options.backend = Some(Arc::new(Mutex::new(backend)));
        Ok(Some(Box::new(options)))
    }

    /// Deletes tracking refs of branches the remote no longer has, so a
    /// deleted branch cannot linger as a stale desired state.
    fn prune(
        &self,
        repo: &gix::Repository,
        remote_branches: &BTreeSet<String>,
    ) -> Result<(), GitError> {
        use gix::refs::transaction::{Change, PreviousValue, RefEdit, RefLog};
        let err = |e: &(dyn std::error::Error + 'static)| GitError::Cache {
            path: self.cache_dir.clone(),
            detail: detail(e),
        };
        let platform = repo.references().map_err(|e| err(&e))?;
        let mut edits = Vec::new();
        for reference in platform.prefixed(TRACKING_PREFIX).map_err(|e| err(&e))? {
            let reference = reference.map_err(|e| err(&e))?;
            let name = reference.name().as_bstr().to_string();
            if !remote_branches.contains(&name) {
                edits.push(RefEdit::new(
                    reference.name().to_owned(),
                    Change::Delete {
                        expected: PreviousValue::Any,
                        log: RefLog::AndReference,
                    },
                ));
            }
        }
        if !edits.is_empty() {
            repo.edit_references_as(edits, None).map_err(|e| err(&e))?;
        }
        Ok(())
    }
}

/// The cache is opened isolated — no global or system git config, no `GIT_*`
/// environment — so the host's credential helpers, URL rewrites or proxies
/// cannot change what is fetched; reflogs are off, the cache is a mirror.
fn cache_open_options() -> gix::open::Options {
    gix::open::Options::isolated().config_overrides([
        "core.logAllRefUpdates=false",
        "user.name=proxops",
        "user.email=proxops@localhost",
    ])
}

/// Answers gix's credential requests with the token as the basic-auth
/// password for user `git` — only for an HTTPS request to the configured
/// URL's host and port, so a redirect elsewhere never receives it. Without a
/// token nothing is offered, and no helper or prompt is ever consulted.
fn credentials(
    origin: &gix::Url,
    token: Option<&GitToken>,
    action: gix::credentials::helper::Action,
) -> gix::Result<Option<gix::credentials::protocol::Outcome>> {
    let (gix::credentials::helper::Action::Get(ctx), Some(token)) = (action, token) else {
        return Ok(None);
    };
    let same_origin = ctx
        .url
        .as_ref()
        .and_then(|u| gix::url::parse(u.as_bstr()).ok())
        .is_some_and(|u| {
            u.scheme == gix::url::Scheme::Https
                && u.scheme == origin.scheme
                && u.host() == origin.host()
                && u.port_or_default() == origin.port_or_default()
        });
    if !same_origin {
        return Ok(None);
    }
    Ok(Some(gix::credentials::protocol::Outcome {
        identity: gix::sec::identity::Account {
            username: "git".to_string(),
            password: token.0.clone(),
            oauth_refresh_token: None,
        },
        next: ctx.into(),
    }))
}

/// An HTTP 404 from the server means the repository is gone (moved,
/// deleted, renamed), which §22.7 reports as distinct from other failures.
fn is_http_not_found(err: &gix::Error) -> bool {
    fn visit(e: &(dyn std::error::Error + 'static), depth: usize) -> bool {
        if depth > 32 {
            return false;
        }
        if let Some(r) = e.downcast_ref::<reqwest::Error>() {
            return r.status() == Some(reqwest::StatusCode::NOT_FOUND);
        }
        if let Some(g) = e.downcast_ref::<gix::Error>()
            && g.iter_errors().skip(1).any(|inner| visit(inner, depth + 1))
        {
            return true;
        }
        e.source().is_some_and(|inner| visit(inner, depth + 1))
    }
    err.iter_errors().any(|e| visit(e, 0))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use gix::credentials::helper::Action;

    fn offered(origin: &str, request: &str) -> bool {
        let origin = gix::url::parse(origin.as_bytes().as_bstr()).unwrap();
        let token = GitToken::new("t");
        credentials(&origin, token.as_ref(), Action::get_for_url(request))
            .unwrap()
            .is_some()
    }

    #[test]
    fn token_is_offered_to_the_configured_https_origin() {
        assert!(offered(
            "https://git.example:8443/ops.git",
            "https://git.example:8443/ops.git"
        ));
        assert!(offered(
            "https://git.example/ops.git",
            "https://git.example:443/other.git"
        ));
    }

    #[test]
    fn token_is_withheld_from_other_hosts_ports_and_plain_http() {
        assert!(!offered(
            "https://git.example/ops.git",
            "https://evil.example/ops.git"
        ));
        assert!(!offered(
            "https://git.example/ops.git",
            "https://git.example:8443/ops.git"
        ));
        assert!(!offered(
            "https://git.example/ops.git",
            "http://git.example/ops.git"
        ));
    }

    #[test]
    fn a_token_with_a_plain_http_url_is_refused() {
        let err = UrlSource::open(
            "http://127.0.0.1/ops.git",
            "main",
            Path::new("/nonexistent"),
            GitToken::new("t"),
        )
        .unwrap_err();
        assert!(matches!(err, GitError::UnsupportedUrl { .. }), "{err}");
    }
}
