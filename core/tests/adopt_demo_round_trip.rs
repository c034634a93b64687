//! Adoption of what ProxOps itself created: every cluster of the demo
//! repository is created in the PVE simulator (which stores values the
//! way PVE 9.2 reports them), adopted, loaded back as a repository and
//! planned against the same state. Every guest carries the ownership tag,
//! so the plan is empty.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};

use proxops_core::adopt::{AdoptOptions, TEMPLATE_PLACEHOLDER, adopt};
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::plan::Policy;
use proxops_core::planner::plan;

use support::demo;

#[test]
fn what_proxops_created_adopts_back_into_an_empty_plan() {
    let secrets = CloudInitSecrets::default();
    let mut guests = 0;
    for c in demo::clusters() {
        let ctx = Context {
            cluster: &c,
            secrets: &secrets,
        };
        let snap = demo::created(&c, &ctx);
        let a = adopt(&c.name, &snap, &AdoptOptions::default()).unwrap();
        let ctt = a
            .files
            .keys()
            .find_map(|p| p.strip_prefix(&format!("ctt/{}/", c.name)))
            .map(|f| f.trim_end_matches(".yaml").to_owned());
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        files.insert(
            format!("clusters/{}/config.yaml", c.name),
            format!(
                "pve:\n  clusters:\n    {}:\n      base-url: https://pve.example.org:8006\n",
                c.name
            )
            .into_bytes(),
        );
        let mut lines = a.resources_lines.clone();
        for (path, text) in &a.files {
            let text = if text.contains(TEMPLATE_PLACEHOLDER) {
                lines.push(format!("  - ../../{path}"));
                let name = ctt
                    .clone()
                    .expect("a container needs an adopted CTTemplate");
                text.lines()
                    .map(|l| {
                        if l.starts_with("  template: ") {
                            format!("  template: {name}")
                        } else {
                            l.to_owned()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
                    + "\n"
            } else {
                text.clone()
            };
            files.insert(path.clone(), text.into_bytes());
        }
        files.insert(
            format!("clusters/{}/resources.yaml", c.name),
            format!("resources:\n{}\n", lines.join("\n")).into_bytes(),
        );
        let dirs: BTreeSet<String> = [c.name.to_string()].into();
        let adopted = demo::load(&files, &dirs).pop().unwrap();
        guests += adopted
            .objects
            .values()
            .filter(|o| o.r#ref.kind.is_guest())
            .count();
        assert_eq!(
            adopted
                .objects
                .values()
                .filter(|o| o.r#ref.kind.is_guest())
                .count(),
            c.objects
                .values()
                .filter(|o| o.r#ref.kind.is_guest())
                .count()
        );
        let p = plan(
            &adopted,
            &snap,
            &Context {
                cluster: &adopted,
                secrets: &secrets,
            },
            &Policy::default(),
        );
        assert!(
            p.actions.is_empty(),
            "{}: {:#?}\n{:#?}",
            c.name,
            p.actions,
            a.files
        );
        assert!(p.anomalies.is_empty(), "{}: {:#?}", c.name, p.anomalies);
        assert!(p.skipped.is_empty(), "{}: {:#?}", c.name, p.skipped);
    }
    assert!(guests >= 7, "only {guests} guests");
}
