//! Input bounds: a file over its size cap or nested deeper than the limit
//! is refused by name before any YAML parser reads it, so no file can
//! stall a cycle (a 320 KB nest of `[[[…]]]` once took a minute to parse).
#![allow(clippy::unwrap_used, clippy::expect_used)]
// The test times the refusal (the clock is the test's, not core's).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use proxops_core::bounds::{CONFIG_MAX_BYTES, FileRole, MANIFEST_MAX_BYTES, MAX_NESTING};
use proxops_core::config::Overrides;
use proxops_core::diag::Diagnostic;
use proxops_core::repo::{self, RepoInput};

const CONFIG: &str = "pve:\n  clusters:\n    home:\n      base-url: https://pve.example.org:8006\n      nodes: [pve1]\n";
const HEAD: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: NAME\nspec:\n  node: pve1\n  vmid: VMID\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n";

/// A VM manifest whose `spec.tags` is `depth` nested flow lists, padded
/// to about `bytes`.
fn flow_nest(name: &str, vmid: u32, bytes: usize) -> String {
    let head = HEAD
        .replace("NAME", name)
        .replace("VMID", &vmid.to_string());
    let depth = (bytes - head.len()) / 2;
    format!("{head}  tags: {}{}\n", "[".repeat(depth), "]".repeat(depth))
}

/// A VM manifest with `depth` levels of nested block mappings under
/// `spec.hardware`.
fn block_nest(name: &str, vmid: u32, depth: usize) -> String {
    let mut text = HEAD
        .replace("NAME", name)
        .replace("VMID", &vmid.to_string());
    text.push_str("  hardware:\n");
    for d in 0..depth {
        text.push_str(&" ".repeat(4 + 2 * d));
        text.push_str(&format!("k{d}:\n"));
    }
    text
}

/// Loads cluster `home` with these manifests (path → text) and returns its
/// diagnostics, or the repository-wide ones.
fn diagnostics(config: &str, manifests: &[(&str, String)]) -> Vec<Diagnostic> {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "clusters/home/config.yaml".into(),
        config.as_bytes().to_vec(),
    );
    let mut listed = String::from("resources:\n");
    for (path, text) in manifests {
        listed.push_str(&format!("  - ../../{path}\n"));
        files.insert((*path).to_owned(), text.as_bytes().to_vec());
    }
    files.insert("clusters/home/resources.yaml".into(), listed.into_bytes());
    let dirs: BTreeSet<String> = ["home".to_owned()].into();
    match repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    ) {
        Err(d) => d,
        Ok(l) => l.diagnostics().into_iter().cloned().collect(),
    }
}

#[test]
fn a_320_kb_nest_and_a_deep_block_nest_are_refused_in_under_a_second() {
    let flow = flow_nest("flow", 100, 320 * 1024);
    assert!(flow.len() >= 320 * 1024);
    let block = block_nest("block", 101, 400);
    let started = Instant::now();
    let diags = diagnostics(
        CONFIG,
        &[("vm/home/flow.yaml", flow), ("vm/home/block.yaml", block)],
    );
    let elapsed = started.elapsed();
    // Before the bound this parse took about a minute; the scan takes
    // milliseconds, so a second is generous on a loaded machine.
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    let files: Vec<&str> = diags.iter().map(|d| d.file.as_str()).collect();
    assert_eq!(
        files,
        ["vm/home/block.yaml", "vm/home/flow.yaml"],
        "{diags:#?}"
    );
    for d in &diags {
        assert!(
            d.message
                .contains(&format!("deeper than {MAX_NESTING} levels")),
            "{d}"
        );
    }
    // Root mapping, spec, tags' 30 brackets: the 31st bracket crosses 32.
    let flow = &diags[1];
    assert_eq!((flow.line, flow.column), (Some(12), Some(39)), "{flow}");
    // Root, spec and hardware's mapping hold k0 at level 3: k30, on line
    // 13 + 30, is the 33rd level.
    assert_eq!(diags[0].line, Some(13 + 30), "{}", diags[0]);
}

#[test]
fn nesting_at_the_limit_still_loads() {
    // k0 sits at level 3, so k29 at 32: allowed, and refused only for what
    // it says (the unknown field, and the disk and network it lacks), never
    // for its depth.
    let diags = diagnostics(CONFIG, &[("vm/home/ok.yaml", block_nest("ok", 100, 30))]);
    assert!(
        diags.iter().any(|d| d.message.contains("unknown field")),
        "{diags:#?}"
    );
    assert!(
        diags.iter().all(|d| !d.message.contains("levels")),
        "{diags:#?}"
    );
}

#[test]
fn a_manifest_over_the_size_cap_is_refused_naming_the_cap() {
    let mut text = HEAD.replace("NAME", "big").replace("VMID", "100");
    text.push_str(
        "  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
    );
    let line = "# padding padding padding padding padding padding padding\n";
    while text.len() <= MANIFEST_MAX_BYTES {
        text.push_str(line);
    }
    let diags = diagnostics(CONFIG, &[("vm/home/big.yaml", text.clone())]);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0].file, "vm/home/big.yaml");
    assert!(
        diags[0]
            .message
            .contains("1 MiB size cap for a manifest (1048576 bytes)"),
        "{}",
        diags[0]
    );

    // One byte under the cap is only a comment-padded manifest.
    text.truncate(MANIFEST_MAX_BYTES);
    let cut = text.rfind('\n').unwrap() + 1;
    text.truncate(cut);
    let diags = diagnostics(CONFIG, &[("vm/home/big.yaml", text)]);
    assert!(diags.is_empty(), "{diags:#?}");
}

#[test]
fn a_configuration_over_its_cap_refuses_the_tree_naming_the_cap() {
    let mut config = CONFIG.to_owned();
    while config.len() <= CONFIG_MAX_BYTES {
        config.push_str("# padding padding padding padding padding padding\n");
    }
    let diags = diagnostics(&config, &[]);
    assert!(
        diags.iter().any(|d| d.file == "clusters/home/config.yaml"
            && d.message
                .contains("256 KiB size cap for a configuration file")),
        "{diags:#?}"
    );
}

/// A VM manifest whose `spec.disks` is one anchored disk and `n` aliases
/// of it: each alias adds the disk's mapping, its two keys and values.
fn disk_aliases(n: usize) -> String {
    let head = HEAD.replace("NAME", "aliased").replace("VMID", "102");
    format!(
        "{head}  disks: [&d {{storage: local-lvm, size: 32G}}{}]\n",
        ", *d".repeat(n)
    )
}

/// A VM manifest of `n` disks, each refused (no interface is left for so
/// many) and each with a decimal size (a warning naming the binary
/// spelling): the many refused quantities that made validation quadratic.
fn many_disks(n: usize) -> String {
    let head = HEAD.replace("NAME", "sized").replace("VMID", "103");
    format!(
        "{head}  disks:\n{}",
        "    - {storage: local-lvm, size: 32G}\n".repeat(n)
    )
}

/// `depth` nested block mappings whose lines end with `brk` alone.
fn block_nest_broken_by(depth: usize, brk: &str) -> String {
    block_nest("broken", 104, depth).replace('\n', brk)
}

#[test]
fn aliases_that_expand_past_the_limit_are_refused_before_parsing() {
    // The attack: 250,000 aliases in a file under the 1 MiB cap.
    let text = disk_aliases(250_000);
    assert!(text.len() <= MANIFEST_MAX_BYTES, "{}", text.len());
    let diags = diagnostics(CONFIG, &[("vm/home/aliased.yaml", text)]);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let d = &diags[0];
    assert_eq!(d.file, "vm/home/aliased.yaml");
    assert!(
        d.message
            .contains("aliases (*name) expand to more than 10000 nodes"),
        "{d}"
    );
    assert_eq!(d.line, Some(12), "{d}");
}

#[test]
fn nesting_hidden_behind_carriage_returns_or_unicode_line_breaks_is_refused() {
    for brk in ["\r", "\u{85}", "\u{2028}", "\u{2029}"] {
        let diags = diagnostics(
            CONFIG,
            &[("vm/home/broken.yaml", block_nest_broken_by(400, brk))],
        );
        assert_eq!(diags.len(), 1, "{brk:?}: {diags:#?}");
        assert!(
            diags[0]
                .message
                .contains(&format!("deeper than {MAX_NESTING} levels")),
            "{brk:?}: {}",
            diags[0]
        );
    }
}

/// The time one call of `small` and one of `large` take: the shortest of
/// 5 samples of each, taken in turns, each sample `reps` calls of `small`
/// or a tenth as many of `large`, so both take about as long and meet the
/// same load from whatever else the machine runs.
fn per_call(reps: u32, small: impl Fn(), large: impl Fn()) -> (Duration, Duration) {
    let time = |f: &dyn Fn(), n: u32| {
        let started = Instant::now();
        for _ in 0..n {
            f();
        }
        started.elapsed() / n
    };
    let (mut s, mut l) = (Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        s = s.min(time(&small, reps));
        l = l.min(time(&large, (reps / 10).max(1)));
    }
    (s, l)
}

/// Ten times the input takes under fifteen times as long (the quadratic
/// steps these inputs went through took a hundred times as long).
fn grows_linearly(what: &str, reps: u32, small: Vec<(&str, String)>, large: Vec<(&str, String)>) {
    let (small_time, large_time) = per_call(
        reps,
        || {
            diagnostics(CONFIG, &small);
        },
        || {
            diagnostics(CONFIG, &large);
        },
    );
    let ratio = large_time.as_secs_f64() / small_time.as_secs_f64().max(1e-9);
    eprintln!("{what}: {small_time:?} → {large_time:?} a call, ×{ratio:.1}");
    assert!(
        ratio < 15.0,
        "{what}: ×{ratio:.1} ({small_time:?} → {large_time:?})"
    );
}

#[test]
fn validation_time_grows_linearly_with_aliases_quantities_and_lines() {
    // Many refused quantities (each disk refused, each size noted).
    let disks = many_disks(20_000);
    let found = diagnostics(CONFIG, &[("vm/home/sized.yaml", disks.clone())]).len();
    assert!(found > 10_000, "{found} diagnostics");
    grows_linearly(
        "refused quantities",
        10,
        vec![("vm/home/sized.yaml", many_disks(2_000))],
        vec![("vm/home/sized.yaml", disks)],
    );
    // Aliases past the limit: refused while counting.
    grows_linearly(
        "aliases past the limit",
        50,
        vec![("vm/home/aliased.yaml", disk_aliases(25_000))],
        vec![("vm/home/aliased.yaml", disk_aliases(250_000))],
    );
    // The nesting scan over lines broken by carriage returns: documents
    // nested just under the limit, one after another.
    let nests = |n: usize| -> Vec<u8> {
        let doc: String = (0..MAX_NESTING - 2)
            .map(|d| format!("{}k{d}:\r", " ".repeat(2 * d)))
            .collect();
        std::iter::repeat_n(doc, n)
            .collect::<Vec<_>>()
            .join("---\r")
            .into_bytes()
    };
    let (small, large) = (nests(20), nests(200));
    assert!(large.len() < MANIFEST_MAX_BYTES);
    assert!(proxops_core::bounds::check(FileRole::Manifest, &large).is_ok());
    let scan = |bytes: &[u8]| {
        let _ = proxops_core::bounds::check(FileRole::Manifest, bytes);
    };
    let (t_small, t_large) = per_call(500, || scan(&small), || scan(&large));
    let ratio = t_large.as_secs_f64() / t_small.as_secs_f64().max(1e-9);
    eprintln!("nesting scan behind carriage returns: {t_small:?} → {t_large:?}, ×{ratio:.1}");
    assert!(ratio < 15.0, "nesting scan: ×{ratio:.1}");
}
