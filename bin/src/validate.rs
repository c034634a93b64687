//! `proxops validate`: parse and validate everything, nothing else.
//!
//! Every problem found is reported in one run: as `error:`/`warning:` lines
//! on stderr, or with `--output json` as one document on stdout for editors
//! and CI annotations (docs/cli.md). Warnings never change the exit code.

use proxops_core::diag::{Diagnostic, Severity};

use crate::args::{CommandArgs, GlobalArgs, Output};
use crate::context::{self, Env};
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
        out::print_line(&format!("ok: {clusters} clusters, {objects} objects"))?;
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
