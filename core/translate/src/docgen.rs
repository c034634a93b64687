//! What is generated from the owned-key tables and the manifest types, and
//! checked in: the JSON Schema files (`docs/schema/*.json`), the owned-key
//! tables of `docs/resources/vm.md` and `lxc.md` (between
//! [`BEGIN`] and [`END`] markers) and the key lists `spec.extra` refuses
//! as owned (`core/model/src/extra/owned.rs`). `core/translate/tests/schema_gen.rs`
//! regenerates each and fails when the checked-in copy is stale
//! (`UPDATE=1` rewrites it), so a key added to a table reaches the schema,
//! the docs and `spec.extra`'s refusals without a second hand edit.
//!
//! This module does no I/O: it returns the files' text.

use serde_json::Value;

use proxops_model::extra::{self, GuestType};
use proxops_model::names::Kind;

use crate::drift::{OwnedKey, lxc_owned_keys, qemu_owned_keys};
use crate::schema;

/// The marker before a generated table in a docs page.
pub const BEGIN: &str = "<!-- generated: owned keys -->";
/// The marker after any generated text.
pub const END: &str = "<!-- end generated -->";

/// The marker before the generated text called `name`.
pub fn begin(name: &str) -> String {
    format!("<!-- generated: {name} -->")
}

/// Every schema file as `docs/schema/` holds it: one a kind
/// (`vm.json`) and the combined one (`proxops.json`).
pub fn schema_files() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = Kind::ALL
        .iter()
        .map(|&k| {
            (
                format!("{}.json", k.as_str().to_ascii_lowercase()),
                schema::render(&schema::kind_schema(k)),
            )
        })
        .collect();
    files.push((
        "proxops.json".to_owned(),
        schema::render(&schema::combined_schema()),
    ));
    files
}

/// The owned-key table of a guest kind's docs page (`VM` or `LXC`): one
/// line a row, in create-form order, with the manifest field, the PVE key,
/// what an absent field means and what a change costs a running guest.
pub fn owned_keys_table(kind: Kind) -> String {
    let keys = if kind.is_lxc() {
        lxc_owned_keys()
    } else {
        qemu_owned_keys()
    };
    let schema = schema::kind_schema(kind);
    let mut out = String::from("| field | PVE key | default | on change |\n|---|---|---|---|\n");
    for k in &keys {
        out.push_str(&table_line(k, &schema));
    }
    out
}

fn table_line(k: &OwnedKey, schema: &Value) -> String {
    let fields: Vec<String> = k.field.split(", ").map(|f| format!("`{f}`")).collect();
    let first = k.field.split(", ").next().unwrap_or(k.field);
    let attr =
        |name: &str| schema::field_attribute(schema, first, name).unwrap_or_else(|| "—".to_owned());
    let default = match k.doc {
        Some(d) => d.default.to_owned(),
        None => attr("x-default"),
    };
    let on_change = match (k.impact, k.doc.and_then(|d| d.impact_note)) {
        (Some(i), Some(note)) => format!("`{}`; {note}", i.as_str()),
        (Some(i), None) if attr("x-impact") == "anomaly" => {
            format!("**anomaly** (create-only; else `{}`)", i.as_str())
        }
        (Some(i), None) => format!("`{}`", i.as_str()),
        (None, _) => "depends on the change (see below)".to_owned(),
    };
    format!(
        "| {} | `{}` | {} | {} |\n",
        fields.join(", "),
        k.key,
        default.replace('|', "\\|"),
        on_change
    )
}

/// `doc` with the text between its [`BEGIN`] and [`END`] lines replaced by
/// `table`; `None` when it has no such markers.
pub fn splice(doc: &str, table: &str) -> Option<String> {
    splice_named(doc, "owned keys", &format!("\n{table}"))
}

/// `doc` with the text between every `begin(name)` and the [`END`] after
/// it replaced by `text` (inline: a list inside a sentence); `None` when
/// it has no such marker.
pub fn splice_named(doc: &str, name: &str, text: &str) -> Option<String> {
    let begin = begin(name);
    let mut out = String::new();
    let mut rest = doc;
    let mut found = false;
    while let Some(at) = rest.find(&begin) {
        let start = at + begin.len();
        let end = start + rest[start..].find(END)?;
        out.push_str(&rest[..start]);
        out.push_str(text);
        rest = &rest[end..];
        found = true;
    }
    out.push_str(rest);
    found.then_some(out)
}

/// The generated inline lists of the docs, by marker name: the keys
/// `spec.extra` refuses as structural and the keys it passes as vetted.
pub fn key_lists() -> Vec<(&'static str, String)> {
    let quoted = |keys: &[&str]| {
        keys.iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let structural = |guest| {
        let (names, prefixes) = extra::structural(guest);
        let (last, others) = prefixes.split_last().unwrap_or((&"", &[]));
        format!(
            "{}, and every key starting with {} or `{last}`",
            quoted(&names),
            quoted(others)
        )
    };
    vec![
        ("qemu structural keys", structural(GuestType::Qemu)),
        ("lxc structural keys", structural(GuestType::Lxc)),
        ("qemu vetted keys", quoted(&extra::vetted(GuestType::Qemu))),
        ("lxc vetted keys", quoted(&extra::vetted(GuestType::Lxc))),
    ]
}

/// `core/model/src/extra/owned.rs`: the PVE keys each guest kind's rows
/// own (a family's own key, such as `features`, too), which `spec.extra`
/// refuses as structural. The model keeps this copy so it needs no
/// translation.
pub fn owned_keys_source() -> String {
    let list = |keys: Vec<OwnedKey>| {
        let mut names: Vec<&str> = keys
            .iter()
            .map(|o| o.key)
            .filter(|k| k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
            .iter()
            .map(|n| format!("    \"{n}\",\n"))
            .collect::<String>()
    };
    format!(
        "//! The PVE keys the owned-key tables write for a guest, by name: every\n\
         //! one is structural in `spec.extra`. Generated from the tables by\n\
         //! `core/translate/tests/schema_gen.rs` (`UPDATE=1` rewrites it; do not edit), so\n\
         //! the model needs no translation.\n\
         \n\
         use super::GuestType;\n\
         \n\
         /// The plain keys of the qemu owned-key table, sorted.\n\
         pub const QEMU: &[&str] = &[\n{}];\n\
         \n\
         /// The plain keys of the LXC owned-key table, sorted.\n\
         pub const LXC: &[&str] = &[\n{}];\n\
         \n\
         /// The owned keys of `guest`'s table.\n\
         pub fn keys(guest: GuestType) -> &'static [&'static str] {{\n\
         \x20   match guest {{\n\
         \x20       GuestType::Qemu => QEMU,\n\
         \x20       GuestType::Lxc => LXC,\n\
         \x20   }}\n\
         }}\n",
        list(qemu_owned_keys()),
        list(lxc_owned_keys())
    )
}
