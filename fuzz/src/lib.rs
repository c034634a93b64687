//! Fuzz targets for every parser ProxOps feeds with text it did not write:
//! the GitOps repository (manifests and configuration), PVE's property
//! strings, PVE's JSON answers (and recordings of them), and SOPS documents.
//!
//! Each target is a plain function from bytes to nothing. libFuzzer calls it
//! through `fuzz_targets/<target>.rs` (feature `libfuzzer`), and
//! `tests/regressions.rs` replays every saved input through it in the
//! normal test suite. A target never panics on any input: a panic here is a
//! parser bug. Besides "no panic", targets assert the invariants the parsers
//! document (a refusal always says why; PVE values survive
//! parse → write → parse).
//!
//! What this crate must never do: touch the network, the file system or the
//! environment, or hold a secret that protects anything.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use proxops_core::config::{self, ConfigSource, ConfigSources, Overrides};
use proxops_core::diag::Diagnostic;
use proxops_core::live::{ConfigValues, LiveConfig, StorageContent};
use proxops_core::names::{NodeName, StorageId};
use proxops_core::repo::{self, Loaded, RepoInput};
use proxops_core::wire::{
    Agent, Bdf, Boot, Bytes, DnsList, Drive, EfiDisk, HostPci, LxcFeatures, LxcMount, LxcNet,
    LxcVolumeMount, MacAddr, PropertyString, QemuNet, SshKey, SshKeys, TagSet, TpmState, Volid,
    WireValue, parse_bool, parse_memory_mib, percent_decode,
};
use proxops_pve::reader::{ReadScope, read_snapshot};
use proxops_pve::recording::{RecordedResponse, Recording};
use proxops_pve::replay::ReplayTransport;
use proxops_pve::transport::Method;
use proxops_sops::{Identities, SopsFile};

/// The names of the targets, as `fuzz_targets/<name>.rs`, `fuzz/seeds/<name>/`
/// and `fuzz/regressions/<name>/` spell them.
pub const TARGETS: [&str; 4] = ["manifest", "propstr", "pve_response", "sops"];

/// Runs target `name` on `data`; `false` when no target has that name.
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "manifest" => manifest(data),
        "propstr" => propstr(data),
        "pve_response" => pve_response(data),
        "sops" => sops(data),
        _ => return false,
    }
    true
}

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

// ---------------------------------------------------------------- manifest

/// The cluster every `manifest` input is loaded as.
const CLUSTER: &str = "fuzz";
const CONFIG_PATH: &str = "clusters/fuzz/config.yaml";
const RESOURCES_PATH: &str = "clusters/fuzz/resources.yaml";
const MANIFEST_PATH: &str = "vm/fuzz/guest.yaml";
const DEFAULT_CONFIG: &[u8] =
    b"pve:\n  clusters:\n    fuzz:\n      base-url: https://pve.example.org:8006\n      nodes: [pve1, pve2]\n";
const DEFAULT_RESOURCES: &[u8] = b"resources:\n  - ../../vm/fuzz/guest.yaml\n";
const DEFAULT_MANIFEST: &[u8] = b"apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: guest\nspec:\n  node: pve1\n  vmid: 100\n  memory: 2GiB\n";

/// The repository loader (`repo::load`, which also runs `config::load`).
///
/// The first byte chooses which file of a small repository the rest of the
/// input replaces (`b % 5`): 0 the manifest `vm/fuzz/guest.yaml`, 1
/// `clusters/fuzz/config.yaml`, 2 `clusters/fuzz/resources.yaml`, 3 the
/// process configuration `proxops.yaml`; 4 splits the rest on NUL bytes
/// into config, resources, then manifests `vm/fuzz/guest.yaml`,
/// `lxc/fuzz/ct.yaml`, `ctt/fuzz/template.yaml`, `vm/fuzz/g3.yaml`, … .
/// The other files keep a valid default.
pub fn manifest(data: &[u8]) {
    let Some(rest) = data.get(1..) else {
        return;
    };
    match load_repo(data) {
        Ok(loaded) => {
            for cluster in loaded.clusters.values() {
                if let Err(diags) = cluster {
                    assert!(!diags.is_empty(), "a refused cluster names no reason");
                    for d in diags {
                        assert!(!d.to_string().trim().is_empty(), "empty diagnostic");
                    }
                }
            }
        }
        Err(diags) => {
            assert!(!diags.is_empty(), "a refused repository names no reason");
            for d in &diags {
                assert!(!d.to_string().trim().is_empty(), "empty diagnostic");
            }
        }
    }

    // The same bytes as an explicit `--config` file, alone.
    let sources = ConfigSources {
        process: Some(ConfigSource {
            name: "fuzz.yaml".into(),
            bytes: rest,
        }),
        cluster_local: Vec::new(),
        process_is_explicit: true,
    };
    if let Err(diags) = config::load(&sources, &Overrides::default()) {
        assert!(!diags.is_empty(), "a refused configuration names no reason");
    }
}

/// The repository a `manifest` input describes, loaded (see [`manifest`]).
pub fn load_repo(data: &[u8]) -> Result<Loaded, Vec<Diagnostic>> {
    let (&mode, rest) = data.split_first().unwrap_or((&0, &[]));
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(CONFIG_PATH.into(), DEFAULT_CONFIG.to_vec());
    files.insert(RESOURCES_PATH.into(), DEFAULT_RESOURCES.to_vec());
    files.insert(MANIFEST_PATH.into(), DEFAULT_MANIFEST.to_vec());
    match mode % 5 {
        0 => {
            files.insert(MANIFEST_PATH.into(), rest.to_vec());
        }
        1 => {
            files.insert(CONFIG_PATH.into(), rest.to_vec());
        }
        2 => {
            files.insert(RESOURCES_PATH.into(), rest.to_vec());
        }
        3 => {
            files.insert("proxops.yaml".into(), rest.to_vec());
        }
        _ => {
            let mut parts = rest.split(|&b| b == 0);
            if let Some(c) = parts.next() {
                files.insert(CONFIG_PATH.into(), c.to_vec());
            }
            if let Some(r) = parts.next() {
                files.insert(RESOURCES_PATH.into(), r.to_vec());
            }
            for (i, m) in parts.enumerate() {
                let path = match i {
                    0 => MANIFEST_PATH.to_owned(),
                    1 => "lxc/fuzz/ct.yaml".to_owned(),
                    2 => "ctt/fuzz/template.yaml".to_owned(),
                    _ => format!("vm/fuzz/g{i}.yaml"),
                };
                files.insert(path, m.to_vec());
            }
        }
    }
    let dirs: BTreeSet<String> = [CLUSTER.to_owned()].into();
    let input = RepoInput {
        files: &files,
        cluster_dirs: &dirs,
    };
    repo::load(input, None, &Overrides::default())
}

// ----------------------------------------------------------------- propstr

/// The PVE property-string grammar (`proxops_core::wire`). The first byte
/// chooses the grammar (`b % 23`), the rest (lossy UTF-8) is the value.
/// Whatever parses must format to a text that parses back to the same value
/// (the module's documented round trip), and a refusal must name its key.
pub fn propstr(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let s = text(rest);
    match which % 23 {
        0 => round_trip::<PropertyString>(&s),
        1 => round_trip::<Drive>(&s),
        2 => round_trip::<QemuNet>(&s),
        3 => round_trip::<LxcNet>(&s),
        4 => round_trip::<LxcVolumeMount>(&s),
        5 => round_trip::<TagSet>(&s),
        6 => round_trip::<SshKeys>(&s),
        7 => round_trip::<Bytes>(&s),
        8 => round_trip::<HostPci>(&s),
        9 => round_trip::<EfiDisk>(&s),
        10 => round_trip::<Boot>(&s),
        11 => round_trip::<TpmState>(&s),
        12 => round_trip::<LxcMount>(&s),
        13 => round_trip::<LxcFeatures>(&s),
        14 => round_trip::<Agent>(&s),
        15 => round_trip::<DnsList>(&s),
        16 => round_trip::<Volid>(&s),
        17 => round_trip::<MacAddr>(&s),
        18 => round_trip::<Bdf>(&s),
        19 => {
            let _ = parse_memory_mib(&s);
            let _ = Bytes::parse_gib(&s);
        }
        20 => {
            let _ = parse_bool(&s);
        }
        21 => {
            let _ = percent_decode(&s);
            let _ = SshKey::parse(&s);
        }
        _ => {
            // A whole config line `key: value`, as `LiveConfig` hands it out.
            let (key, value) = s.split_once(':').unwrap_or(("net0", &s));
            let (key, value) = (key.trim(), value.trim());
            let Ok(values) = ConfigValues::from_entries(vec![(key, value)]) else {
                return;
            };
            let cfg = LiveConfig {
                values,
                digest: None,
                pending: Default::default(),
            };
            let _ = cfg.typed::<Drive>(key);
            let _ = cfg.typed::<QemuNet>(key);
            let _ = cfg.typed::<LxcNet>(key);
            let _ = cfg.slots("net");
            let _ = cfg.memory_mib();
            let _ = cfg.flag(key);
            let _ = cfg.tags();
        }
    }
}

fn round_trip<T: WireValue + PartialEq + Debug>(s: &str) {
    match T::parse_wire(s) {
        Ok(v) => {
            let wire = v.to_wire();
            match T::parse_wire(&wire) {
                Ok(again) => assert_eq!(again, v, "{s:?} → {wire:?} changed meaning"),
                Err(e) => panic!("{s:?} parsed, but its own wire form {wire:?} does not: {e}"),
            }
        }
        Err(e) => assert!(!e.to_string().trim().is_empty(), "empty wire error"),
    }
}

// ------------------------------------------------------------ pve_response

/// PVE's JSON answers. The first byte chooses (`b % 3`):
/// - 0: the rest is a recording (`Recording::from_json`); when it reads,
///   `read_snapshot` runs over a replay of it.
/// - 1: the rest is answers separated by 0x1E (ASCII record separator, never
///   valid inside JSON): the first answers `GET /cluster/resources`, the
///   others answer, in turn, the config read of every guest that inventory
///   names and the content read of storage `local` on `pve1`. An answer may
///   start with a three-digit status and a space (default 200); a body
///   that is not JSON is kept as a JSON string, as the live transport does.
/// - 2: the rest is one JSON value for `LiveConfig::from_json` and
///   `StorageContent::from_json`.
pub fn pve_response(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            if let Ok(recording) = Recording::from_json(rest) {
                let replay = ReplayTransport::from_recording(recording);
                snapshot(&replay);
            }
        }
        1 => {
            let mut parts = rest.split(|&b| b == 0x1e).map(answer);
            let Some((status, body)) = parts.next() else {
                return;
            };
            let answers: Vec<(u16, serde_json::Value)> = parts.collect();
            let mut responses = vec![recorded("/cluster/resources", status, body.clone())];
            let mut next = 0;
            let mut take = || {
                let a = answers.get(next % answers.len().max(1)).cloned();
                next += 1;
                a.unwrap_or((200, serde_json::json!({"data": {}})))
            };
            if let Some(rows) = body.get("data").and_then(|d| d.as_array()) {
                for row in rows {
                    let field = |k: &str| row.get(k).and_then(proxops_core::wire::json_to_text);
                    let (Some(kind), Some(node), Some(vmid)) =
                        (field("type"), field("node"), field("vmid"))
                    else {
                        continue;
                    };
                    let (status, body) = take();
                    let path = format!(
                        "/nodes/{}/{kind}/{vmid}/config",
                        proxops_pve::transport::encode_segment(&node)
                    );
                    responses.push(recorded(&path, status, body));
                }
            }
            let (status, body) = take();
            responses.push(recorded("/nodes/pve1/storage/local/content", status, body));
            let Ok(cluster) = proxops_core::names::ClusterName::new(CLUSTER) else {
                return;
            };
            let replay = ReplayTransport::from_recording(Recording { cluster, responses });
            snapshot(&replay);
        }
        _ => {
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(rest) else {
                return;
            };
            if let Ok(cfg) = LiveConfig::from_json(&value) {
                let _ = cfg.tags();
                let _ = cfg.is_template();
                let _ = cfg.memory_mib();
                for key in cfg.values.keys() {
                    let _ = cfg.typed::<PropertyString>(key);
                }
            }
            let _ = StorageContent::from_json(&value);
        }
    }
}

fn answer(part: &[u8]) -> (u16, serde_json::Value) {
    let (status, body) = match part {
        [a, b, c, b' ', body @ ..] if [a, b, c].iter().all(|d| d.is_ascii_digit()) => {
            let n = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
            (n.max(100), body)
        }
        _ => (200, part),
    };
    let body =
        serde_json::from_slice(body).unwrap_or_else(|_| serde_json::Value::String(text(body)));
    (status, body)
}

fn recorded(path: &str, status: u16, body: serde_json::Value) -> RecordedResponse {
    RecordedResponse {
        method: Method::Get,
        path: path.into(),
        query: String::new(),
        status,
        reason: (status >= 300).then(|| "fuzzed failure".to_owned()),
        body,
    }
}

fn snapshot(replay: &ReplayTransport) {
    let mut scope = ReadScope {
        concurrency: 1,
        ..ReadScope::default()
    };
    if let (Ok(node), Ok(storage)) = (NodeName::new("pve1"), StorageId::new("local")) {
        scope.storages.insert((node, storage));
    }
    match read_snapshot(replay, &scope) {
        Ok(snap) => {
            for f in &snap.failures {
                assert!(!f.message.trim().is_empty(), "a read failure says nothing");
            }
        }
        Err(e) => assert!(!e.to_string().trim().is_empty(), "empty read error"),
    }
}

// -------------------------------------------------------------------- sops

/// A throwaway age identity made for fuzzing only: it protects nothing. The
/// SOPS seeds are encrypted to its recipient so mutated documents reach
/// value decryption and MAC verification, not only the key unwrap.
pub const FUZZ_IDENTITY: &str =
    "AGE-SECRET-KEY-1MUG5RMMU2MEHNJ0EQCR8SGPCZYPFZ6TAJEE29GR7DFWLF0CATQ8SH7EYHK\n";

/// The SOPS document parser (`SopsFile::parse`: YAML and `sops:` metadata),
/// then decryption with the fuzzing identity. Inputs that are not UTF-8 are
/// skipped (`decrypt_file` refuses them before parsing).
pub fn sops(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match SopsFile::parse(text, "fuzz.sops.yaml") {
        Ok(file) => {
            let _ = file.recipients();
            let _ = file.rule();
            let _ = format!("{file:?}");
            if let Ok(ids) = Identities::from_text(FUZZ_IDENTITY, "fuzz identity")
                && let Err(e) = file.decrypt(&ids)
            {
                assert!(!e.to_string().trim().is_empty(), "empty SOPS error");
            }
        }
        Err(e) => assert!(!e.to_string().trim().is_empty(), "empty SOPS error"),
    }
}
