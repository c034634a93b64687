//! The calls that turn a live rule list into the desired one.
//!
//! PVE edits a rule list one rule per call, by position
//! (`src/PVE/API2/Firewall/Rules.pm` of pve-firewall):
//!
//! - `POST …/rules` (`register_create_rule`) puts the new rule first
//!   (`unshift`), whatever else is sent, and checks no digest;
//! - `PUT …/rules/{pos}` (`register_update_rule`) changes the rule in
//!   place, or with `moveto` moves it in front of the rule now at
//!   `moveto` (at the end when `moveto` is past the last), ignoring the
//!   other fields;
//! - `DELETE …/rules/{pos}` (`register_delete_rule`) removes it.
//!
//! The update and the delete first compare the `digest` sent with a SHA-1
//! over the whole list (`copy_list_with_digest` in Firewall.pm) and
//! refuse a list that changed. Every call changes the list, so no digest
//! can be known before the call before it has run: each call after the
//! first, and every create, is preceded by a read of the list, which must
//! equal the list the sequence expects at that point ([`Call::expect`]),
//! and carries the digest that read returned ([`Check::ReadBack`]). The
//! first update, move or delete carries the digest the planner read
//! ([`Check::Digest`]). A hand edit at any point stops the sequence before
//! its next write, and the next cycle plans again from what PVE holds.

use proxops_model::firewall::Rule;

/// One PVE call on a rule list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleCall {
    /// `POST …/rules`: the rule becomes the first.
    Create { rule: Rule },
    /// `PUT …/rules/{pos}` with the changed fields (`Rule::update_form`).
    Update {
        pos: usize,
        was: Box<Rule>,
        rule: Box<Rule>,
    },
    /// `PUT …/rules/{pos}` with `moveto`.
    Move { pos: usize, moveto: usize },
    /// `DELETE …/rules/{pos}`.
    Delete { pos: usize, rule: Rule },
}

/// Which digest a call carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The digest the planner read with the live list.
    Digest(String),
    /// Read the list first: it must equal [`Call::expect`]; send the
    /// digest of that read (none for a create, which PVE does not check).
    ReadBack,
}

/// A call, the list it expects to find and the digest it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub call: RuleCall,
    pub expect: Vec<Rule>,
    pub check: Check,
}

impl RuleCall {
    /// The HTTP method, the path below the list (`""` or `"/{pos}"`) and
    /// the parameters, the digest left to [`Check`].
    pub fn request(&self) -> (&'static str, String, Vec<(&'static str, String)>) {
        match self {
            RuleCall::Create { rule } => ("POST", String::new(), rule.api_form()),
            RuleCall::Update { pos, was, rule } => {
                ("PUT", format!("/{pos}"), rule.update_form(was))
            }
            RuleCall::Move { pos, moveto } => (
                "PUT",
                format!("/{pos}"),
                vec![("moveto", moveto.to_string())],
            ),
            RuleCall::Delete { pos, .. } => ("DELETE", format!("/{pos}"), Vec::new()),
        }
    }

    /// The list after the call, as PVE's handlers leave it.
    pub fn apply(&self, list: &mut Vec<Rule>) {
        match self {
            RuleCall::Create { rule } => list.insert(0, rule.clone()),
            RuleCall::Update { pos, rule, .. } => {
                if let Some(slot) = list.get_mut(*pos) {
                    *slot = (**rule).clone();
                }
            }
            RuleCall::Move { pos, moveto } => move_rule(list, *pos, *moveto),
            RuleCall::Delete { pos, .. } => {
                if *pos < list.len() {
                    list.remove(*pos);
                }
            }
        }
    }

    /// What the call does, in a plan's words.
    pub fn describe(&self) -> String {
        match self {
            RuleCall::Create { rule } => format!("create at 0: {rule}"),
            RuleCall::Update { pos, rule, .. } => format!("update {pos}: {rule}"),
            RuleCall::Move { pos, moveto } => format!("move {pos} in front of {moveto}"),
            RuleCall::Delete { pos, rule } => format!("delete {pos}: {rule}"),
        }
    }
}

/// `moveto`: the rule leaves `pos` and goes in front of the rule that was
/// at `moveto`, or last when `moveto` is past the end.
fn move_rule<T>(list: &mut Vec<T>, pos: usize, moveto: usize) {
    if pos >= list.len() || moveto == pos {
        return;
    }
    let rule = list.remove(pos);
    let at = if moveto > pos { moveto - 1 } else { moveto };
    list.insert(at.min(list.len()), rule);
}

/// The calls that turn `live` (read with `digest`) into `desired`: rules
/// equal in both stay, changed ones are updated in place, the ones out of
/// order move, new ones are created and moved into place, the rest are
/// deleted — never more calls than deleting `live` and creating
/// `desired` (which is the answer when it is shorter).
pub fn sequence(live: &[Rule], desired: &[Rule], digest: &str) -> Vec<Call> {
    let calls = edit_calls(live, desired);
    let calls = if calls.len() > live.len() + desired.len() {
        recreate_calls(live, desired)
    } else {
        calls
    };
    with_checks(live, calls, digest)
}

/// Each call with the list it expects and its digest rule.
fn with_checks(live: &[Rule], calls: Vec<RuleCall>, digest: &str) -> Vec<Call> {
    let mut list = live.to_vec();
    let mut out = Vec::with_capacity(calls.len());
    for (i, call) in calls.into_iter().enumerate() {
        let check = match call {
            RuleCall::Create { .. } => Check::ReadBack,
            _ if i == 0 => Check::Digest(digest.to_string()),
            _ => Check::ReadBack,
        };
        let expect = list.clone();
        call.apply(&mut list);
        out.push(Call {
            call,
            expect,
            check,
        });
    }
    out
}

/// Delete every live rule (the last first) and create the desired ones
/// last to first, each landing in front of the one created before it.
fn recreate_calls(live: &[Rule], desired: &[Rule]) -> Vec<RuleCall> {
    let deletes = live
        .iter()
        .enumerate()
        .rev()
        .map(|(pos, rule)| RuleCall::Delete {
            pos,
            rule: rule.clone(),
        });
    let creates = desired
        .iter()
        .rev()
        .map(|rule| RuleCall::Create { rule: rule.clone() });
    deletes.chain(creates).collect()
}

/// Which live rule serves which desired one: equal rules first (each
/// desired rule takes the first equal live rule left); then, between two
/// equal rules that stay in order, the changed rules pair up in order as
/// updates in place; what is left pairs up in order too. Returns the pairs
/// (live index, desired index, equal).
fn pairs(live: &[Rule], desired: &[Rule]) -> Vec<(usize, usize, bool)> {
    let mut live_used = vec![false; live.len()];
    let mut desired_used = vec![false; desired.len()];
    let mut equal = Vec::new();
    for (j, want) in desired.iter().enumerate() {
        if let Some(i) = (0..live.len()).find(|&i| !live_used[i] && live[i] == *want) {
            live_used[i] = true;
            desired_used[j] = true;
            equal.push((i, j));
        }
    }
    equal.sort_unstable();
    let targets: Vec<usize> = equal.iter().map(|&(_, j)| j).collect();
    let in_order = longest_in_order(&targets);
    let mut fences: Vec<(usize, usize)> = equal
        .iter()
        .copied()
        .filter(|(_, j)| in_order.binary_search(j).is_ok())
        .collect();
    fences.push((live.len(), desired.len()));
    let mut out: Vec<(usize, usize, bool)> = equal.iter().map(|&(i, j)| (i, j, true)).collect();
    let (mut from_i, mut from_j) = (0, 0);
    for (to_i, to_j) in fences {
        let spare_live = (from_i..to_i)
            .filter(|&i| !live_used[i])
            .collect::<Vec<_>>();
        let spare_desired = (from_j..to_j)
            .filter(|&j| !desired_used[j])
            .collect::<Vec<_>>();
        for (i, j) in spare_live.into_iter().zip(spare_desired) {
            live_used[i] = true;
            desired_used[j] = true;
            out.push((i, j, false));
        }
        (from_i, from_j) = (to_i + 1, to_j + 1);
    }
    let spare_live = (0..live.len()).filter(|&i| !live_used[i]);
    let spare_desired = (0..desired.len()).filter(|&j| !desired_used[j]);
    out.extend(spare_live.zip(spare_desired).map(|(i, j)| (i, j, false)));
    out
}

/// The edit: deletes (last first), updates in place, then every rule not
/// on the longest run already in order is put in front of its successor,
/// last desired rule first (a new rule is created first, at the top).
fn edit_calls(live: &[Rule], desired: &[Rule]) -> Vec<RuleCall> {
    let pairs = pairs(live, desired);
    let mut calls = Vec::new();
    let mut target: Vec<Option<(usize, bool)>> = vec![None; live.len()];
    for &(i, j, equal) in &pairs {
        target[i] = Some((j, equal));
    }
    for (pos, rule) in live.iter().enumerate().rev() {
        if target[pos].is_none() {
            calls.push(RuleCall::Delete {
                pos,
                rule: rule.clone(),
            });
        }
    }
    // The list as the calls leave it, each rule by its desired index.
    let mut list: Vec<usize> = Vec::new();
    for (i, rule) in live.iter().enumerate() {
        let Some((j, equal)) = target[i] else {
            continue;
        };
        if !equal {
            calls.push(RuleCall::Update {
                pos: list.len(),
                was: Box::new(rule.clone()),
                rule: Box::new(desired[j].clone()),
            });
        }
        list.push(j);
    }
    let anchored = longest_in_order(&list);
    for j in (0..desired.len()).rev() {
        if anchored.contains(&j) {
            continue;
        }
        if !list.contains(&j) {
            calls.push(RuleCall::Create {
                rule: desired[j].clone(),
            });
            list.insert(0, j);
        }
        place(&mut list, j, &mut calls);
    }
    calls
}

/// Moves the rule of desired index `j` in front of `j + 1` (to the end
/// for the last), unless it is there already.
fn place(list: &mut Vec<usize>, j: usize, calls: &mut Vec<RuleCall>) {
    let at = |t: usize, list: &[usize]| list.iter().position(|&s| s == t);
    let Some(from) = at(j, list) else { return };
    let before = at(j + 1, list).unwrap_or(list.len());
    if from + 1 == before {
        return;
    }
    calls.push(RuleCall::Move {
        pos: from,
        moveto: before,
    });
    move_rule(list, from, before);
}

/// The values of the longest strictly increasing subsequence of `xs`
/// (patience sorting, O(n log n)).
fn longest_in_order(xs: &[usize]) -> Vec<usize> {
    // tails[k]: index into xs of the smallest tail of a run of length k+1.
    let mut tails: Vec<usize> = Vec::new();
    let mut prev: Vec<Option<usize>> = vec![None; xs.len()];
    for (i, &x) in xs.iter().enumerate() {
        let k = tails.partition_point(|&t| xs[t] < x);
        prev[i] = k.checked_sub(1).map(|p| tails[p]);
        if k == tails.len() {
            tails.push(i);
        } else {
            tails[k] = i;
        }
    }
    let mut out = Vec::with_capacity(tails.len());
    let mut cur = tails.last().copied();
    while let Some(i) = cur {
        out.push(xs[i]);
        cur = prev[i];
    }
    out.reverse();
    out
}

/// The list before and after, as rule lines for a plan: each line its
/// position and rule, `-` before a rule the change removes, `+` before one
/// it adds (rules compared as values, as many times as they occur).
pub fn render_change(before: &[Rule], after: &[Rule]) -> String {
    let marks = |from: &[Rule], other: &[Rule], sign: char| -> Vec<char> {
        let mut left: Vec<Option<&Rule>> = other.iter().map(Some).collect();
        from.iter()
            .map(|r| match left.iter_mut().find(|o| **o == Some(r)) {
                Some(o) => {
                    *o = None;
                    ' '
                }
                None => sign,
            })
            .collect()
    };
    let mut out = String::new();
    for (title, list, signs) in [
        ("before", before, marks(before, after, '-')),
        ("after", after, marks(after, before, '+')),
    ] {
        out.push_str(title);
        out.push_str(":\n");
        if list.is_empty() {
            out.push_str("    (no rules)\n");
        }
        for (pos, (rule, sign)) in list.iter().zip(signs).enumerate() {
            out.push_str(&format!("  {sign} {pos:>2} {rule}\n"));
        }
    }
    out
}
