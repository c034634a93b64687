//! The planner's faster forms give what the plain forms they replace
//! gave: each is checked here against that plain form, written out as it
//! was, over generated inputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use proxops_core::live::LiveConfig;

/// `LiveConfig::slots` as it read every key of the config.
fn slots_by_full_scan<'a>(cfg: &'a LiveConfig, prefix: &'a str) -> Vec<(u32, &'a str, &'a str)> {
    let mut out: Vec<(u32, &str, &str)> = cfg
        .values
        .iter()
        .filter_map(|(k, v)| {
            let n = k.strip_prefix(prefix)?;
            if n.is_empty()
                || !n.bytes().all(|b| b.is_ascii_digit())
                || (n.len() > 1 && n.starts_with('0'))
            {
                return None;
            }
            Some((n.parse().ok()?, k.as_str(), v.as_str()))
        })
        .collect();
    out.sort_by_key(|(n, _, _)| *n);
    out
}

/// Keys near the prefixes the planner asks for: slots, numbers with
/// leading zeros or too large for `u32`, keys sorting just before or after
/// a prefix's run.
fn key() -> impl Strategy<Value = String> {
    let stem = prop::sample::select(vec![
        "net", "ne", "nes", "neu", "netx", "net-", "mp", "m", "mpz", "scsi", "sata", "hostpci", "",
        "a", "z", "\u{e9}",
    ]);
    let tail = prop::sample::select(vec![
        "",
        "0",
        "1",
        "2",
        "9",
        "10",
        "01",
        "00",
        "x",
        "0x",
        "4294967295",
        "4294967296",
        "31",
    ]);
    (stem, tail).prop_map(|(s, t)| format!("{s}{t}"))
}

proptest! {
    #[test]
    fn slots_are_those_a_full_scan_finds(
        keys in prop::collection::vec(key(), 0..24),
        prefix in prop::sample::select(vec!["net", "mp", "scsi", "sata", "hostpci", "ne", ""]),
    ) {
        let values: BTreeMap<String, String> =
            keys.iter().enumerate().map(|(i, k)| (k.clone(), format!("v{i}"))).collect();
        let cfg = LiveConfig { values, ..LiveConfig::default() };
        prop_assert_eq!(cfg.slots(prefix), slots_by_full_scan(&cfg, prefix));
    }
}

/// `DriveVolume::is_cloudinit` of a volume as it split the name on
/// characters.
fn is_cloudinit_by_split(volname: &str) -> bool {
    let name = volname.rsplit('/').next().unwrap_or("");
    let stem = name.split('.').next().unwrap_or("");
    stem.starts_with("vm-") && stem.ends_with("-cloudinit")
}

fn volname() -> impl Strategy<Value = String> {
    let part = prop::sample::select(vec![
        "vm-",
        "vm-100",
        "-cloudinit",
        "cloudinit",
        "-disk-0",
        ".qcow2",
        ".",
        "/",
        "100/",
        "é",
        "vm",
        "-",
        "base-9",
        "",
    ]);
    prop::collection::vec(part, 1..6).prop_map(|p| p.concat())
}

proptest! {
    #[test]
    fn a_cloudinit_volume_is_found_as_splitting_found_it(name in volname()) {
        let volume = proxops_core::wire::DriveVolume::parse(&format!("local:{name}"));
        if let Ok(v @ proxops_core::wire::DriveVolume::Volume(_)) = volume {
            prop_assert_eq!(v.is_cloudinit(), is_cloudinit_by_split(&name), "{}", name);
        }
    }

    /// Drives and NICs read back spell what `format!` spelled.
    #[test]
    fn drives_and_nics_are_spelled_as_formatting_spelled_them(
        storage in prop::sample::select(vec!["local", "local-lvm", "ceph_pool.1"]),
        name in volname(),
        gib in prop::sample::select(vec!["1", "32", "0.5", "1.25"]),
        model in prop::sample::select(vec!["virtio", "e1000"]),
        mac in prop::sample::select(vec!["", "BC:24:11:00:00:01", "bc:24:11:0a:0b:0c"]),
        bridge in prop::sample::select(vec!["vmbr0", "vmbr1"]),
    ) {
        use proxops_core::wire::{DriveVolume, QemuNet};
        for text in [format!("{storage}:{name}"), format!("{storage}:{gib}"), format!("{storage}:cloudinit")] {
            if let Ok(v) = DriveVolume::parse(&text) {
                let plain = match &v {
                    DriveVolume::Volume(id) => format!("{}:{}", id.storage, id.volname),
                    DriveVolume::Create { storage, size } => format!("{storage}:{}", size.to_gib_string()),
                    DriveVolume::CloudInitCreate { storage } => format!("{storage}:cloudinit"),
                    DriveVolume::None => "none".to_owned(),
                    DriveVolume::Other(s) => s.clone(),
                };
                prop_assert_eq!(v.to_wire(), plain);
            }
        }
        let head = if mac.is_empty() { model.to_owned() } else { format!("{model}={mac}") };
        let text = format!("{head},bridge={bridge},tag=5,firewall=1");
        let nic = QemuNet::parse(&text).unwrap();
        prop_assert_eq!(nic.to_wire(), text);
    }
}
