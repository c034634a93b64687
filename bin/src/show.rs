//! `proxops show PLAN`: a saved plan (`diff --out`) printed for review, as
//! `diff` printed it, in text, Markdown or JSON. Offline: it reads the file
//! alone, no repository, no configuration, no credentials and no PVE.
//!
//! Must never: read anything but the file, or print a plan from a file
//! that is not a whole saved plan of this version (exit 2 instead).

use std::io::IsTerminal;
use std::path::Path;

use proxops_core::plan::Plan;
use proxops_core::render;

use crate::args::{CommandArgs, GlobalArgs, Output};
use crate::exit::{Exit, Failure};
use crate::out;

pub fn run(g: &GlobalArgs, a: &CommandArgs) -> Result<Exit, Failure> {
    let Some(file) = &a.file else {
        return Err(Failure::input("usage: proxops show PLAN"));
    };
    let doc = crate::saved::read(file, "")?;
    let plans: Vec<Plan> = doc.clusters.iter().map(|c| c.plan()).collect();
    let text = match a.output.unwrap_or(Output::Text) {
        Output::Text => format!(
            "{}\n\n{}",
            header(file, &doc.commit),
            render::text_styled(
                &plans,
                crate::diff::palette(g, std::io::stdout().is_terminal())
            )
        ),
        Output::Markdown => format!(
            "{}\n\n{}",
            header(file, &doc.commit),
            render::markdown(&plans)
        ),
        Output::Json => render::json(&plans),
    };
    out::report_rendered_line(&text)?;
    Ok(Exit::Ok)
}

/// What the file is: the commit it was computed from and how to run it.
fn header(file: &Path, commit: &str) -> String {
    let file = render::printable(&file.display().to_string()).into_owned();
    format!(
        "Saved plan {file}, computed from commit {}; `proxops apply --plan {file}` runs exactly these actions.",
        render::printable(commit)
    )
}
