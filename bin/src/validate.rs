//! `proxops validate`: parse and validate everything, nothing else.
//!
//! Every problem found is reported in one run: as `error:`/`warning:` lines
//! on stderr, or with `--output json` as one document on stdout for editors
//! and CI annotations (docs/cli.md). Warnings never change the exit code.

use std::path::Path;

use proxops_core::config::{ClusterConfig, Config};
use proxops_core::diag::{Diagnostic, Severity};

use crate::args::{CommandArgs, GlobalArgs, Output};
use crate::context::{self, Env, Workspace};
use crate::creds;
use crate::exit::{Exit, Failure};
use crate::out;

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let json = match a.output {
        None | Some(Output::Text) => false,
        Some(Output::Json) => true,
        Some(Output::Markdown) => {
            return Err(Failure::input(
                "invalid --output \"markdown\" for validate: use text or json (see proxops --help)",
            ));
        }
    };
    let ws = match context::load_workspace(g, env) {
        Ok(ws) => ws,
        // Configuration or repository shape refused the whole tree.
        Err(f) if json && !f.diagnostics.is_empty() => {
            let all: Vec<&Diagnostic> = f.diagnostics.iter().collect();
            print_json(&all)?;
            return Ok(Exit::Input);
        }
        Err(f) => return Err(f),
    };
    let mut diags = Vec::new();
    let mut clusters = 0;
    let mut objects = 0;
    for (name, result) in &ws.loaded.clusters {
        if !context::selected(g, name.as_str()) {
            continue;
        }
        clusters += 1;
        match result {
            Ok(c) => objects += c.objects.len(),
            Err(d) => diags.extend(d.iter()),
        }
    }
    let offline = offline_checks(g, &ws);
    diags.extend(offline.iter());
    let exit = if diags.is_empty() {
        Exit::Ok
    } else {
        Exit::Input
    };
    if json {
        let mut all: Vec<&Diagnostic> = diags.into_iter().chain(&ws.loaded.warnings).collect();
        all.sort();
        all.dedup();
        print_json(&all)?;
        return Ok(exit);
    }
    context::print_warnings(&ws.loaded);
    if diags.is_empty() {
        let count =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        out::print_line(&format!(
            "ok: {}, {}",
            count(clusters, "cluster", "clusters"),
            count(objects, "object", "objects")
        ))?;
        Ok(Exit::Ok)
    } else {
        Err(Failure::input(context::render_diagnostics(&diags)))
    }
}

/// `{"diagnostics": [...]}`, errors and warnings together, each with its
/// `severity`.
fn print_json(all: &[&Diagnostic]) -> Result<(), Failure> {
    let list = serde_json::to_value(all)
        .map_err(|e| Failure::runtime(format!("cannot render diagnostics: {e}")))?;
    let errors = all.iter().filter(|d| d.severity == Severity::Error).count();
    let mut doc = serde_json::Map::new();
    doc.insert("diagnostics".into(), list);
    doc.insert("errors".into(), errors.into());
    doc.insert("warnings".into(), (all.len() - errors).into());
    let text = serde_json::to_string_pretty(&doc)
        .map_err(|e| Failure::runtime(format!("cannot render diagnostics: {e}")))?;
    out::print_line(&text)
}

/// What `diff` refuses before any PVE request, checked without one (and
/// without secrets): per selected cluster whose manifests loaded, the files
/// its configuration names, its TLS settings, and every cloud-init secret
/// reference that has no `secrets-file` to be read from (the configuration
/// loader already refuses a `secrets:` block without one).
fn offline_checks(g: &GlobalArgs, ws: &Workspace) -> Vec<Diagnostic> {
    let cfg = &ws.loaded.config;
    let root = ws.root.as_deref();
    let mut out = Vec::new();
    for (name, result) in &ws.loaded.clusters {
        let (Ok(desired), Some(cc)) = (result, cfg.clusters.get(name)) else {
            continue;
        };
        if !context::selected(g, name.as_str()) {
            continue;
        }
        let config = secrets_file(cc, root).into_iter().chain(tls(cfg, cc, root));
        out.extend(config.map(|d| with_line(d, root, 0)));
        if cc.secrets_file.is_none() {
            // Each reference with the document of the object it is in,
            // in the order the cluster's own check sorts them.
            let mut refs: Vec<(Diagnostic, usize)> = desired
                .objects
                .values()
                .flat_map(|o| {
                    proxops_core::drift::object_secrets_without_file(o, name.as_str())
                        .into_iter()
                        .map(|d| (d, o.doc))
                })
                .collect();
            refs.sort();
            out.extend(refs.into_iter().map(|(d, doc)| with_line(d, root, doc)));
        }
    }
    out
}

/// A file a configuration file names, as the repository names it (relative
/// to the declaring file's directory): messages never show where this
/// host keeps the work tree.
fn as_named(file: &str, declared_in: &str) -> String {
    creds::declaring_dir(declared_in, None)
        .join(file)
        .display()
        .to_string()
}

/// The diagnostic with the line and column of its field (or of the
/// nearest key above it) in document `doc` of its file, when the file is
/// in the work tree and can be read.
fn with_line(d: Diagnostic, root: Option<&Path>, doc: usize) -> Diagnostic {
    let (Some(root), Some(field)) = (root, d.field.as_deref()) else {
        return d;
    };
    let Ok(text) = std::fs::read_to_string(root.join(&d.file)) else {
        return d;
    };
    let pos = proxops_core::diag::YamlIndex::build(&text).locate(doc, field);
    d.at(pos)
}

/// The cluster's `secrets-file`: inside the repository, and there.
fn secrets_file(cc: &ClusterConfig, root: Option<&Path>) -> Option<Diagnostic> {
    let file = cc.secrets_file.as_deref()?;
    let field = format!("pve.clusters.{}.secrets-file", cc.name.as_str());
    let message = match creds::secrets_path_alone(cc, root) {
        Err(why) => why,
        Ok(Some(path)) if !path.is_file() => format!(
            "{file:?} does not exist (looked for {}): create it with sops (docs/credentials.md), or fix the name",
            as_named(file, &cc.declared_in)
        ),
        Ok(_) => return None,
    };
    Some(Diagnostic::file(&cc.declared_in, message).with_field(field))
}

/// The cluster's TLS settings as `diff` builds them: a pinned fingerprint
/// that parses, not both a pin and `insecure`, and a `ca-file` (the
/// cluster's, else the process-wide one) that exists when it is the one
/// trusted.
fn tls(cfg: &Config, cc: &ClusterConfig, root: Option<&Path>) -> Option<Diagnostic> {
    let own = cc
        .ca_file
        .as_deref()
        .map(|f| crate::prepare::relative_to_declaring_file(f, &cc.declared_in, root));
    let ca_file = own.clone().or_else(|| cfg.ca_file.clone());
    let cluster = format!("pve.clusters.{}", cc.name.as_str());
    let trust = proxops_pve::tls::TlsTrust::from_settings(
        ca_file.as_deref(),
        cc.fingerprint.as_deref(),
        cc.insecure,
    );
    let (field, message) = match trust {
        Err(e) => (format!("{cluster}.fingerprint"), format!("TLS: {e}")),
        Ok(proxops_pve::tls::TlsTrust::CaFile(path)) if !path.is_file() => {
            let field = match own {
                Some(_) => format!("{cluster}.ca-file"),
                None => "ca-file".to_owned(),
            };
            let named = cc.ca_file.as_deref().or(cfg.ca_file.as_deref());
            let named = named.unwrap_or_default();
            let looked = match own {
                Some(_) => as_named(named, &cc.declared_in),
                None => path.display().to_string(),
            };
            let message = format!(
                "{named:?} does not exist (looked for {looked}): the CA bundle PVE's certificate is checked against; give its path relative to this file, or pin the certificate with fingerprint"
            );
            (field, message)
        }
        Ok(_) => return None,
    };
    Some(Diagnostic::file(&cc.declared_in, message).with_field(field))
}
