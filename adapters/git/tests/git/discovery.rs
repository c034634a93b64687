use std::ffi::OsStr;
use std::path::Path;

use proxops_git::{GitError, discover, start_dir};

use crate::support::Scratch;

#[test]
fn discovers_root_from_a_nested_subdirectory() {
    let s = Scratch::new();
    let repo = s.work_repo("ops");
    std::fs::create_dir_all(repo.join("vm/base/deep")).unwrap();
    let root = discover(&repo.join("vm/base/deep")).unwrap();
    assert_eq!(root.path(), repo.canonicalize().unwrap());
}

#[test]
fn innermost_of_two_nested_repositories_wins() {
    let s = Scratch::new();
    let outer = s.work_repo("outer");
    let inner = s.work_repo("outer/sub/inner");
    std::fs::create_dir_all(inner.join("clusters/x")).unwrap();
    assert_eq!(
        discover(&inner.join("clusters/x")).unwrap().path(),
        inner.canonicalize().unwrap()
    );
    assert_eq!(
        discover(&outer.join("sub")).unwrap().path(),
        outer.canonicalize().unwrap()
    );
}

#[test]
fn git_file_of_a_worktree_marks_the_root() {
    let s = Scratch::new();
    let main = s.work_repo("main");
    s.commit_all(&main, "first");
    let wt = s.path().join("wt");
    s.run_git(&main, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    assert!(wt.join(".git").is_file());
    std::fs::create_dir_all(wt.join("lxc")).unwrap();
    assert_eq!(
        discover(&wt.join("lxc")).unwrap().path(),
        wt.canonicalize().unwrap()
    );
}

#[test]
fn no_repository_is_an_error_naming_the_start_directory() {
    let s = Scratch::new();
    let dir = s.path().join("plain/dir");
    std::fs::create_dir_all(&dir).unwrap();
    let err = discover(&dir).unwrap_err();
    let text = err.to_string();
    // A temp dir may itself sit inside some repository on a developer's
    // machine; the assertion is only meaningful when it does not.
    if matches!(err, GitError::NoRepository { .. }) {
        assert!(
            text.contains("no ProxOps GitOps repository found"),
            "{text}"
        );
        assert!(text.contains(dir.to_str().unwrap()), "{text}");
    }
}

#[test]
fn missing_start_directory_is_an_error_with_the_phrase() {
    let s = Scratch::new();
    let dir = s.path().join("does/not/exist");
    let text = discover(&dir).unwrap_err().to_string();
    assert!(
        text.contains("no ProxOps GitOps repository found"),
        "{text}"
    );
    assert!(text.contains(dir.to_str().unwrap()), "{text}");
}

#[test]
fn start_dir_precedence_is_flag_then_env_then_cwd() {
    let cwd = Path::new("/work/here");
    assert_eq!(
        start_dir(Some(Path::new("/f")), Some(OsStr::new("/e")), cwd),
        Path::new("/f")
    );
    assert_eq!(
        start_dir(None, Some(OsStr::new("/e")), cwd),
        Path::new("/e")
    );
    assert_eq!(start_dir(None, None, cwd), cwd);
}

#[test]
fn discovery_from_start_dir_env_value_finds_that_repository() {
    let s = Scratch::new();
    let repo = s.work_repo("envrepo");
    let elsewhere = s.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let start = start_dir(None, Some(repo.as_os_str()), &elsewhere);
    assert_eq!(
        discover(&start).unwrap().path(),
        repo.canonicalize().unwrap()
    );
}
