//! The recent cycles as a picture: one bar per cycle, as tall as it took,
//! and a line of the objects left unconverged after it. Inline SVG, no
//! script; every bar carries its numbers in a `<title>`, and the table
//! under the chart says the same in words.

use std::fmt::Write as _;

use super::html::escape;
use crate::report::{CycleEntry, CycleResult};

/// Cycles drawn, the newest last.
const BARS: usize = 60;
const WIDTH: u64 = 720;
const HEIGHT: u64 = 150;
const LEFT: u64 = 44;
const RIGHT: u64 = 120;
const TOP: u64 = 12;
const BOTTOM: u64 = 8;

/// The chart of `entries` (oldest first), in a `<figure>`.
pub(super) fn cycles(entries: &[&CycleEntry]) -> String {
    let shown = &entries[entries.len().saturating_sub(BARS)..];
    let longest = shown.iter().map(|e| took(e)).max().unwrap_or(0).max(1);
    let most = shown
        .iter()
        .map(|e| e.unconverged)
        .max()
        .unwrap_or(0)
        .max(1);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let step = plot_w as f64 / shown.len().max(1) as f64;
    let bar_w = (step * 0.7).max(1.0);
    let base = (TOP + plot_h) as f64;
    let mut out = format!(
        "<figure><svg class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{}\">\n",
        escape(&summary(shown, longest))
    );
    let _ = writeln!(
        out,
        "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
         <text x=\"{}\" y=\"{base}\" text-anchor=\"end\">0</text>\
         <text x=\"{}\" y=\"{}\">{most} not converged</text>",
        WIDTH - RIGHT,
        LEFT - 4,
        TOP + 9,
        super::html::took(longest),
        LEFT - 4,
        WIDTH - RIGHT + 4,
        TOP + 9,
    );
    let mut line = Vec::new();
    for (i, e) in shown.iter().enumerate() {
        let x = LEFT as f64 + step * i as f64 + (step - bar_w) / 2.0;
        let h = (plot_h as f64 * took(e) as f64 / longest as f64).max(1.0);
        let (class, mark) = if bad(e) {
            ("bar-bad", "✗")
        } else if e.result == CycleResult::Ok || e.result == CycleResult::DryRun {
            ("bar-ok", "")
        } else {
            ("bar-quiet", "")
        };
        let _ = writeln!(
            out,
            "<rect class=\"{class}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar_w:.1}\" height=\"{h:.1}\"><title>{}</title></rect>",
            base - h,
            escape(&bar_title(e))
        );
        if !mark.is_empty() {
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{mark}</text>",
                x + bar_w / 2.0,
                (base - h - 2.0).max(TOP as f64)
            );
        }
        let y = base - plot_h as f64 * e.unconverged as f64 / most as f64;
        line.push(format!("{:.1},{y:.1}", x + bar_w / 2.0));
    }
    let _ = writeln!(
        out,
        "<polyline class=\"drift\" points=\"{}\"/>",
        line.join(" ")
    );
    out.push_str("</svg>\n<figcaption>Bars: how long each cycle took (✗: an action failed or the cluster did nothing). Line: objects not converged after it.</figcaption></figure>\n");
    out
}

fn took(e: &CycleEntry) -> u64 {
    e.took_ms
}

fn bad(e: &CycleEntry) -> bool {
    e.actions_error > 0 || !matches!(e.result, CycleResult::Ok | CycleResult::DryRun)
}

fn bar_title(e: &CycleEntry) -> String {
    format!(
        "{}: {}, {}, {} done, {} failed, {} not converged",
        e.cluster,
        super::html::took(took(e)),
        e.result.as_str(),
        e.actions_ok,
        e.actions_error,
        e.unconverged
    )
}

fn summary(shown: &[&CycleEntry], longest: u64) -> String {
    let failed = shown.iter().filter(|e| bad(e)).count();
    format!(
        "The last {} cycles: the longest took {}; {failed} had a failure or did nothing",
        shown.len(),
        super::html::took(longest)
    )
}
