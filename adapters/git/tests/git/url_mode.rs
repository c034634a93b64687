use std::path::{Path, PathBuf};

use proxops_git::{GitError, GitSource, GitToken, UrlSource};

use crate::support::{Scratch, git_daemon, https_git_server, make_certs, write};

/// A work repository with one manifest pushed to a bare `remote/ops.git`.
struct Remote {
    s: Scratch,
    work: PathBuf,
    bare: PathBuf,
}

impl Remote {
    fn new() -> Remote {
        let s = Scratch::new();
        let bare = s.bare_repo("remote/ops.git");
        let work = s.work_repo("work");
        write(&work, "proxops.yaml", "log: info");
        write(
            &work,
            "clusters/pve1/resources.yaml",
            "resources: [../../vm/base/a.yaml]",
        );
        write(&work, "vm/base/a.yaml", "v1");
        write(&work, "docs/ignored.md", "no");
        s.commit_all(&work, "one");
        s.push(&work, &bare, "main");
        Remote { s, work, bare }
    }

    fn push_change(&self, rel: &str, content: &str) -> String {
        write(&self.work, rel, content);
        let id = self.s.commit_all(&self.work, "change");
        self.s.push(&self.work, &self.bare, "main");
        id
    }

    fn head(&self) -> String {
        self.s.run_git(&self.work, &["rev-parse", "HEAD"])
    }

    fn cache(&self) -> PathBuf {
        self.s.path().join("data/git-cache")
    }

    fn file_url(&self) -> String {
        format!("file://{}", self.bare.display())
    }
}

fn fetch_and_read(src: &mut UrlSource) -> (proxops_git::FetchOutcome, proxops_git::RepoTree) {
    let outcome = src.fetch().unwrap();
    let tree = src.read_tree(&outcome.commit).unwrap();
    (outcome, tree)
}

#[test]
fn file_url_fetch_reads_the_branch_head_tree() {
    let r = Remote::new();
    let mut src = UrlSource::open(&r.file_url(), "main", &r.cache(), None).unwrap();
    let (outcome, tree) = fetch_and_read(&mut src);
    assert_eq!(outcome.commit, r.head());
    assert!(outcome.changed);
    assert_eq!(
        tree.files.keys().collect::<Vec<_>>(),
        vec![
            "clusters/pve1/resources.yaml",
            "proxops.yaml",
            "vm/base/a.yaml"
        ]
    );
    assert_eq!(tree.files["vm/base/a.yaml"], b"v1");
    assert_eq!(tree.cluster_dirs.iter().collect::<Vec<_>>(), vec!["pve1"]);
}

#[test]
fn a_commit_pushed_between_fetches_is_picked_up() {
    let r = Remote::new();
    let mut src = UrlSource::open(&r.file_url(), "main", &r.cache(), None).unwrap();
    let first = src.fetch().unwrap();
    let again = src.fetch().unwrap();
    assert_eq!(again.commit, first.commit);
    assert!(!again.changed);
    let pushed = r.push_change("vm/base/a.yaml", "v2");
    let (moved, tree) = fetch_and_read(&mut src);
    assert_eq!(moved.commit, pushed);
    assert!(moved.changed);
    assert_eq!(tree.files["vm/base/a.yaml"], b"v2");
}

#[test]
fn an_existing_cache_is_reused_by_a_new_source() {
    let r = Remote::new();
    let mut first = UrlSource::open(&r.file_url(), "main", &r.cache(), None).unwrap();
    first.fetch().unwrap();
    assert!(r.cache().join("objects").is_dir());
    let mut second = UrlSource::open(&r.file_url(), "main", &r.cache(), None).unwrap();
    let (outcome, tree) = fetch_and_read(&mut second);
    assert_eq!(outcome.commit, r.head());
    assert!(tree.files.contains_key("proxops.yaml"));
}

#[test]
fn a_foreign_non_empty_cache_dir_is_refused_not_deleted() {
    let r = Remote::new();
    write(&r.cache(), "precious.txt", "keep");
    let mut src = UrlSource::open(&r.file_url(), "main", &r.cache(), None).unwrap();
    let err = src.fetch().unwrap_err();
    assert!(matches!(err, GitError::CacheInvalid { .. }), "{err}");
    assert!(r.cache().join("precious.txt").exists());
}

#[test]
fn a_missing_branch_is_an_error_naming_it() {
    let r = Remote::new();
    let mut src = UrlSource::open(&r.file_url(), "release", &r.cache(), None).unwrap();
    let err = src.fetch().unwrap_err();
    assert!(matches!(err, GitError::BranchNotFound { .. }), "{err}");
    assert!(err.to_string().contains("release"));
}

#[test]
fn a_branch_deleted_on_the_remote_is_pruned_and_no_longer_served() {
    let r = Remote::new();
    r.s.run_git(
        &r.work,
        &["push", "-q", r.bare.to_str().unwrap(), "main:feature"],
    );
    let mut src = UrlSource::open(&r.file_url(), "feature", &r.cache(), None).unwrap();
    src.fetch().unwrap();
    assert!(tracking_ref_exists(&r.cache(), "feature"));
    r.s.run_git(
        &r.work,
        &["push", "-q", r.bare.to_str().unwrap(), ":feature"],
    );
    let err = src.fetch().unwrap_err();
    assert!(matches!(err, GitError::BranchNotFound { .. }), "{err}");
    assert!(!tracking_ref_exists(&r.cache(), "feature"));
}

fn tracking_ref_exists(cache: &Path, branch: &str) -> bool {
    let loose = cache.join("refs/remotes/origin").join(branch).exists();
    let packed = std::fs::read_to_string(cache.join("packed-refs"))
        .map(|p| p.contains(&format!("refs/remotes/origin/{branch}")))
        .unwrap_or(false);
    loose || packed
}

#[test]
fn the_remote_url_is_never_written_into_the_cache_config() {
    let r = Remote::new();
    let mut src = UrlSource::open(&r.file_url(), "main", &r.cache(), None).unwrap();
    src.fetch().unwrap();
    let config = std::fs::read_to_string(r.cache().join("config")).unwrap();
    assert!(!config.contains("ops.git"), "{config}");
}

#[test]
fn ssh_urls_and_urls_with_passwords_are_refused_without_echoing_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let ssh = UrlSource::open("ssh://git@127.0.0.1/ops.git", "main", dir.path(), None).unwrap_err();
    assert!(matches!(ssh, GitError::UnsupportedUrl { .. }), "{ssh}");
    let err = UrlSource::open(
        "https://git:hunter2-secret@127.0.0.1/ops.git",
        "main",
        dir.path(),
        None,
    )
    .unwrap_err();
    assert!(!err.to_string().contains("hunter2-secret"), "{err}");
    assert!(!format!("{err:?}").contains("hunter2-secret"));
}

#[test]
fn token_is_redacted_in_debug_output() {
    let token = GitToken::new("tok-sekrit-123").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let src = UrlSource::open(
        "https://127.0.0.1/ops.git",
        "main",
        dir.path(),
        Some(token.clone()),
    )
    .unwrap();
    assert!(!format!("{token:?}").contains("sekrit"));
    assert!(!format!("{src:?}").contains("sekrit"));
    assert!(GitToken::new("").is_none());
}

#[test]
fn a_moved_away_remote_after_a_good_fetch_serves_the_last_good_tree_as_stale() {
    let r = Remote::new();
    let mut src = UrlSource::open(&r.file_url(), "main", &r.cache(), None).unwrap();
    let mut state = GitSource::new();
    let good = state.refresh(&mut src).unwrap();
    assert!(!good.desired_stale());
    let good_commit = good.commit.to_string();
    std::fs::rename(&r.bare, r.s.path().join("moved.git")).unwrap();
    let stale = state.refresh(&mut src).unwrap();
    assert!(stale.desired_stale());
    assert!(
        matches!(stale.stale, Some(GitError::RemoteVanished { .. })),
        "{:?}",
        stale.stale
    );
    assert_eq!(stale.commit, good_commit);
    assert_eq!(stale.tree.files["vm/base/a.yaml"], b"v1");
}

#[test]
fn a_first_fetch_that_fails_is_an_error() {
    let s = Scratch::new();
    let url = format!("file://{}", s.path().join("nothing.git").display());
    let mut src = UrlSource::open(&url, "main", &s.path().join("cache"), None).unwrap();
    let err = GitSource::new().refresh(&mut src).unwrap_err();
    assert!(matches!(err, GitError::NeverFetched { .. }), "{err}");
}

#[test]
fn git_daemon_fetch_picks_up_a_push_and_goes_stale_when_the_daemon_stops() {
    let r = Remote::new();
    let mut daemon = git_daemon(&r.s, &r.s.path().join("remote"));
    let url = format!("git://127.0.0.1:{}/ops.git", daemon.port);
    let mut src = UrlSource::open(&url, "main", &r.cache(), None).unwrap();
    let mut state = GitSource::new();
    let first = state.refresh(&mut src).unwrap();
    assert_eq!(first.commit, r.head());
    assert!(!first.desired_stale());

    let pushed = r.push_change("lxc/pve1/ct.yaml", "ct");
    let second = state.refresh(&mut src).unwrap();
    assert_eq!(second.commit, pushed);
    assert_eq!(second.tree.files["lxc/pve1/ct.yaml"], b"ct");

    daemon.stop();
    let stale = state.refresh(&mut src).unwrap();
    assert!(stale.desired_stale());
    assert_eq!(stale.commit, pushed);
    assert!(stale.tree.files.contains_key("lxc/pve1/ct.yaml"));
}

const TOKEN: &str = "s3cr3t-t0ken-value";

fn https_fixture(r: &Remote) -> (crate::support::ServerGuard, PathBuf, String) {
    let certs = make_certs(&r.s.path().join("certs"));
    let server = https_git_server(&r.s, &r.s.path().join("remote"), &certs, TOKEN);
    let url = format!("https://127.0.0.1:{}/ops.git", server.port);
    (server, certs.ca, url)
}

#[test]
fn https_with_token_fetches_a_push_between_fetches_and_goes_stale_when_stopped() {
    let r = Remote::new();
    let (mut server, ca, url) = https_fixture(&r);
    let mut src = UrlSource::open(&url, "main", &r.cache(), GitToken::new(TOKEN))
        .unwrap()
        .with_ca_file(ca);
    let mut state = GitSource::new();
    let first = state.refresh(&mut src).unwrap();
    assert_eq!(first.commit, r.head());
    assert_eq!(first.tree.files["vm/base/a.yaml"], b"v1");

    let pushed = r.push_change("vm/base/a.yaml", "v2");
    let second = state.refresh(&mut src).unwrap();
    assert_eq!(second.commit, pushed);
    assert_eq!(second.tree.files["vm/base/a.yaml"], b"v2");

    server.stop();
    let stale = state.refresh(&mut src).unwrap();
    assert!(stale.desired_stale());
    assert_eq!(stale.commit, pushed);
    let reason = stale.stale.as_ref().unwrap();
    assert!(!reason.to_string().contains(TOKEN), "{reason}");
    assert!(!format!("{reason:?}").contains(TOKEN));
    let config = std::fs::read_to_string(r.cache().join("config")).unwrap();
    assert!(
        !config.contains(TOKEN) && !config.contains("127.0.0.1"),
        "{config}"
    );
}

#[test]
fn https_with_a_wrong_token_fails_and_no_error_text_holds_a_token() {
    let r = Remote::new();
    let (_server, ca, url) = https_fixture(&r);
    let wrong = "wrong-t0ken-text";
    let mut src = UrlSource::open(&url, "main", &r.cache(), GitToken::new(wrong))
        .unwrap()
        .with_ca_file(ca);
    let err = GitSource::new().refresh(&mut src).unwrap_err();
    for text in [err.to_string(), format!("{err:?}")] {
        assert!(!text.contains(wrong), "{text}");
        assert!(!text.contains(TOKEN), "{text}");
    }
}

#[test]
fn https_without_a_token_is_refused_by_an_authenticating_server() {
    let r = Remote::new();
    let (_server, ca, url) = https_fixture(&r);
    let mut src = UrlSource::open(&url, "main", &r.cache(), None)
        .unwrap()
        .with_ca_file(ca);
    assert!(src.fetch().is_err());
}

#[test]
fn https_rejects_a_server_certificate_not_signed_by_the_ca_file() {
    let r = Remote::new();
    let (_server, _ca, url) = https_fixture(&r);
    let other = make_certs(&r.s.path().join("other-certs"));
    let mut src = UrlSource::open(&url, "main", &r.cache(), GitToken::new(TOKEN))
        .unwrap()
        .with_ca_file(other.ca);
    let err = src.fetch().unwrap_err();
    assert!(matches!(err, GitError::Fetch { .. }), "{err}");
    assert!(!err.to_string().contains(TOKEN));
}

#[test]
fn https_remote_moved_away_after_a_good_fetch_is_reported_vanished_and_served_stale() {
    let r = Remote::new();
    let (_server, ca, url) = https_fixture(&r);
    let mut src = UrlSource::open(&url, "main", &r.cache(), GitToken::new(TOKEN))
        .unwrap()
        .with_ca_file(ca);
    let mut state = GitSource::new();
    let good = state.refresh(&mut src).unwrap().commit.to_string();
    std::fs::rename(&r.bare, r.s.path().join("remote/renamed.git")).unwrap();
    let stale = state.refresh(&mut src).unwrap();
    assert!(
        matches!(stale.stale, Some(GitError::RemoteVanished { .. })),
        "{:?}",
        stale.stale
    );
    assert_eq!(stale.commit, good);
    assert_eq!(stale.tree.files["vm/base/a.yaml"], b"v1");
}

#[test]
fn url_mode_reads_the_same_files_as_local_mode_symlinks_included() {
    use std::os::unix::fs::symlink;
    let s = Scratch::new();
    let bare = s.bare_repo("remote/ops.git");
    let work = s.work_repo("work");
    write(&work, "proxops.yaml", "log: info");
    write(&work, "clusters/pve1/resources.yaml", "resources: []");
    write(&work, "vm/base/a.yaml", "a");
    write(&work, "vm/other/b.yaml", "b");
    write(&work, "docs/x.md", "no");
    write(&work, "iso", "a file where a kind root would be");
    write(s.path(), "outside.yaml", "outside");
    symlink("a.yaml", work.join("vm/base/link.yaml")).unwrap();
    symlink("link.yaml", work.join("vm/base/chain.yaml")).unwrap();
    symlink("../../../outside.yaml", work.join("vm/base/escape.yaml")).unwrap();
    symlink("../../.git/config", work.join("vm/base/gitcfg.yaml")).unwrap();
    symlink("missing.yaml", work.join("vm/base/dangling.yaml")).unwrap();
    symlink("..", work.join("vm/base/loop")).unwrap();
    std::fs::create_dir_all(work.join("lxc")).unwrap();
    symlink("../vm/base", work.join("lxc/shared")).unwrap();
    let commit = s.commit_all(&work, "links");
    s.push(&work, &bare, "main");

    let local = proxops_git::read_tree(&proxops_git::discover(&work).unwrap()).unwrap();
    let url = format!("file://{}", bare.display());
    let mut src = UrlSource::open(&url, "main", &s.path().join("cache"), None).unwrap();
    assert_eq!(src.fetch().unwrap().commit, commit);
    let remote = src.read_tree(&commit).unwrap();

    assert_eq!(
        remote.files.keys().collect::<Vec<_>>(),
        local.files.keys().collect::<Vec<_>>()
    );
    assert_eq!(remote, local);
    assert_eq!(local.files["vm/base/chain.yaml"], b"a");
    assert_eq!(local.files["lxc/shared/link.yaml"], b"a");
    assert_eq!(local.files["lxc/shared/loop/other/b.yaml"], b"b");
    assert!(
        !local
            .files
            .keys()
            .any(|k| k.contains("escape") || k.contains("gitcfg") || k.contains("dangling"))
    );
    assert!(!local.files.contains_key("iso"));
}

#[test]
fn a_git_server_that_accepts_and_stalls_fails_the_fetch_with_a_timeout() {
    let s = Scratch::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    // Holds the connection open, silent, until the fetch has given up (or a
    // generous bound passes, so a broken timeout fails instead of hanging).
    let holder = std::thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        let _ = done_rx.recv_timeout(std::time::Duration::from_secs(20));
        drop(conn);
    });
    let url = format!("git://127.0.0.1:{port}/ops.git");
    let mut src = UrlSource::open(&url, "main", &s.path().join("cache"), None)
        .unwrap()
        .with_io_timeout(std::time::Duration::from_millis(200));
    let err = src.fetch().unwrap_err();
    done_tx.send(()).unwrap();
    holder.join().unwrap();
    let text = err.to_string();
    assert!(matches!(err, GitError::Fetch { .. }), "{text}");
    assert!(
        text.contains("timed out") || text.contains("temporarily unavailable"),
        "the fetch ended for another reason than the socket timeout: {text}"
    );
}

#[test]
fn a_blob_past_the_read_limit_is_not_inflated_and_still_measures_too_large() {
    let r = Remote::new();
    let limit = proxops_model::bounds::READ_LIMIT;
    // Twice the limit: served as exactly READ_LIMIT bytes, longer than any
    // cap core applies; a file at the limit is served whole.
    let big = "#".repeat(2 * limit);
    let at_limit = "a".repeat(limit);
    write(&r.work, "vm/base/big.yaml", &big);
    write(&r.work, "vm/base/at-limit.yaml", &at_limit);
    r.push_change("vm/base/a.yaml", "v2");
    let mut src = UrlSource::open(&r.file_url(), "main", &r.cache(), None).unwrap();
    let (_, tree) = fetch_and_read(&mut src);
    assert_eq!(tree.files["vm/base/big.yaml"].len(), limit);
    assert!(tree.files["vm/base/big.yaml"].len() > proxops_model::bounds::MANIFEST_MAX_BYTES);
    assert_eq!(tree.files["vm/base/at-limit.yaml"], at_limit.as_bytes());
    assert_eq!(tree.files["vm/base/a.yaml"], b"v2");
}

#[test]
fn a_ca_file_that_is_a_link_to_dev_zero_or_a_fifo_is_refused_not_read_or_waited_on() {
    // A committed `ca-file` symlink to /dev/zero was read without end; a
    // FIFO would block the fetch until someone wrote to it.
    let r = Remote::new();
    let (_server, _ca, url) = https_fixture(&r);
    let zero = r.s.path().join("zero.pem");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let fifo = r.s.path().join("fifo.pem");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for ca in [zero, fifo] {
        let mut src = UrlSource::open(&url, "main", &r.cache(), GitToken::new(TOKEN))
            .unwrap()
            .with_ca_file(ca.clone());
        let err = src.fetch().unwrap_err();
        assert!(
            matches!(&err, GitError::CaFile { detail, .. } if detail.contains("not a regular file")),
            "{}: {err}",
            ca.display()
        );
    }
}

#[test]
fn a_ca_file_over_a_mebibyte_is_refused() {
    let r = Remote::new();
    let (_server, _ca, url) = https_fixture(&r);
    let big = r.s.path().join("big.pem");
    std::fs::write(&big, vec![b'#'; 1024 * 1024 + 1]).unwrap();
    let mut src = UrlSource::open(&url, "main", &r.cache(), GitToken::new(TOKEN))
        .unwrap()
        .with_ca_file(big);
    let err = src.fetch().unwrap_err();
    assert!(
        matches!(&err, GitError::CaFile { detail, .. } if detail.contains("larger than")),
        "{err}"
    );
}
