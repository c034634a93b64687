//! Saved plans on disk: `diff --out FILE` writes the plan with what it was
//! computed from; `apply --plan FILE` executes exactly those actions, or
//! refuses and writes nothing (docs/saved-plans.md). The document and the
//! comparison are core's ([`proxops_core::saved`]); this module reads and
//! writes the file, reads PVE and runs the actions.
//!
//! Order of `apply --plan`, each step before any write: read and check the
//! file; load the repository and compare its commit and files; resolve
//! credentials; read every planned cluster through a transport that
//! refuses writes and compare each touched object with what the plan saw;
//! resolve secret references from SOPS. Only when every cluster passes
//! does anything run, and then only the saved actions, in their order.
//!
//! Must never: re-plan, run an action the file does not hold, write a
//! secret into the file, or write to PVE after any check failed.

use std::io::IsTerminal;
use std::path::Path;

use proxops_core::plan::Plan;
use proxops_core::saved::{self, SavedCluster, SavedPlan};
use proxops_driver::cluster::Ready;
use proxops_driver::drive::{self, PlanAll};
use proxops_driver::readonly::ReadOnly;

use crate::apply;
use crate::args::{CommandArgs, GlobalArgs, Output};
use crate::context::{self, Env, Workspace};
use crate::exit::{Exit, Failure};
use crate::out;
use crate::prepare::{self, Source};

/// The largest plan file `apply --plan` reads: every PVE parameter of a
/// first apply of thousands of guests fits many times over.
const PLAN_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// `diff --out FILE`: saves the plans of `outcome`. Refuses (and writes
/// nothing) when the repository has no commit, any cluster is invalid or
/// aborted, or a secret has no SOPS reference.
pub fn write(ws: &Workspace, outcome: &PlanAll, file: &Path) -> Result<(), Failure> {
    let Some(commit) = &ws.commit else {
        return Err(Failure::input(
            "diff --out: the repository has no commit; a saved plan names the commit it was computed from (commit first)",
        ));
    };
    if !outcome.invalid.is_empty() {
        return Err(Failure::input(
            "diff --out: plan not saved: the repository has invalid input",
        ));
    }
    let mut clusters = Vec::new();
    for p in &outcome.plans {
        let name = &p.plan.cluster;
        let (Some(snapshot), false) = (&p.snapshot, p.plan.is_aborted()) else {
            return Err(Failure::runtime(format!(
                "diff --out: plan not saved: cluster {name} aborted: {}",
                p.plan.abort_reason().unwrap_or("no reason recorded")
            )));
        };
        let Some(Ok(desired)) = ws.loaded.clusters.get(name) else {
            return Err(Failure::input(format!(
                "diff --out: plan not saved: cluster {name} has no valid desired state"
            )));
        };
        clusters.push(
            SavedCluster::new(&p.plan, desired, snapshot)
                .map_err(|e| Failure::input(format!("diff --out: plan not saved: {e}")))?,
        );
    }
    let doc = SavedPlan::new(commit.clone(), ws.tree.clone(), clusters);
    let text = doc
        .to_json()
        .map_err(|e| Failure::runtime(format!("diff --out: {e}")))?;
    proxops_driver::files::write_atomically(file, text.as_bytes())
        .map_err(|e| Failure::runtime(format!("diff --out {}: {e}", file.display())))?;
    let actions: usize = doc.clusters.iter().map(|c| c.actions.len()).sum();
    crate::log::event(
        crate::log::Level::Info,
        "plan saved",
        &[
            ("file", (&file.display().to_string()).into()),
            ("commit", commit.into()),
            ("actions", actions.into()),
        ],
    );
    Ok(())
}

/// Reads the cluster (through a transport that refuses writes), plans it
/// again from the same commit and that read, and asks core whether the
/// saved cluster may run ([`saved::admit`]): every touched object as the
/// plan saw it, this host's own guest untouched, the actions exactly the
/// planner's (an action added, dropped, reordered or changed in the file
/// runs nothing) and each within the planner's rules. The plan to run, or
/// why not.
fn admitted(
    c: &SavedCluster,
    ready: &Ready<'_>,
    refused: &dyn Fn(String) -> Failure,
) -> Result<Plan, Failure> {
    let guard = ReadOnly::new(ready.transport.as_ref());
    let now = ready.read_and_plan(&c.cluster, &guard);
    let Some(live) = &now.snapshot else {
        return Err(refused(format!(
            "cluster {}: {}",
            c.cluster,
            now.plan
                .abort_reason()
                .unwrap_or("pve inventory read failed")
        )));
    };
    saved::admit(c, &now.plan, ready.desired, live, &ready.policy)
        .map_err(|lines| refused(lines.join("\n")))
}

/// Reads and checks the saved plan `file` (`what` names it in errors, e.g.
/// `--plan `): a file that cannot be read, is not a saved plan of this
/// version, or is damaged ([`saved::damage`]) is invalid input (exit 2).
pub fn read(file: &Path, what: &str) -> Result<SavedPlan, Failure> {
    let shown = file.display();
    let text = proxops_driver::files::read_capped(file, PLAN_MAX_BYTES)
        .map_err(|e| e.to_string())
        .and_then(|b| String::from_utf8(b).map_err(|_| "not UTF-8 text".to_owned()))
        .map_err(|e| Failure::input(format!("cannot read {what}{shown}: {e}")))?;
    let doc =
        SavedPlan::from_json(&text).map_err(|e| Failure::input(format!("{what}{shown}: {e}")))?;
    let damage = saved::damage(&doc);
    if !damage.is_empty() {
        return Err(Failure::input(format!(
            "{what}{shown}: not a usable saved plan: {}",
            damage.join("; ")
        )));
    }
    Ok(doc)
}

/// `apply --plan FILE`: checks, then executes exactly the saved actions.
/// A file that is not a valid saved plan is exit 2; a plan that no longer
/// matches the repository or PVE is refused with exit 1; in both cases
/// nothing is written. With `--dry-run`, only the checks run.
/// `ask`: confirm on the terminal after the checks, before the first write.
pub fn apply(
    g: &GlobalArgs,
    a: &CommandArgs,
    env: &Env,
    file: &Path,
    ask: bool,
) -> Result<Exit, Failure> {
    if a.replay.is_some() {
        return Err(Failure::input(
            "apply --plan reads PVE itself: --replay does not apply",
        ));
    }
    let output = a.output.unwrap_or(Output::Text);
    if output == Output::Markdown {
        return Err(Failure::input("apply --output: use text or json"));
    }
    let doc = read(file, "--plan ")?;

    let ws = context::load_workspace(g, env)?;
    let refused = |why: String| {
        Failure::runtime(format!(
            "apply --plan refused, nothing was written: {why}; make a new plan with `proxops diff --out` and review it"
        ))
    };
    let commit = ws.commit.as_deref().unwrap_or("(none)");
    if commit != doc.commit {
        return Err(refused(format!(
            "the plan was computed from commit {}, the repository is at {commit}",
            doc.commit
        )));
    }
    if ws.tree != doc.tree {
        return Err(refused(format!(
            "the desired-state files differ from those the plan was computed from (commit {commit}; uncommitted edits?)"
        )));
    }
    for c in &doc.clusters {
        if !context::selected(g, c.cluster.as_str()) {
            return Err(Failure::input(format!(
                "apply --plan: the plan holds cluster {} and --cluster leaves it out; a saved plan runs whole",
                c.cluster
            )));
        }
    }

    let session = prepare::prepare_writing(g, env, &ws, &Source::Live)?;
    // Held from the check read to the read-back, as `apply` holds it: no
    // other proxops process can move a touched object in between.
    let locking = prepare::locking(&ws.loaded.config, "proxops apply --plan");
    let mut locks = Vec::new();
    let mut runs = Vec::new();
    for c in &doc.clusters {
        let ready = session
            .clusters
            .iter()
            .find(|p| p.name == c.cluster)
            .ok_or_else(|| {
                refused(format!(
                    "cluster {} is not configured in the repository",
                    c.cluster
                ))
            })?
            .ready
            .as_ref()
            .map_err(|reason| refused(format!("cluster {}: {reason}", c.cluster)))?;
        if !a.dry_run {
            locks.push(
                locking
                    .acquire(&c.cluster, &ready.base_url)
                    .map_err(|e| refused(format!("cluster {}: {e}", c.cluster)))?,
            );
        }
        let mut plan = admitted(c, ready, &refused)?;
        saved::resolve_secrets(&c.cluster, &mut plan.actions, &ready.secrets)
            .map_err(|e| Failure::input(format!("apply --plan: {e}; nothing was written")))?;
        runs.push((ready, plan));
    }

    if a.dry_run {
        let plans: Vec<Plan> = runs.into_iter().map(|(_, p)| p).collect();
        let palette = crate::diff::palette(g, std::io::stdout().is_terminal());
        out::print_rendered(&proxops_core::render::text_with(&plans, palette, a.verbose))?;
        out::print(&format!(
            "the plan still matches commit {commit} and PVE; nothing written (dry run)\n"
        ))?;
        return Ok(Exit::Ok);
    }

    let plans: Vec<Plan> = runs.iter().map(|(_, p)| p.clone()).collect();
    apply::show_and_confirm(g, &plans, output, ask, a.verbose)?;
    // The locks were taken above, before the check read.
    let cycles = apply::execute_shown(&plans, |opts| {
        runs.into_iter()
            .map(|(ready, plan)| drive::execute_plan(ready, plan, opts))
            .collect()
    });
    drop(locks);
    apply::print_results(&cycles, &plans, output)?;
    Ok(apply::cycles_exit(&cycles))
}
