//! `proxops diff`: plan every selected cluster and print the plan;
//! `--out FILE` also saves it for `apply --plan` ([`crate::saved`]).

use proxops_core::plan::Plan;
use proxops_core::render;

use crate::args::{CommandArgs, GlobalArgs, Output};
use crate::context::{self, Env};
use crate::cycle::{self, Source};
use crate::exit::{Exit, Failure};
use crate::log::{self, Level};
use crate::out;

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let output = a.output.unwrap_or(Output::Text);
    if a.diff && output != Output::Text {
        return Err(Failure::input(
            "--diff adds field changes to the text plan; json and markdown always show them",
        ));
    }
    let ws = context::load_workspace(g, env)?;
    context::print_warnings(&ws.loaded);
    let source = match &a.replay {
        Some(dir) => Source::Replay(dir.clone()),
        None => Source::Live,
    };
    let outcome = cycle::plan_all(g, env, &ws, &source)?;
    let plans: Vec<Plan> = outcome.plans.iter().map(|p| p.plan.clone()).collect();
    for p in &plans {
        let result = if p.aborted { "aborted" } else { "planned" };
        log::event(
            Level::Debug,
            "cluster planned",
            &[
                ("cluster", p.cluster.as_str().into()),
                ("result", result.into()),
                ("actions", p.actions.len().into()),
            ],
        );
    }
    let text = match output {
        Output::Text if a.diff => render::text_with_changes(&plans),
        Output::Text => render::text(&plans),
        Output::Json => render::json_with_warnings(&plans, &ws.loaded.warnings),
        Output::Markdown => render::markdown(&plans),
    };
    // A reader that went away early (`| head -1`) does not change what the
    // plan says: the plan is still saved and the exit code still counts.
    out::report_line(&text)?;
    let mut exit = outcome.exit();
    if let Some(file) = &a.out {
        // Printed first, so a refused save still shows what was planned.
        if let Err(f) = crate::saved::write(&ws, &outcome, file) {
            crate::out::errors(&f.message);
            exit = exit.worst(f.exit);
        }
    }
    if a.exit_code && plans.iter().any(|p| p.has_changes()) {
        exit = exit.worst(Exit::Changes);
    }
    Ok(exit)
}
