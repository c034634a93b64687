//! The manifests' JSON Schema (draft 2020-12) and the field explanations
//! `proxops explain` prints, both read off the types the loader
//! deserialises: schemars reads the same serde attributes (renames,
//! defaults, unknown fields denied), the fields' doc comments are the
//! descriptions, and `x-pve-key`, `x-default`, `x-impact` and
//! `x-impact-note` on each field say what it writes to PVE.
//!
//! The schema catches what one document shows on its own: unknown fields,
//! types, allowed values, name and size patterns. Rules across documents
//! (references, vmid collisions, cycles, the cluster's node list and
//! `allow-extra-keys`) and rules between fields of one document stay the
//! loader's. This module does no I/O: it returns values.

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use proxops_model::manifest::{API_VERSION, ArtifactSpec, Document, LxcSpec, VmSpec};
use proxops_model::names::Kind;

/// The dialect every generated schema declares.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The schema of one kind's manifest document.
pub fn kind_schema(kind: Kind) -> Value {
    let mut g = generator();
    let doc = document(&mut g, kind);
    let mut root = Map::new();
    root.insert("$schema".into(), DIALECT.into());
    root.insert("title".into(), format!("ProxOps {kind} manifest").into());
    root.extend(doc);
    root.insert("$defs".into(), Value::Object(definitions(&g)));
    let mut schema = Value::Object(root);
    join_description_lines(&mut schema);
    schema
}

/// One schema for a manifest of any kind: `kind` picks the kind's schema.
pub fn combined_schema() -> Value {
    let mut g = generator();
    let docs: Vec<(Kind, Map<String, Value>)> = Kind::ALL
        .iter()
        .map(|&k| (k, document(&mut g, k)))
        .collect();
    let mut defs = definitions(&g);
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
    let dispatch: Vec<Value> = Kind::ALL
        .iter()
        .map(|k| {
            json!({
                "if": {"properties": {"kind": {"const": k.as_str()}}, "required": ["kind"]},
                "then": {"$ref": format!("#/$defs/{k}")}
            })
        })
        .collect();
    for (k, doc) in docs {
        defs.insert(k.as_str().into(), Value::Object(doc));
    }
    let mut schema = json!({
        "$schema": DIALECT,
        "title": "ProxOps manifest",
        "description": "A ProxOps manifest of any kind; `kind` selects the kind's schema.",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {"kind": {"enum": names}},
        "allOf": dispatch,
        "$defs": defs
    });
    join_description_lines(&mut schema);
    schema
}

/// A doc comment's line breaks are the source's, not the text's: an
/// editor's hover reflows a description, so it is one paragraph.
fn join_description_lines(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                match child {
                    Value::String(s) if k == "description" => *s = s.replace('\n', " "),
                    _ => join_description_lines(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(join_description_lines),
        _ => {}
    }
}

/// `schema` as written into the repository and printed by `proxops schema`:
/// pretty, with a final newline.
pub fn render(schema: &Value) -> String {
    // A Value always serialises: its keys are strings.
    let mut s = serde_json::to_string_pretty(schema).unwrap_or_default();
    s.push('\n');
    s
}

/// A kind named as a user would type it (`vm`, `TemplateVM`, `ctt`).
pub fn kind_by_name(name: &str) -> Option<Kind> {
    Kind::ALL
        .into_iter()
        .find(|k| k.as_str().eq_ignore_ascii_case(name) || k.dir() == name)
}

fn generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12().into_generator()
}

/// The definitions gathered so far, without the generic envelopes (each
/// kind gets its own, with `kind` fixed).
fn definitions(g: &SchemaGenerator) -> Map<String, Value> {
    let mut defs = g
        .definitions()
        .iter()
        .filter(|(name, _)| !name.starts_with("Document"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    owned_key_attributes(&mut defs);
    defs
}

/// `x-pve-key`, `x-default`, `x-impact` and `x-impact-note` of every
/// field a scalar row of the owned-key tables reads, from the row itself
/// (fields a row reads through its own functions say it in attributes).
fn owned_key_attributes(defs: &mut Map<String, Value>) {
    for (spec, keys) in [
        ("VmSpec", crate::drift::qemu_owned_keys()),
        ("LxcSpec", crate::drift::lxc_owned_keys()),
    ] {
        for k in keys {
            let (Some(doc), Some(impact)) = (k.doc, k.impact) else {
                continue;
            };
            let path = k.field.strip_prefix("spec.").unwrap_or(k.field);
            let Some(field) = property_mut(defs, spec, path) else {
                continue;
            };
            field.insert("x-pve-key".into(), k.key.into());
            field.insert("x-default".into(), doc.default.into());
            field.insert("x-impact".into(), impact.as_str().into());
            if let Some(note) = doc.impact_note {
                field.insert("x-impact-note".into(), note.into());
            }
        }
    }
}

/// The property at `path` (`options.onboot`) below the definition `def`,
/// through the references (and `null` alternatives) on the way.
fn property_mut<'a>(
    defs: &'a mut Map<String, Value>,
    def: &str,
    path: &str,
) -> Option<&'a mut Map<String, Value>> {
    let (first, rest) = match path.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (path, None),
    };
    let property = defs.get(def)?.get("properties")?.get(first)?;
    match rest {
        None => defs
            .get_mut(def)?
            .get_mut("properties")?
            .get_mut(first)?
            .as_object_mut(),
        Some(rest) => {
            let inner = reference(property)?;
            property_mut(defs, &inner, rest)
        }
    }
}

/// The definition a field refers to, directly or as the non-null
/// alternative of an optional field.
fn reference(field: &Value) -> Option<String> {
    let direct = field.get("$ref").and_then(Value::as_str);
    let optional = || {
        field
            .get("anyOf")?
            .as_array()?
            .iter()
            .find_map(|v| v.get("$ref").and_then(Value::as_str))
    };
    direct
        .or_else(optional)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .map(str::to_owned)
}

/// The envelope of `kind`'s documents: `apiVersion` and `kind` fixed, and
/// for a file kind the file name extensions PVE accepts for it.
fn document(g: &mut SchemaGenerator, kind: Kind) -> Map<String, Value> {
    use proxops_model::firewall as fw;
    let reference = match kind {
        Kind::VM | Kind::TemplateVM => g.subschema_for::<Document<VmSpec>>(),
        Kind::LXC | Kind::TemplateCT => g.subschema_for::<Document<LxcSpec>>(),
        Kind::ISO | Kind::CTTemplate | Kind::DiskImage => {
            g.subschema_for::<Document<ArtifactSpec>>()
        }
        Kind::Pool => g.subschema_for::<Document<crate::cluster::spec::PoolSpec>>(),
        Kind::BackupJob => g.subschema_for::<Document<crate::cluster::spec::BackupJobSpec>>(),
        Kind::HAResource => g.subschema_for::<Document<crate::cluster::spec::HaResourceSpec>>(),
        Kind::HARule => g.subschema_for::<Document<crate::cluster::spec::HaRuleSpec>>(),
        Kind::ReplicationJob => {
            g.subschema_for::<Document<crate::cluster::spec::ReplicationJobSpec>>()
        }
        Kind::FirewallAlias => g.subschema_for::<Document<fw::AliasSpec>>(),
        Kind::FirewallIPSet => g.subschema_for::<Document<fw::IpSetSpec>>(),
        Kind::SecurityGroup => g.subschema_for::<Document<fw::SecurityGroupSpec>>(),
        Kind::ClusterFirewall => g.subschema_for::<Document<fw::ClusterFirewallSpec>>(),
    };
    let name = reference
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .unwrap_or_default()
        .to_owned();
    let mut doc = match g.definitions().get(&name) {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    doc.insert("description".into(), kind_description(kind).into());
    if let Some(Value::Object(props)) = doc.get_mut("properties") {
        props.insert(
            "apiVersion".into(),
            json!({"description": "Always `proxops/v1alpha1`.", "const": API_VERSION}),
        );
        props.insert(
            "kind".into(),
            json!({"description": "The kind; it must match the kind directory the file lives under.", "const": kind.as_str()}),
        );
        if kind.is_artifact()
            && let Some(Value::Object(spec)) = props.get_mut("spec")
        {
            let mut own = Map::new();
            own.insert(
                "filename".into(),
                json!({"pattern": extension_pattern(kind)}),
            );
            if kind != Kind::ISO {
                // PVE decompresses downloads of ISO files only.
                own.insert("compression".into(), Value::Bool(false));
            }
            spec.insert("properties".into(), Value::Object(own));
        }
    }
    doc
}

fn kind_description(kind: Kind) -> &'static str {
    match kind {
        Kind::VM => "A QEMU virtual machine (docs/resources/vm.md).",
        Kind::TemplateVM => {
            "A QEMU VM template, the source of clone-backed VMs; the VM spec (docs/resources/templatevm.md)."
        }
        Kind::LXC => "A Linux container (docs/resources/lxc.md).",
        Kind::TemplateCT => {
            "A container marked as a template; the LXC spec (docs/resources/templatect.md)."
        }
        Kind::ISO => "An ISO file PVE downloads into a storage (docs/resources/iso.md).",
        Kind::CTTemplate => {
            "A container OS archive PVE downloads into a storage (docs/resources/cttemplate.md)."
        }
        Kind::DiskImage => {
            "A disk image PVE downloads into a storage, for a VM disk to import (docs/resources/diskimage.md)."
        }
        Kind::Pool => {
            "A resource pool; guests join it with their spec.pool (docs/resources/pool.md)."
        }
        Kind::BackupJob => "A scheduled backup job (docs/resources/backupjob.md).",
        Kind::HAResource => "A guest managed by the HA manager (docs/resources/haresource.md).",
        Kind::HARule => {
            "A PVE 9 HA rule: node or resource affinity of HA resources (docs/resources/harule.md)."
        }
        Kind::ReplicationJob => {
            "A storage replication job of one guest to one node (docs/resources/replicationjob.md)."
        }
        Kind::FirewallAlias => {
            "A cluster firewall alias: a name for an address or network (docs/resources/firewallalias.md)."
        }
        Kind::FirewallIPSet => {
            "A cluster firewall IP set: named addresses and networks rules refer to (docs/resources/firewallipset.md)."
        }
        Kind::SecurityGroup => {
            "A firewall security group: a rule list other rule lists include (docs/resources/securitygroup.md)."
        }
        Kind::ClusterFirewall => {
            "The cluster's firewall options and rule list, one per cluster (docs/resources/clusterfirewall.md)."
        }
    }
}

/// The loader compares extensions ignoring case; a JSON Schema pattern
/// has no flag for that, so each letter is a class of both cases.
fn extension_pattern(kind: Kind) -> String {
    let alternatives: Vec<String> = proxops_model::manifest::artifact_extensions(kind)
        .iter()
        .map(|e| {
            e.chars()
                .map(|c| match c {
                    '.' => r"\.".to_owned(),
                    c if c.is_ascii_alphabetic() => {
                        format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
                    }
                    c => c.to_string(),
                })
                .collect()
        })
        .collect();
    format!(r"^.+({})$", alternatives.join("|"))
}

// ------------------------------------------------------------------ explain

/// Why `explain` found nothing at a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ExplainError(pub String);

/// What `proxops explain <kind>.<path>` prints: the field's description,
/// type, default, PVE key and impact on a running guest, all read from the
/// kind's schema; then its fields (their children too, `recursive`), each
/// with its type. A wrong kind or field gets the did-you-mean `validate`
/// gives ([`proxops_model::suggest`]).
pub fn explain(query: &str, recursive: bool) -> Result<String, ExplainError> {
    let (kind_text, path) = query.split_once('.').unwrap_or((query, ""));
    let kind = kind_by_name(kind_text).ok_or_else(|| {
        let names: Vec<String> = Kind::ALL
            .iter()
            .map(|k| k.as_str().to_ascii_lowercase())
            .collect();
        let near =
            proxops_model::suggest::did_you_mean(kind_text, names.iter().map(String::as_str));
        ExplainError(format!(
            "unknown kind {kind_text:?}{}: use one of {}",
            near.map(|n| format!(" ({n})")).unwrap_or_default(),
            names.join(", ")
        ))
    })?;
    let schema = kind_schema(kind);
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let segments: Vec<String> = path
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|s| s.split('[').next().unwrap_or(s).to_owned())
        .collect();
    let mut node = schema.clone();
    let mut walked: Vec<String> = Vec::new();
    let mut rest = segments.as_slice();
    while let Some((seg, tail)) = rest.split_first() {
        let container = container_of(&node, &defs);
        if let Some(child) = container.get("properties").and_then(|p| p.get(seg)) {
            node = child.clone();
            walked.push(seg.clone());
            rest = tail;
        } else if container
            .get("additionalProperties")
            .is_some_and(Value::is_object)
        {
            // A map key (`spec.extra.keyboard`): the rest of the path is the
            // key, and the map's own description covers it.
            walked.push(rest.join("."));
            rest = &[];
        } else {
            return Err(no_field(kind, &walked, seg));
        }
    }
    let mut out = describe(kind, &walked.join("."), &node, &defs);
    let mut fields = String::new();
    field_list(&mut fields, &node, &defs, 1, recursive);
    if !fields.is_empty() {
        out.push_str("fields:\n");
        out.push_str(&fields);
    }
    Ok(out)
}

/// No field `seg` below `walked`: with `validate`'s hint for the same
/// mistake in a manifest (`spec.cores` → `did you mean spec.cpu.cores?`).
fn no_field(kind: Kind, walked: &[String], seg: &str) -> ExplainError {
    let written = [walked, &[seg.to_owned()]].concat().join(".");
    let prefix = format!("{}.", kind.as_str().to_ascii_lowercase());
    let known: Vec<String> = field_paths(kind)
        .iter()
        .filter_map(|p| p.strip_prefix(&prefix).map(str::to_owned))
        .collect();
    let hint = proxops_model::suggest::field_hint(&written, seg, &known);
    ExplainError(format!(
        "{kind} has no field {written:?}{}",
        hint.map(|h| format!("; {h}")).unwrap_or_default()
    ))
}

/// The text of attribute `name` (`x-default`) of the field at `path`
/// (`spec.cpu.limit`) in a kind's schema.
pub fn field_attribute(schema: &Value, path: &str, name: &str) -> Option<String> {
    let defs = schema.get("$defs")?;
    let mut node = schema.clone();
    for seg in path.split('.') {
        let container = container_of(&node, defs);
        node = container.get("properties")?.get(seg)?.clone();
    }
    node.get(name).and_then(Value::as_str).map(str::to_owned)
}

/// Where a field's own fields are: the field, or a list's items.
fn container_of(node: &Value, defs: &Value) -> Value {
    let here = resolve(node, defs);
    match here.get("type").and_then(Value::as_str) {
        Some("array") => resolve(here.get("items").unwrap_or(&Value::Null), defs),
        _ => here,
    }
}

/// The fields of `node`, one a line with its type, `depth` levels in;
/// their own fields below each when `recursive`.
fn field_list(out: &mut String, node: &Value, defs: &Value, depth: usize, recursive: bool) {
    let container = container_of(node, defs);
    let Some(Value::Object(props)) = container.get("properties") else {
        return;
    };
    let width = props.keys().map(String::len).max().unwrap_or(0);
    for (name, child) in props {
        let field = resolve(child, defs);
        let ty = match field.get("const") {
            _ if child == &Value::Bool(false) => "not allowed".to_owned(),
            Some(Value::String(c)) => format!("always {c}"),
            _ => type_text(&field, defs),
        };
        out.push_str(&format!("{}{name:<width$}  {ty}\n", "  ".repeat(depth)));
        if recursive && depth < 16 {
            field_list(out, child, defs, depth + 1, true);
        }
    }
}

/// Every field path of `kind`, as `explain` takes them (`vm.spec.memory`).
pub fn field_paths(kind: Kind) -> Vec<String> {
    let schema = kind_schema(kind);
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let mut out = Vec::new();
    collect_paths(
        &schema,
        &defs,
        &kind.as_str().to_ascii_lowercase(),
        &mut out,
        0,
    );
    out
}

fn collect_paths(node: &Value, defs: &Value, prefix: &str, out: &mut Vec<String>, depth: usize) {
    if depth > 16 {
        return;
    }
    let here = resolve(node, defs);
    let container = match here.get("type").and_then(Value::as_str) {
        Some("array") => resolve(here.get("items").unwrap_or(&Value::Null), defs),
        _ => here,
    };
    if let Some(Value::Object(props)) = container.get("properties") {
        for (name, child) in props {
            let path = format!("{prefix}.{name}");
            out.push(path.clone());
            collect_paths(child, defs, &path, out, depth + 1);
        }
    }
}

/// A field's schema with `$ref` followed (its own keywords win) and an
/// optional field's `null` alternative dropped.
fn resolve(node: &Value, defs: &Value) -> Value {
    let mut node = node.clone();
    for _ in 0..8 {
        if let Some(alternatives) = node.get("anyOf").and_then(Value::as_array) {
            let real: Vec<&Value> = alternatives
                .iter()
                .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if let [only] = real.as_slice() {
                let mut merged = (*only).clone();
                if let (Value::Object(m), Value::Object(outer)) = (&mut merged, &node) {
                    for (k, v) in outer {
                        if k != "anyOf" {
                            m.insert(k.clone(), v.clone());
                        }
                    }
                }
                node = merged;
                continue;
            }
        }
        let Some(name) = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .map(str::to_owned)
        else {
            break;
        };
        let mut target = defs.get(&name).cloned().unwrap_or(Value::Null);
        if let (Value::Object(t), Value::Object(outer)) = (&mut target, &node) {
            for (k, v) in outer {
                match (k.as_str(), t.get_mut(k), v) {
                    ("$ref", ..) => {}
                    // A kind's own rules for some fields (an artifact's file
                    // name extensions): field by field over the shared ones.
                    ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                        for (field, rule) in theirs {
                            match (mine.get_mut(field), rule) {
                                (Some(Value::Object(m)), Value::Object(r)) => {
                                    m.extend(r.iter().map(|(a, b)| (a.clone(), b.clone())));
                                }
                                _ => {
                                    mine.insert(field.clone(), rule.clone());
                                }
                            }
                        }
                    }
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
            t.insert("x-type-name".into(), name.into());
        }
        node = target;
    }
    node
}

fn describe(kind: Kind, path: &str, node: &Value, defs: &Value) -> String {
    if node == &Value::Bool(false) {
        return format!("{kind} {path}\n  Not allowed in {kind} manifests.\n");
    }
    let field = resolve(node, defs);
    let text = |key: &str| field.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut out = format!("{kind} {path}\n");
    if let Some(d) = node.get("description").and_then(Value::as_str) {
        out.push_str(&indent(d));
    } else if let Some(d) = text("description") {
        out.push_str(&indent(&d));
    }
    out.push_str(&format!("type:     {}\n", type_text(&field, defs)));
    if let Some(format) = scalar_format(&field, defs) {
        out.push_str(&hanging("format:   ", &format));
    }
    if let Some(values) = field.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        out.push_str(&format!("values:   {}\n", values.join(", ")));
    }
    if let Some(p) = text("pattern") {
        out.push_str(&format!("pattern:  {p}\n"));
    }
    if let Some(d) = text("x-default") {
        out.push_str(&format!("default:  {d}\n"));
    }
    if let Some(k) = text("x-pve-key") {
        out.push_str(&format!("PVE key:  {k}\n"));
    }
    if let Some(i) = text("x-impact") {
        let mut line = i.clone();
        if kind.is_guest() {
            line.push_str(" on a running guest");
        }
        if let Some(n) = text("x-impact-note") {
            line.push_str(&format!("; {n}"));
        }
        if kind.is_template() {
            line.push_str("; a template never runs, so every change is applied live");
        }
        out.push_str(&hanging("impact:   ", &line));
    }
    out
}

/// What a named scalar type accepts (`Quantity`, `Vmid`, `NodeName`, …):
/// its definition's description.
fn scalar_format(field: &Value, defs: &Value) -> Option<String> {
    let name = field.get("x-type-name").and_then(Value::as_str)?;
    if field.get("properties").is_some() {
        return None;
    }
    defs.get(name)?
        .get("description")?
        .as_str()
        .map(str::to_owned)
}

/// A short type: `integer`, `string (Quantity)`, `list of VmDisk`, …
fn type_text(field: &Value, defs: &Value) -> String {
    let name = field.get("x-type-name").and_then(Value::as_str);
    let base = match field.get("type") {
        Some(Value::String(t)) if t == "array" => {
            let items = resolve(field.get("items").unwrap_or(&Value::Null), defs);
            format!("list of {}", type_text(&items, defs))
        }
        Some(Value::String(t)) if t == "object" && field.get("properties").is_some() => {
            "object".to_owned()
        }
        Some(Value::String(t)) if t == "object" => "map of string to string".to_owned(),
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => match field.get("oneOf").and_then(Value::as_array) {
            Some(alts) => alts
                .iter()
                .filter_map(|a| a.get("type").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" or "),
            None => "any".to_owned(),
        },
    };
    match name {
        Some(n) => format!("{base} ({n})"),
        None => base,
    }
}

/// `text` wrapped at 78 columns, two spaces in.
fn indent(text: &str) -> String {
    wrap(text, "  ", "  ")
}

/// `label` then `text` wrapped at 78 columns, later lines under the text.
fn hanging(label: &str, text: &str) -> String {
    wrap(text, label, &" ".repeat(label.len()))
}

fn wrap(text: &str, first: &str, next: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_owned();
    // No word on the line yet: a word wider than the page still goes on it.
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + word.chars().count() + 1 > 78 {
            out.push_str(line.trim_end());
            out.push('\n');
            line = next.to_owned();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    if !empty {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn field(schema: &Value, path: &str) -> Value {
        let defs = schema.get("$defs").cloned().unwrap();
        let mut node = schema.clone();
        for seg in path.split('.') {
            let here = resolve(&node, &defs);
            let container = if here.get("type").and_then(Value::as_str) == Some("array") {
                resolve(here.get("items").unwrap(), &defs)
            } else {
                here
            };
            node = container
                .get("properties")
                .and_then(|p| p.get(seg))
                .unwrap_or_else(|| panic!("no {path}"))
                .clone();
        }
        resolve(&node, &defs)
    }

    /// The owned-key tables that drive create, drift and adoption say which
    /// PVE key each field writes and what a change costs; the schema says
    /// the same for every scalar key.
    #[test]
    fn pve_keys_and_impacts_agree_with_the_owned_key_tables() {
        // A create-only key: the table's impact is never reached, a
        // difference is an anomaly for a person.
        let refused = ["spec.options.unprivileged"];
        for (kind, keys) in [
            (Kind::VM, crate::drift::qemu_owned_keys()),
            (Kind::LXC, crate::drift::lxc_owned_keys()),
        ] {
            let schema = kind_schema(kind);
            for k in keys {
                let Some(impact) = k.impact else { continue };
                let f = field(&schema, k.field);
                assert_eq!(
                    f.get("x-pve-key").and_then(Value::as_str),
                    Some(k.key),
                    "{kind} {}",
                    k.field
                );
                let want = if refused.contains(&k.field) {
                    "anomaly"
                } else {
                    impact.as_str()
                };
                assert_eq!(
                    f.get("x-impact").and_then(Value::as_str),
                    Some(want),
                    "{kind} {}",
                    k.field
                );
            }
        }
    }

    #[test]
    fn each_kind_fixes_its_kind_and_api_version() {
        for kind in Kind::ALL {
            let s = kind_schema(kind);
            assert_eq!(s["properties"]["kind"]["const"], kind.as_str());
            assert_eq!(s["properties"]["apiVersion"]["const"], API_VERSION);
            assert_eq!(s["additionalProperties"], false);
        }
    }

    #[test]
    fn the_combined_schema_dispatches_on_kind() {
        let s = combined_schema();
        let all = s["allOf"].as_array().unwrap();
        assert_eq!(all.len(), Kind::ALL.len());
        for (rule, kind) in all.iter().zip(Kind::ALL) {
            assert_eq!(rule["if"]["properties"]["kind"]["const"], kind.as_str());
            assert!(s["$defs"].get(kind.as_str()).is_some());
        }
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(render(&combined_schema()), render(&combined_schema()));
    }

    #[test]
    fn an_unknown_field_names_the_nearest_path() {
        let e = explain("vm.spec.memroy", false).unwrap_err();
        assert!(e.0.contains("did you mean spec.memory?"), "{e}");
        let e = explain("vn.spec.memory", false).unwrap_err();
        assert!(e.0.contains("did you mean \"vm\""), "{e}");
    }

    #[test]
    fn explain_gives_the_hint_validate_gives_for_the_same_mistake() {
        // validate: `spec.cores` in a VM manifest is `spec.cpu.cores`.
        let yaml = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {name: a}\nspec: {node: pve1, vmid: 100, memory: 1GiB, cores: 2}\n";
        let validate = proxops_model::yaml::deserialize_document::<
            proxops_model::manifest::Document<proxops_model::manifest::VmSpec>,
        >(yaml, 0)
        .err()
        .and_then(|e| e.hint)
        .unwrap_or_default();
        assert_eq!(validate, "did you mean spec.cpu.cores?");
        let e = explain("vm.spec.cores", false).unwrap_err();
        assert!(e.0.ends_with(&format!("; {validate}")), "{e}");
    }

    #[test]
    fn explain_lists_a_fields_children_and_with_recursive_theirs() {
        let flat = explain("vm.spec", false).unwrap();
        assert!(flat.contains("fields:\n"), "{flat}");
        assert!(flat.contains("\n  cpu "), "{flat}");
        assert!(!flat.contains("\n    cores "), "{flat}");
        let deep = explain("vm.spec", true).unwrap();
        assert!(deep.contains("\n  cpu "), "{deep}");
        assert!(deep.contains("\n    cores "), "{deep}");
        // A leaf has no fields.
        assert!(!explain("vm.spec.memory", true).unwrap().contains("fields:"));
    }

    #[test]
    fn explain_reads_through_lists_and_maps() {
        let t = explain("vm.spec.disks.size", false).unwrap();
        assert!(t.contains("PVE key:  the volume's size"), "{t}");
        let t = explain("vm.spec.disks[].interface", false).unwrap();
        assert!(t.contains("scsi<index>"), "{t}");
        let t = explain("lxc.spec.extra.timezone", false).unwrap();
        assert!(t.contains("impact:   reboot"), "{t}");
    }
}
