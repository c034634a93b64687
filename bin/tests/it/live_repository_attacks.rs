//! What a committer may not make ProxOps do, against fakepve: each test
//! commits the attack to a copy of the demo repository, runs `apply
//! --yes`, and shows it refused (exit 2, the file and field named) before
//! any request reaches PVE.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;

/// `apply --yes` of `repo` is refused as invalid input naming each of
/// `needles`, and PVE saw no request at all.
fn refused_before_any_request(pve: &FakePve, repo: &Repo, needles: &[&str]) -> Run {
    pve.forget_requests().unwrap();
    let run = apply(pve, repo, &[]);
    assert_eq!(run.code, 2, "{}", run.all());
    for needle in needles {
        assert!(run.stderr.contains(needle), "{needle}\n{}", run.all());
    }
    assert_eq!(pve.requests().unwrap(), Vec::new(), "{}", run.all());
    run
}

/// The demo's dns-01 container with its bind mount's host path `path`.
fn bind_mount_of(repo: &Repo, path: &str) {
    let original =
        std::fs::read_to_string(workspace_root().join("fixtures/repos/demo/lxc/home/dns-01.yaml"))
            .unwrap();
    assert!(original.contains("host-path: /srv/dns-zones"));
    repo.write(
        "lxc/home/dns-01.yaml",
        &original.replace("host-path: /srv/dns-zones", &format!("host-path: {path:?}")),
    );
}

#[test]
fn a_bind_mount_of_a_host_system_directory_is_refused_however_it_is_spelled() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    for (path, resolved) in [
        ("/./etc", "/etc"),
        ("//etc", "/etc"),
        ("/etc/../etc", "/etc"),
        ("/srv/../", "/"),
        ("/etc/pve/priv", "/etc/pve/priv"),
        ("/root/.ssh", "/root/.ssh"),
        (
            "/srv/data/../../var/lib/pve-cluster",
            "/var/lib/pve-cluster",
        ),
    ] {
        bind_mount_of(&repo, path);
        refused_before_any_request(
            &pve,
            &repo,
            &[
                "lxc/home/dns-01.yaml",
                "spec.bind-mounts[0].host-path",
                &format!("refusing to bind-mount {resolved:?}"),
            ],
        );
    }
    // A data directory still passes validation.
    bind_mount_of(&repo, "/srv/dns-zones");
    let ok = proxops(&pve, &repo, &["validate"]);
    assert_eq!(ok.code, 0, "{}", ok.all());
}

/// The demo's monitoring VM with `tail` appended to its spec.
fn monitoring_with(repo: &Repo, tail: &str) {
    let original = std::fs::read_to_string(
        workspace_root().join("fixtures/repos/demo/vm/base/monitoring.yaml"),
    )
    .unwrap();
    repo.write("vm/base/monitoring.yaml", &format!("{original}{tail}"));
}

#[test]
fn aliases_that_expand_quadratically_and_nesting_behind_line_breaks_are_refused() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    // 250,000 aliases in a file under the 1 MiB cap (it once took 475 s).
    monitoring_with(
        &repo,
        &format!(
            "  pve-description: &d x\n  extra:\n    keyboard: [{}]\n",
            vec!["*d"; 250_000].join(",")
        ),
    );
    refused_before_any_request(
        &pve,
        &repo,
        &[
            "vm/base/monitoring.yaml",
            "aliases (*name) expand to more than 10000 nodes",
        ],
    );
    // Deep nesting whose lines end with a carriage return only (178 s).
    let nest: String = (0..400)
        .map(|d| format!("{}k{d}:\r", " ".repeat(4 + 2 * d)))
        .collect();
    monitoring_with(&repo, &format!("  hardware:\r{nest}"));
    refused_before_any_request(
        &pve,
        &repo,
        &["vm/base/monitoring.yaml", "deeper than 32 levels"],
    );
}

#[test]
fn look_alike_annotation_keys_are_refused_not_ignored() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let original = std::fs::read_to_string(
        workspace_root().join("fixtures/repos/demo/vm/base/monitoring.yaml"),
    )
    .unwrap();
    for key in [
        "proxops /prune",
        "\u{440}roxops/prune",
        "ProxOps/prune",
        "proxops/purne",
    ] {
        repo.write(
            "vm/base/monitoring.yaml",
            &original.replace(
                "  name: monitoring\n",
                &format!("  name: monitoring\n  annotations:\n    {key:?}: disabled\n"),
            ),
        );
        let run = refused_before_any_request(
            &pve,
            &repo,
            &["vm/base/monitoring.yaml", "metadata.annotations."],
        );
        assert!(
            run.stderr.contains("looks like one of ProxOps'")
                || run.stderr.contains("non-ASCII")
                || run.stderr.contains("unknown annotation"),
            "{key}: {}",
            run.all()
        );
    }
}

#[test]
fn spec_extra_keys_nobody_vetted_are_denied_unless_allow_listed() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let original = std::fs::read_to_string(
        workspace_root().join("fixtures/repos/demo/vm/base/monitoring.yaml"),
    )
    .unwrap();
    for (key, value) in [
        ("rng0", "source=/dev/hwrng"),
        ("ivshmem", "size=32"),
        ("affinity", "0-3"),
        ("hugepages", "1024"),
        ("cicustom", "user=local:snippets/u.yaml"),
        ("smbios1", "uuid=00000000-0000-0000-0000-000000000001"),
        ("numa0", "cpus=0-1,hostnodes=0"),
        ("vmstatestorage", "local"),
    ] {
        repo.write(
            "vm/base/monitoring.yaml",
            &format!("{original}  extra:\n    {key}: {value:?}\n"),
        );
        refused_before_any_request(
            &pve,
            &repo,
            &[
                "vm/base/monitoring.yaml",
                &format!("spec.extra.{key}"),
                "refused unless",
                "allow-extra-keys",
            ],
        );
    }
    // A vetted guest setting passes; an unvetted one passes once the
    // cluster's own configuration lists it.
    repo.write(
        "vm/base/monitoring.yaml",
        &format!("{original}  extra:\n    keyboard: de\n    vmstatestorage: local\n"),
    );
    let cfg = repo.path().join("clusters/home/config.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}      allow-extra-keys: [vmstatestorage]\n"),
    )
    .unwrap();
    let ok = proxops(&pve, &repo, &["validate"]);
    assert_eq!(ok.code, 0, "{}", ok.all());
}

#[test]
fn one_vmid_on_two_nodes_is_refused_naming_both_manifests() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let vm = |name: &str, node: &str| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  node: {node}\n  vmid: 420\n  memory: 512MiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 1GiB\n  networks:\n    - bridge: vmbr0\n"
        )
    };
    repo.write("vm/home/left.yaml", &vm("left", "pve1"));
    repo.write("vm/home/right.yaml", &vm("right", "pve2"));
    repo.set_resources(&["../../vm/home/left.yaml", "../../vm/home/right.yaml"]);
    let run = refused_before_any_request(
        &pve,
        &repo,
        &[
            "vm/home/right.yaml",
            "spec.vmid",
            "vmid 420 is already used by VM/left (vm/home/left.yaml) on node pve1, this one on node pve2",
        ],
    );
    let valid = proxops(&pve, &repo, &["validate"]);
    assert_eq!(valid.code, 2, "{}", valid.all());
    assert_eq!(run.stderr.matches("vmid 420").count(), 1, "{}", run.all());
}
