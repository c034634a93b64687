//! `proxops validate`: parse and validate everything, nothing else.

use crate::args::GlobalArgs;
use crate::context::{self, Env};
use crate::exit::{Exit, Failure};
use crate::out;

pub fn run(g: &GlobalArgs, env: &Env) -> Result<Exit, Failure> {
    let ws = context::load_workspace(g, env)?;
    context::print_warnings(&ws.loaded);
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
    if diags.is_empty() {
        out::print_line(&format!("ok: {clusters} clusters, {objects} objects"))?;
        Ok(Exit::Ok)
    } else {
        Err(Failure::input(context::render_diagnostics(&diags)))
    }
}
