//! The table `proxops status` prints: per cluster, each object's state
//! and what stands between it and convergence, a count by state, and the
//! anomalies about the cluster as a whole.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::plan::Plan;
use crate::report::StatusStore;

/// One block per cluster: its objects' states, then a count by state and
/// the anomalies about the cluster as a whole.
pub fn status_table(store: &StatusStore, plans: &[&Plan]) -> String {
    let mut out = String::new();
    let clusters = store
        .last_cycle()
        .map(|c| c.clusters.as_slice())
        .unwrap_or_default();
    for (i, c) in clusters.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "=== {} ===", c.name);
        if c.aborted {
            let _ = writeln!(out, "aborted: {}", c.abort_reason);
            continue;
        }
        let mine: Vec<_> = store.objects().filter(|o| o.cluster == c.name).collect();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        let mut rows: Vec<[String; COLUMNS]> = vec![HEADER.map(str::to_owned)];
        for o in &mine {
            let r = &o.report;
            // What stands between the object and convergence: its error,
            // else the reason of its first pending action.
            let detail = r
                .last_error
                .as_deref()
                .or_else(|| o.pending.first().map(|p| p.reason.as_str()))
                .unwrap_or("");
            rows.push([
                r.state.as_str().to_owned(),
                r.kind.clone(),
                r.name.clone(),
                r.node.clone(),
                r.id.clone(),
                detail.split_whitespace().collect::<Vec<_>>().join(" "),
            ]);
            *counts.entry(r.state.as_str()).or_default() += 1;
        }
        aligned(&mut out, &rows);
        let summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let _ = writeln!(
            out,
            "{}: {} objects: {}",
            c.name,
            mine.len(),
            summary.join(", ")
        );
        for me in &c.self_guests {
            let _ = writeln!(
                out,
                "self: {} (vmid {} on node {}, matched by {}): ProxOps runs in this guest and never stops, restarts or prunes it",
                me.name, me.vmid, me.node, me.matched
            );
        }
        let whole = plans
            .iter()
            .filter(|p| p.cluster.as_str() == c.name)
            .flat_map(|p| &p.anomalies)
            .filter(|a| a.object().is_none());
        for a in whole {
            let _ = writeln!(out, "anomaly: {}", a.message);
        }
    }
    out
}

const COLUMNS: usize = 6;
const HEADER: [&str; COLUMNS] = ["STATE", "KIND", "NAME", "NODE", "ID", "DETAIL"];

/// The rows as columns as wide as their longest cell and two spaces
/// apart, so a long name never runs into the next column; the last column
/// is not padded.
fn aligned(out: &mut String, rows: &[[String; COLUMNS]]) {
    let mut widths = [0usize; COLUMNS];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::from("  ");
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < COLUMNS {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            } else {
                line.push_str(cell);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_longest_cell() {
        let long = "a-very-long-guest-name-that-overflows-any-fixed-column";
        let rows = [
            HEADER.map(str::to_owned),
            ["converged", "VM", long, "pve1", "101", ""].map(str::to_owned),
            [
                "drifted",
                "LXC",
                "dns",
                "pve-node-02",
                "20001",
                "config drift",
            ]
            .map(str::to_owned),
        ];
        let mut out = String::new();
        aligned(&mut out, &rows);
        let lines: Vec<&str> = out.lines().collect();
        // Every column starts at the same place on every line.
        let node_at = lines[0].find("NODE").unwrap();
        assert_eq!(lines[1].find("pve1"), Some(node_at));
        assert_eq!(lines[2].find("pve-node-02"), Some(node_at));
        assert_eq!(&lines[1][node_at - 2..node_at], "  ", "{out}");
        let detail_at = lines[0].find("DETAIL").unwrap();
        assert_eq!(lines[2].find("config drift"), Some(detail_at));
        // No trailing blanks when the last cell is empty.
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{out:?}");
    }
}
