//! The planner's faster forms give what the plain forms they replace
//! gave: each is checked here against that plain form, written out as it
//! was, over generated inputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use proxops_core::live::{ConfigValues, LiveConfig};

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
            Some((n.parse().ok()?, k, v))
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
        let entries: Vec<(String, String)> =
            keys.iter().enumerate().map(|(i, k)| (k.clone(), format!("v{i}"))).collect();
        let values = ConfigValues::from_entries(entries).unwrap();
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

/// `Bytes::parse` as it lowered the whole text to find the suffix.
fn bytes_by_lowercase(s: &str) -> Option<u64> {
    let lower = s.trim().to_ascii_lowercase();
    let stem = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (num, shift) = match stem.chars().last() {
        Some('k') => (&stem[..stem.len() - 1], 10),
        Some('m') => (&stem[..stem.len() - 1], 20),
        Some('g') => (&stem[..stem.len() - 1], 30),
        Some('t') => (&stem[..stem.len() - 1], 40),
        Some('p') => (&stem[..stem.len() - 1], 50),
        _ => (stem, 0),
    };
    // Only digits and a point make a number; one of those, with the unit
    // spelled plainly, reads as the number it is. (This checks how the
    // suffix is found; what each unit is worth, `scalar.rs`'s own tests.)
    if !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let unit = match shift {
        10 => "k",
        20 => "m",
        30 => "g",
        40 => "t",
        50 => "p",
        _ => "",
    };
    proxops_core::wire::Bytes::parse(&format!("{num}{unit}"))
        .ok()
        .map(|b| b.get())
}

/// `parse_bool` as it lowered the text.
fn bool_by_lowercase(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "yes" | "on" | "true" => Some(true),
        "0" | "no" | "off" | "false" => Some(false),
        _ => None,
    }
}

fn sized() -> impl Strategy<Value = String> {
    let part = prop::sample::select(vec![
        "0", "1", "32", "0.5", ".", "", " ", "k", "K", "m", "M", "g", "G", "t", "T", "p", "P", "i",
        "I", "b", "B", "iB", "IB", "x", "\u{e9}", "\u{212a}", "-",
    ]);
    prop::collection::vec(part, 0..5).prop_map(|p| p.concat())
}

fn flag_text() -> impl Strategy<Value = String> {
    let part = prop::sample::select(vec![
        "1", "0", "yes", "YES", "No", "on", "oFF", "true", "False", " ", "t", "\u{130}", "",
    ]);
    prop::collection::vec(part, 0..3).prop_map(|p| p.concat())
}

/// A drive's head and tokens as the reader split them before it took the
/// head out in place, with the volume read the way it read it then.
fn drive_by_copy(
    s: &str,
) -> Option<(
    proxops_core::wire::DriveVolume,
    Vec<proxops_core::wire::PropToken>,
)> {
    use proxops_core::names::StorageId;
    use proxops_core::wire::{Bytes, DriveVolume, PropToken, PropertyString, Volid};
    let tokens = PropertyString::parse(s).ok()?.into_tokens();
    let mut head = None;
    let mut rest = Vec::new();
    for (i, t) in tokens.into_iter().enumerate() {
        match t {
            PropToken::Positional(v) if i == 0 && head.is_none() => head = Some(v),
            PropToken::Pair { key, value }
                if head.is_none() && key == "file" && !value.contains('=') =>
            {
                head = Some(value)
            }
            other => rest.push(other),
        }
    }
    let t = head?.trim().to_owned();
    let volume = if t == "none" {
        DriveVolume::None
    } else {
        match t.split_once(':') {
            None => DriveVolume::Other(t.clone()),
            Some(_) if t.starts_with('/') => DriveVolume::Other(t.clone()),
            Some((storage, r)) => {
                let sid = StorageId::new(storage).ok()?;
                if !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                    DriveVolume::Create {
                        storage: sid,
                        size: Bytes::parse_gib(r).ok()?,
                    }
                } else if r == "cloudinit" {
                    DriveVolume::CloudInitCreate { storage: sid }
                } else {
                    DriveVolume::Volume(Volid::parse(&t).ok()?)
                }
            }
        }
    };
    let modelled = [
        "import-from",
        "media",
        "iothread",
        "discard",
        "ssd",
        "aio",
        "size",
    ];
    rest.retain(|t| !t.key().is_some_and(|k| modelled.contains(&k)));
    Some((volume, rest))
}

fn drive_text() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "local-lvm:vm-100-disk-0",
        "local:iso/a.iso",
        "file=local:100/vm-100-disk-1.qcow2",
        "file=a=b",
        "none",
        "/dev/sdb",
        "local-lvm:32",
        "ceph:cloudinit",
        "bad id:x",
        "local:",
        "size=32G",
        "iothread=1",
        "cache=writeback",
        "backup=0",
        "ro",
        "",
    ]);
    prop::collection::vec(token, 0..5).prop_map(|t| t.join(","))
}

proptest! {
    #[test]
    fn sizes_read_as_lowering_read_them(text in sized()) {
        let fast = proxops_core::wire::Bytes::parse(&text).ok().map(|b| b.get());
        prop_assert_eq!(fast, bytes_by_lowercase(&text), "{:?}", text);
    }

    #[test]
    fn flags_read_as_lowering_read_them(text in flag_text()) {
        prop_assert_eq!(proxops_core::wire::parse_bool(&text).ok(), bool_by_lowercase(&text), "{:?}", text);
    }

    #[test]
    fn drives_split_as_copying_split_them(text in drive_text()) {
        // Both read a drive, the same one, or neither does: the tokens
        // below give every modelled key a value it reads.
        let fast = proxops_core::wire::Drive::parse(&text).ok().map(|d| (d.volume, d.extra));
        prop_assert_eq!(fast, drive_by_copy(&text), "{:?}", text);
    }
}

fn tag_list() -> impl Strategy<Value = Vec<String>> {
    let tag = prop::sample::select(vec![
        "proxops",
        "web",
        "Web",
        "a",
        "a.b",
        "z-1",
        "_x",
        "proxops-noprune",
        "10",
        "1a",
    ]);
    prop::collection::vec(tag.prop_map(str::to_owned), 0..6)
}

proptest! {
    /// The desired tags' text, sorted and joined without building a set,
    /// is the set's own text.
    #[test]
    fn tags_join_as_their_set_writes_them(tags in tag_list()) {
        use proxops_core::wire::{Tag, TagSet, join_tags};
        let set = TagSet(tags.iter().map(|t| Tag::new(t).unwrap()).collect());
        let mut sorted: Vec<&str> = tags.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        sorted.dedup();
        prop_assert_eq!(join_tags(sorted.into_iter()), set.to_wire());
    }
}
