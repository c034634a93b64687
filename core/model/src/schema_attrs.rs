//! The attribute helpers manifests' `#[schemars(...)]` attributes name:
//! enumerations, the `proxops/` annotations, the ownership tag, the
//! `spec.extra` keys. Schema *generation* is the translate crate's.

use std::collections::BTreeSet;

use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::extra::GuestType;
use crate::names::{
    ANNOTATION_ADOPTED_ID, ANNOTATION_ADOPTED_VMID, ANNOTATION_DEPENDS_ON, ANNOTATION_PRUNE,
    ANNOTATION_RESTART_POLICY, ANNOTATION_SHUTDOWN_TIMEOUT,
};

// ------------------------------------------------- field schemas and transforms

/// `metadata.annotations`: the `proxops/` keys ProxOps knows, each with
/// the grammar the loader checks; any other `proxops/` key is refused.
pub fn annotations(_: &mut SchemaGenerator) -> Schema {
    const KINDS: &str = "VM|TemplateVM|LXC|TemplateCT|ISO|CTTemplate|DiskImage|Pool|BackupJob|HAResource|HARule|ReplicationJob";
    let item = format!(r"({KINDS})\s*:\s*[a-z0-9]+(-[a-z0-9]+)*");
    let known = [
        ANNOTATION_DEPENDS_ON,
        ANNOTATION_PRUNE,
        ANNOTATION_ADOPTED_VMID,
        ANNOTATION_ADOPTED_ID,
        ANNOTATION_RESTART_POLICY,
        ANNOTATION_SHUTDOWN_TIMEOUT,
    ];
    let mut properties = Map::new();
    properties.insert(
        ANNOTATION_DEPENDS_ON.into(),
        json!({
            "description": "Extra ordering: `Kind:name` entries separated by commas, e.g. \"ISO:debian-iso,VM:db\".",
            "type": "string",
            "pattern": format!(r"^[\s,]*({item}\s*(,[\s,]*|$))*$")
        }),
    );
    properties.insert(
        ANNOTATION_PRUNE.into(),
        json!({
            "description": "`disabled`: never prune this object (`enabled` is the default).",
            "type": "string",
            "pattern": r"^\s*(disabled|enabled)\s*$"
        }),
    );
    properties.insert(
        ANNOTATION_RESTART_POLICY.into(),
        json!({
            "description": "`never` or `reboot`: this guest's restart policy, over the cluster's `restart-policy`.",
            "type": "string",
            "pattern": r"^\s*(never|reboot)\s*$"
        }),
    );
    properties.insert(
        ANNOTATION_SHUTDOWN_TIMEOUT.into(),
        json!({
            "description": "How long a graceful shutdown of this guest may take (`30s`, `5m`; at least `1s`), over the cluster's `shutdown-timeout`.",
            "type": "string",
            "pattern": r"^\s*(0|([0-9]+(ms|s|m|h))+)\s*$"
        }),
    );
    properties.insert(
        ANNOTATION_ADOPTED_VMID.into(),
        json!({
            "description": "Written by `adopt`: the vmid of the guest this manifest was adopted from.",
            "type": "string",
            "pattern": r"^\s*[0-9]+\s*$"
        }),
    );
    properties.insert(
        ANNOTATION_ADOPTED_ID.into(),
        json!({
            "description": "Written by `adopt` on a Pool or BackupJob: the PVE id of the object this manifest was adopted from.",
            "type": "string"
        }),
    );
    schemars::json_schema!({
        "type": "object",
        "properties": properties,
        "additionalProperties": {"type": "string"},
        "propertyNames": {"anyOf": [{"not": {"pattern": "^proxops/"}}, {"enum": known}]}
    })
}

/// A string field whose values are `values` (an absent one may be `null`,
/// as the loader reads it).
pub fn one_of(values: &'static [&'static str]) -> impl FnMut(&mut Schema) {
    move |schema: &mut Schema| {
        let mut allowed: Vec<Value> = values.iter().map(|&v| v.into()).collect();
        let nullable = match schema.get("type") {
            Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
            _ => false,
        };
        if nullable {
            allowed.push(Value::Null);
        }
        schema.insert("enum".into(), allowed.into());
    }
}

/// A list of strings whose items are `values`.
pub fn items_one_of(values: &'static [&'static str]) -> impl FnMut(&mut Schema) {
    move |schema: &mut Schema| {
        if let Some(Value::Object(items)) = schema.get_mut("items") {
            items.insert("enum".into(), values.to_vec().into());
        }
    }
}

/// `tags`: the ownership tag is ProxOps' to add, in any case.
pub fn not_ownership_tag(schema: &mut Schema) {
    let pattern: String = crate::names::OWNERSHIP_TAG
        .chars()
        .map(|c| format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase()))
        .collect();
    if let Some(Value::Object(items)) = schema.get_mut("items") {
        items.insert("not".into(), json!({"pattern": format!("^{pattern}$")}));
    }
}

/// An LXC NIC: PVE's `gw` is read as `gateway` (`#[serde(alias)]`, which
/// the generator does not see), so an editor accepts either, not both.
pub fn gw_alias(schema: &mut Schema) {
    let Some(Value::Object(props)) = schema.get_mut("properties") else {
        return;
    };
    let Some(Value::Object(mut gw)) = props.get("gateway").cloned() else {
        return;
    };
    gw.insert(
        "description".into(),
        "PVE's spelling of `gateway`, read as it; not both.".into(),
    );
    props.insert("gw".into(), Value::Object(gw));
    schema.insert("not".into(), json!({"required": ["gateway", "gw"]}));
}

/// `spec.extra` of a VM: the keys no cluster may let through.
pub fn qemu_extra_keys(schema: &mut Schema) {
    extra_keys(schema, GuestType::Qemu);
}

/// `spec.extra` of a container: the keys no cluster may let through.
pub fn lxc_extra_keys(schema: &mut Schema) {
    extra_keys(schema, GuestType::Lxc);
}

/// Keys that are never allowed (structural keys and API control
/// parameters) are refused by name; keys a cluster's `allow-extra-keys`
/// can let through are left to the loader, which knows the cluster.
fn extra_keys(schema: &mut Schema, guest: GuestType) {
    let (names, prefixes) = crate::extra::never_allowed(guest);
    let names: BTreeSet<&str> = names.into_iter().collect();
    let prefixes = prefixes.join("|");
    // The loader reads any YAML scalar into the value's text (`balloon:
    // 1024` is sent as "1024"), and PVE values are often numbers.
    schema.insert(
        "additionalProperties".into(),
        json!({"type": ["string", "number", "boolean"]}),
    );
    schema.insert(
        "propertyNames".into(),
        json!({
            "pattern": "^[A-Za-z0-9._-]+$",
            "not": {"anyOf": [
                {"enum": names},
                {"pattern": format!("^({prefixes})")}
            ]}
        }),
    );
}
