//! `proxops record --out DIR`: the same PVE reads `diff` makes, through a
//! recording transport, saved as `DIR/<cluster>.json`
//! (`proxops-recording/v1`) for an offline `diff --replay DIR`, plus the
//! reads `adopt` makes, for `adopt --replay DIR`.
//!
//! **Architecture Invariant:** a recording holds only what PVE answered to
//! GETs outside `/access`; no header, ticket or token is ever recorded, and
//! a cloud-init password PVE answered in clear is written as PVE's mask.

use proxops_pve::reader;
use proxops_pve::recording::RecordingTransport;
use serde_json::Value;

use crate::args::{CommandArgs, GlobalArgs};
use crate::context::{self, Env};
use proxops_driver::cluster::Boxed;

use crate::exit::{Exit, Failure};
use crate::out;
use crate::prepare::{self, Source};

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let Some(out) = &a.out else {
        return Err(Failure::input("usage: proxops record --out DIR"));
    };
    let ws = context::load_workspace(g, env)?;
    let session = prepare::prepare(g, env, &ws, &Source::Live)?;
    std::fs::create_dir_all(out)
        .map_err(|e| Failure::runtime(format!("cannot create {}: {e}", out.display())))?;
    let mut exit = Exit::Ok;
    let mut recorded = String::new();
    for p in session.clusters {
        let ready = match p.ready {
            Ok(r) => r,
            Err(reason) => {
                out::errors(&format!("cluster {}: {reason}", p.name));
                exit = exit.worst(Exit::Runtime);
                continue;
            }
        };
        let recorder = RecordingTransport::new(p.name.clone(), Boxed(ready.transport));
        if let Err(e) = reader::read_snapshot(&recorder, &ready.scope) {
            out::errors(&format!(
                "cluster {}: pve inventory read failed: {e}",
                p.name
            ));
            exit = exit.worst(Exit::Runtime);
            continue;
        }
        // Also what `adopt` reads (node and storage listings, every storage's
        // content), so `adopt --replay` works from the same recording.
        let cc = &ws.loaded.config.clusters[&p.name];
        let adopt_reads =
            proxops_pve::reader::adoption_scope(&recorder, &cc.nodes, cc.read_concurrency)
                .map_err(|e| e.to_string())
                .and_then(|scope| {
                    reader::read_snapshot(&recorder, &scope).map_err(|e| e.to_string())
                });
        if let Err(e) = adopt_reads {
            out::errors(&format!(
                "cluster {}: pve inventory read failed: {e}",
                p.name
            ));
            exit = exit.worst(Exit::Runtime);
            continue;
        }
        let path = out.join(format!("{}.json", p.name));
        let mut recording = recorder.into_recording();
        for response in &mut recording.responses {
            mask_passwords(&mut response.body);
        }
        crate::confined::write_inside(
            out,
            std::path::Path::new(&format!("{}.json", p.name)),
            recording.to_json().as_bytes(),
        )
        .map_err(|e| Failure::runtime(format!("cannot write {}: {e}", path.display())))?;
        recorded.push_str(&format!("recorded {} -> {}\n", p.name, path.display()));
    }
    out::report(&recorded)?;
    if !session.invalid.is_empty() {
        let refs: Vec<&proxops_core::diag::Diagnostic> = session.invalid.iter().collect();
        out::errors(&context::render_diagnostics(&refs));
        exit = exit.worst(Exit::Input);
    }
    Ok(exit)
}

/// PVE itself reports a set cloud-init password as the fixed mask
/// `**********`, but a stand-in or an older node may answer the plaintext:
/// a recording keeps only the mask, which still reads as "a password is
/// set". Both answer forms are masked: `/config`'s object and `/pending`'s
/// list of `{key, value, pending}` entries (qemu-server `vm_pending` masks
/// both values itself).
pub const PASSWORD_MASK: &str = "**********";

fn mask_passwords(body: &mut Value) {
    let mask = |v: &mut Value| {
        if !v.is_null() {
            *v = Value::String(PASSWORD_MASK.to_owned());
        }
    };
    match body.get_mut("data") {
        Some(Value::Object(data)) => {
            if let Some(v) = data.get_mut("cipassword") {
                mask(v);
            }
        }
        Some(Value::Array(entries)) => {
            for e in entries.iter_mut().filter(|e| e["key"] == "cipassword") {
                if let Value::Object(e) = e {
                    for field in ["value", "pending"] {
                        if let Some(v) = e.get_mut(field) {
                            mask(v);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plaintext_cloud_init_password_is_recorded_as_pves_mask() {
        let mut body = serde_json::json!({"data": {"cipassword": "hunter2", "memory": "512"}});
        mask_passwords(&mut body);
        assert_eq!(
            body,
            serde_json::json!({"data": {"cipassword": "**********", "memory": "512"}})
        );
    }

    #[test]
    fn a_plaintext_cloud_init_password_in_a_pending_list_is_masked_too() {
        let mut body = serde_json::json!({"data": [
            {"key": "cipassword", "value": "hunter2", "pending": "hunter3"},
            {"key": "memory", "value": "512"}
        ]});
        mask_passwords(&mut body);
        assert_eq!(
            body,
            serde_json::json!({"data": [
                {"key": "cipassword", "value": "**********", "pending": "**********"},
                {"key": "memory", "value": "512"}
            ]})
        );
    }
}
