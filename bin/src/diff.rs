//! `proxops diff`: plan every selected cluster and print the plan;
//! `--out FILE` also saves it for `apply --plan` ([`crate::saved`]).
//!
//! The text plan always lists each action's field changes; `--diff`, which
//! once added them, is still accepted and changes nothing. It is coloured
//! as [`palette`] decides.

use std::collections::BTreeSet;
use std::io::IsTerminal;

use proxops_core::names::Ref;
use proxops_core::plan::Plan;
use proxops_core::render::{self, Palette};
use proxops_core::repo::ClusterDesired;

use crate::args::{ColorChoice, CommandArgs, GlobalArgs, Output};
use crate::context::{self, Env};
use crate::exit::{Exit, Failure};
use crate::log::{self, Level};
use crate::out;
use crate::prepare::{self, Source};

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let output = a.output.unwrap_or(Output::Text);
    let ws = context::load_workspace(g, env)?;
    context::print_warnings(&ws.loaded);
    let source = match &a.replay {
        Some(dir) => Source::Replay(dir.clone()),
        None => Source::Live,
    };
    let targets = targets(g, a, &ws)?;
    if targets.is_some() && a.out.is_some() {
        return Err(Failure::input(
            "diff --out saves a whole plan (apply --plan runs it only if the planner makes it again); leave out --target",
        ));
    }
    let outcome = prepare::plan_all(g, env, &ws, &source, targets.as_ref())?;
    let plans: Vec<Plan> = outcome.plans.iter().map(|p| p.plan.clone()).collect();
    for p in &plans {
        let result = if p.is_aborted() { "aborted" } else { "planned" };
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
        Output::Text => render::text_with(
            &plans,
            palette(g, std::io::stdout().is_terminal()),
            a.verbose,
        ),
        Output::Json => render::json_with_warnings(&plans, &ws.loaded.warnings),
        Output::Markdown => render::markdown(&plans),
    };
    // A reader that went away early (`| head -1`) does not change what the
    // plan says: the plan is still saved and the exit code still counts.
    // Escaped by core: a coloured plan goes out with its colours.
    out::report_rendered_line(&text)?;
    let mut exit = prepare::planned_exit(&outcome);
    if let Some(file) = &a.out {
        // Printed first, so a refused save still shows what was planned.
        if let Err(f) = crate::saved::write(&ws, &outcome, file) {
            crate::out::errors(&f.message);
            exit = exit.worst(f.exit);
        }
    }
    if a.exit_code {
        exit = exit.worst(exit_code(&plans));
    }
    // The process ends with this command: the plans, the live snapshots
    // and the desired objects (no secret among them: those stay in the
    // configuration, which is dropped as usual) are left to the system
    // instead of freed one allocation at a time, 3% of a 10,000-guest diff.
    std::mem::forget(outcome);
    std::mem::forget(plans);
    let mut ws = ws;
    std::mem::forget(std::mem::take(&mut ws.loaded.clusters));
    Ok(exit)
}

/// `--target`'s objects among the selected clusters' manifests, or `None`
/// without the flag. A target no selected cluster declares is invalid
/// input (exit 2), nothing read from PVE, with the nearest `Kind/name`.
pub(crate) fn targets(
    g: &GlobalArgs,
    a: &CommandArgs,
    ws: &context::Workspace,
) -> Result<Option<BTreeSet<Ref>>, Failure> {
    if a.targets.is_empty() {
        return Ok(None);
    }
    let clusters: Vec<&ClusterDesired> = ws
        .loaded
        .clusters
        .iter()
        .filter(|(name, _)| context::selected(g, name.as_str()))
        .filter_map(|(_, c)| c.as_ref().ok())
        .collect();
    proxops_core::target::resolve(&a.targets, clusters.iter().copied())
        .map(Some)
        .map_err(|lines| Failure::input(lines.join("\n")))
}

/// `--exit-code`'s finding: 4 when something remains that ProxOps will not
/// do by itself (an anomaly, skipped work), else 3 for changes, else 0.
fn exit_code(plans: &[Plan]) -> Exit {
    if plans.iter().any(Plan::needs_attention) {
        Exit::Attention
    } else if plans.iter().any(Plan::has_changes) {
        Exit::Changes
    } else {
        Exit::Ok
    }
}

/// The colours of a text plan written to a stream that is (or is not) a
/// terminal: `--color always` and `never` decide; `auto` colours a
/// terminal unless `NO_COLOR` is set to anything but the empty string.
pub(crate) fn palette(g: &GlobalArgs, terminal: bool) -> Palette {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    Palette::new(colour(g.color, terminal, no_color))
}

fn colour(choice: ColorChoice, terminal: bool, no_color: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && !no_color,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_colours_a_terminal_without_no_color_and_the_flag_wins() {
        use ColorChoice::*;
        assert!(colour(Auto, true, false));
        assert!(!colour(Auto, false, false));
        assert!(!colour(Auto, true, true));
        assert!(colour(Always, false, true));
        assert!(!colour(Never, true, false));
    }
}
