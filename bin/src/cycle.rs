//! One read-and-plan pass over every selected cluster, sorted and
//! isolated: a cluster whose input is invalid or whose PVE read fails is
//! reported and the others go on.

use std::path::PathBuf;

use proxops_core::diag::Diagnostic;
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::live::LiveSnapshot;
use proxops_core::names::ClusterName;
use proxops_core::plan::{self, Plan, Policy};
use proxops_pve::reader::{self, ReadScope};
use proxops_pve::replay::ReplayTransport;
use proxops_pve::transport::Transport;

use crate::args::GlobalArgs;
use crate::context::{self, Env, Workspace};
use crate::exit::Failure;

/// Where live state comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Recordings `<dir>/<cluster>.json`.
    Replay(PathBuf),
    /// The PVE API.
    Live,
}

pub struct ClusterPlan {
    pub plan: Plan,
    pub snapshot: Option<LiveSnapshot>,
}

pub struct PlanAll {
    pub plans: Vec<ClusterPlan>,
    /// Diagnostics of clusters refused for invalid input.
    pub invalid: Vec<Diagnostic>,
}

pub fn transport_for(source: &Source, cluster: &ClusterName) -> Result<Box<dyn Transport>, String> {
    match source {
        Source::Replay(dir) => {
            let path = dir.join(format!("{cluster}.json"));
            ReplayTransport::load(&path)
                .map(|t| Box::new(t) as Box<dyn Transport>)
                .map_err(|e| format!("cannot load recording {}: {e}", path.display()))
        }
        Source::Live => Err("live PVE access is not available in this build".into()),
    }
}

pub fn plan_all(g: &GlobalArgs, _env: &Env, ws: &Workspace, source: &Source) -> Result<PlanAll, Failure> {
    let cfg = &ws.loaded.config;
        let mut plans = Vec::new();
    let mut invalid = Vec::new();
    for (name, result) in &ws.loaded.clusters {
        if !context::selected(g, name.as_str()) {
            continue;
        }
        let desired = match result {
            Ok(d) => d,
            Err(diags) => {
                invalid.extend(diags.iter().cloned());
                plans.push(ClusterPlan {
                    plan: Plan::aborted(name.clone(), format!("invalid input: {} problem(s) in the repository; nothing read or written", diags.len())),
                    snapshot: None,
                });
                continue;
            }
        };
        let Some(cc) = cfg.clusters.get(name) else { continue };
        let policy = Policy { prune_budget: cfg.prune_budget, nodes: cc.nodes.clone() };
        let transport = match transport_for(source, name) {
            Ok(t) => t,
            Err(e) => {
                plans.push(ClusterPlan { plan: Plan::aborted(name.clone(), e), snapshot: None });
                continue;
            }
        };
        let scope = ReadScope {
            allowlist: (!cc.nodes.is_empty()).then(|| cc.nodes.clone()),
            storages: desired.storage_pairs(),
            concurrency: cc.read_concurrency,
        };
        let snapshot = match reader::read_snapshot(transport.as_ref(), &scope) {
            Ok(s) => s,
            Err(e) => {
                plans.push(ClusterPlan { plan: Plan::aborted(name.clone(), format!("pve inventory read failed: {e}")), snapshot: None });
                continue;
            }
        };
        let secrets = CloudInitSecrets::default();
        let ctx = Context { cluster: desired, secrets: &secrets };
        let plan = plan::plan(desired, &snapshot, &ctx, &policy);
        plans.push(ClusterPlan { plan, snapshot: Some(snapshot) });
    }
    Ok(PlanAll { plans, invalid })
}
