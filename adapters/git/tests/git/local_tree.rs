use proxops_git::{RepoRoot, discover, head_commit, read_tree};

use crate::support::{Scratch, write};

fn root(s: &Scratch, rel: &str) -> RepoRoot {
    discover(&s.path().join(rel)).unwrap()
}

#[test]
fn head_commit_is_none_before_the_first_commit() {
    let s = Scratch::new();
    s.work_repo("r");
    assert_eq!(head_commit(&root(&s, "r")).unwrap(), None);
}

#[test]
fn head_commit_follows_new_commits() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    let first = s.commit_all(&repo, "one");
    assert_eq!(
        head_commit(&root(&s, "r")).unwrap().as_deref(),
        Some(first.as_str())
    );
    write(&repo, "vm/base/a.yaml", "a");
    let second = s.commit_all(&repo, "two");
    assert_ne!(first, second);
    assert_eq!(head_commit(&root(&s, "r")).unwrap(), Some(second));
}

#[test]
fn head_commit_works_in_a_worktree_with_a_git_file() {
    let s = Scratch::new();
    let main = s.work_repo("main");
    s.commit_all(&main, "one");
    let wt = s.path().join("wt");
    s.run_git(
        &main,
        &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
    );
    write(&wt, "vm/base/a.yaml", "a");
    let side = s.commit_all(&wt, "side");
    assert_eq!(head_commit(&root(&s, "wt")).unwrap(), Some(side));
}

#[test]
fn read_tree_includes_uncommitted_edits_and_untracked_files() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    write(&repo, "proxops.yaml", "committed");
    write(&repo, "vm/base/a.yaml", "committed");
    s.commit_all(&repo, "one");
    write(&repo, "vm/base/a.yaml", "edited");
    write(&repo, "lxc/pve1/new.yaml", "untracked");
    let tree = read_tree(&root(&s, "r")).unwrap();
    assert_eq!(tree.files["vm/base/a.yaml"], b"edited");
    assert_eq!(tree.files["lxc/pve1/new.yaml"], b"untracked");
    assert_eq!(tree.files["proxops.yaml"], b"committed");
}

#[test]
fn read_tree_reads_every_kind_root_and_clusters() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    let kinds = [
        "vm",
        "lxc",
        "iso",
        "ctt",
        "templatevm",
        "templatect",
        "diskimage",
    ];
    for k in kinds {
        write(&repo, &format!("{k}/base/x.yaml"), k);
    }
    write(&repo, "clusters/pve1/resources.yaml", "resources: []");
    write(&repo, "clusters/pve1/secrets.sops.yaml", "enc");
    let tree = read_tree(&root(&s, "r")).unwrap();
    let mut want: Vec<String> = kinds.iter().map(|k| format!("{k}/base/x.yaml")).collect();
    want.push("clusters/pve1/resources.yaml".into());
    want.push("clusters/pve1/secrets.sops.yaml".into());
    want.sort();
    assert_eq!(tree.files.keys().cloned().collect::<Vec<_>>(), want);
}

#[test]
fn read_tree_excludes_git_dir_and_unrelated_top_level_entries() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    write(&repo, "vm/base/a.yaml", "a");
    write(&repo, "docs/readme.md", "no");
    write(&repo, "README.md", "no");
    write(&repo, "other.yaml", "no");
    s.commit_all(&repo, "one");
    let tree = read_tree(&root(&s, "r")).unwrap();
    assert_eq!(
        tree.files.keys().collect::<Vec<_>>(),
        vec!["vm/base/a.yaml"]
    );
}

#[test]
fn read_tree_sees_an_empty_cluster_directory() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    std::fs::create_dir_all(repo.join("clusters/empty")).unwrap();
    write(&repo, "clusters/pve1/resources.yaml", "resources: []");
    let tree = read_tree(&root(&s, "r")).unwrap();
    assert_eq!(
        tree.cluster_dirs.iter().collect::<Vec<_>>(),
        vec!["empty", "pve1"]
    );
    assert!(!tree.files.keys().any(|k| k.starts_with("clusters/empty")));
}

#[test]
fn read_tree_never_enters_a_nested_repository() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    write(&repo, "vm/base/a.yaml", "a");
    let nested = s.work_repo("r/vm/vendored");
    write(&nested, "x.yaml", "not ours");
    std::fs::create_dir_all(repo.join("clusters/sub")).unwrap();
    std::fs::write(repo.join("clusters/sub/.git"), "gitdir: /nowhere\n").unwrap();
    write(&repo, "clusters/sub/resources.yaml", "not ours");
    let tree = read_tree(&root(&s, "r")).unwrap();
    assert_eq!(
        tree.files.keys().collect::<Vec<_>>(),
        vec!["vm/base/a.yaml"]
    );
    assert!(tree.cluster_dirs.is_empty());
}

#[test]
fn read_tree_follows_symlinks_inside_the_root_and_skips_ones_outside() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    write(s.path(), "secret.yaml", "outside");
    std::fs::create_dir_all(s.path().join("outside-dir")).unwrap();
    write(s.path(), "outside-dir/o.yaml", "outside");
    write(&repo, "vm/base/real.yaml", "real");
    std::os::unix::fs::symlink(
        repo.join("vm/base/real.yaml"),
        repo.join("vm/base/link.yaml"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        s.path().join("secret.yaml"),
        repo.join("vm/base/escape.yaml"),
    )
    .unwrap();
    std::os::unix::fs::symlink(s.path().join("outside-dir"), repo.join("lxc")).unwrap();
    std::os::unix::fs::symlink("../../.git/config", repo.join("vm/base/gitconfig.yaml")).unwrap();
    std::os::unix::fs::symlink("..", repo.join("vm/base/loop")).unwrap();
    let tree = read_tree(&root(&s, "r")).unwrap();
    assert_eq!(
        tree.files.keys().collect::<Vec<_>>(),
        vec!["vm/base/link.yaml", "vm/base/real.yaml"]
    );
    assert_eq!(tree.files["vm/base/link.yaml"], b"real");
}

#[test]
fn read_tree_is_deterministic() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    for i in 0..20 {
        write(&repo, &format!("vm/c{}/f{i}.yaml", i % 3), &i.to_string());
    }
    let r = root(&s, "r");
    let a = read_tree(&r).unwrap();
    let b = read_tree(&r).unwrap();
    assert_eq!(a, b);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

#[test]
fn root_from_dir_takes_the_given_root_and_refuses_a_plain_directory() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    std::fs::create_dir_all(repo.join("vm")).unwrap();
    assert_eq!(
        RepoRoot::from_dir(&repo).unwrap().path(),
        repo.canonicalize().unwrap()
    );
    let err = RepoRoot::from_dir(&repo.join("vm")).unwrap_err();
    assert!(
        err.to_string()
            .contains("no ProxOps GitOps repository found"),
        "{err}"
    );
}

#[test]
fn repo_tree_feeds_core_repository_loading() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    std::fs::create_dir_all(repo.join("clusters/empty")).unwrap();
    let tree = read_tree(&root(&s, "r")).unwrap();
    let input = tree.as_input();
    assert!(input.cluster_dirs.contains("empty"));
    assert!(input.files.is_empty());
}

#[test]
fn explicit_root_needs_no_git_entry_and_reads_the_same_shape() {
    let s = Scratch::new();
    let plain = s.path().join("mounted");
    write(&plain, "vm/base/a.yaml", "a");
    write(&plain, "README.md", "no");
    let root = RepoRoot::explicit(&plain).unwrap();
    assert!(!root.is_git());
    let tree = read_tree(&root).unwrap();
    assert_eq!(
        tree.files.keys().collect::<Vec<_>>(),
        vec!["vm/base/a.yaml"]
    );
    assert!(RepoRoot::explicit(&s.path().join("absent")).is_err());
    let repo = s.work_repo("r");
    assert!(RepoRoot::explicit(&repo).unwrap().is_git());
}

#[test]
fn read_tree_reads_no_more_than_the_read_limit_of_a_file() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    let limit = proxops_model::bounds::READ_LIMIT;
    write(&repo, "vm/base/big.yaml", &"#".repeat(3 * limit));
    write(&repo, "vm/base/small.yaml", "a: 1\n");
    let tree = read_tree(&root(&s, "r")).unwrap();
    assert_eq!(tree.files["vm/base/big.yaml"].len(), limit);
    assert_eq!(tree.files["vm/base/small.yaml"], b"a: 1\n");
}

/// A FIFO where a manifest would be is never opened (opening it would
/// wait for a writer forever), whether the directory listing or `lstat`
/// tells what it is: at the top level and below a kind root.
#[test]
fn read_tree_skips_a_fifo_instead_of_waiting_on_it() {
    let s = Scratch::new();
    let repo = s.work_repo("r");
    write(&repo, "vm/base/real.yaml", "real");
    for fifo in ["vm/base/pipe.yaml", "proxops.yaml"] {
        let made = std::process::Command::new("mkfifo")
            .arg(repo.join(fifo))
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {fifo}");
    }
    let r = root(&s, "r");
    let (tx, rx) = std::sync::mpsc::channel();
    // A reader stuck on the FIFO is left behind; the test fails.
    std::thread::spawn(move || tx.send(read_tree(&r)));
    let tree = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("read_tree opened a FIFO and waits on it")
        .unwrap();
    assert_eq!(
        tree.files.keys().collect::<Vec<_>>(),
        vec!["vm/base/real.yaml"]
    );
}

/// The files read through any fan-out (last first, or on three threads)
/// make the tree reading them in turn makes, each file under its own path.
#[test]
fn read_tree_with_any_fan_out_reads_the_same_tree() {
    use proxops_git::read_tree_with;
    use proxops_model::repo::FanOut;
    struct Reversed;
    impl FanOut for Reversed {
        fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
            (0..n).rev().for_each(job);
        }
    }
    struct Threads;
    impl FanOut for Threads {
        fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
            let next = std::sync::atomic::AtomicUsize::new(0);
            let work = || {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= n {
                        break;
                    }
                    job(i);
                }
            };
            std::thread::scope(|s| {
                s.spawn(work);
                s.spawn(work);
                work();
            });
        }
    }
    let s = Scratch::new();
    let repo = s.work_repo("r");
    write(&repo, "proxops.yaml", "config");
    for i in 0..40 {
        write(
            &repo,
            &format!("vm/base/g{i:02}.yaml"),
            &format!("guest {i}"),
        );
    }
    write(&repo, "clusters/lab/resources.yaml", "resources: []");
    let want = read_tree(&root(&s, "r")).unwrap();
    assert_eq!(want.files.len(), 42);
    assert!(read_tree_with(&root(&s, "r"), &Reversed).unwrap() == want);
    assert!(read_tree_with(&root(&s, "r"), &Threads).unwrap() == want);
}
