//! `proxops schema [KIND]` and `proxops explain <kind>.<path>`: the
//! manifests' JSON Schema and one field's explanation, as core generates
//! them from the manifest types. They read no repository and no PVE.

use proxops_core::schema;

use crate::exit::{Exit, Failure};
use crate::out;

/// The schema of one kind, or the one covering every kind.
pub fn print(kind: Option<&str>) -> Result<Exit, Failure> {
    let value = match kind {
        None => schema::combined_schema(),
        Some(name) => match schema::kind_by_name(name) {
            Some(k) => schema::kind_schema(k),
            None => {
                return Err(Failure::input(format!(
                    "unknown kind {name:?}: use one of {} (see proxops schema --help)",
                    proxops_core::names::Kind::list()
                )));
            }
        },
    };
    out::print(&schema::render(&value))?;
    Ok(Exit::Ok)
}

/// One field's description, type, default, PVE key and impact.
pub fn explain(path: &str, recursive: bool) -> Result<Exit, Failure> {
    let text = schema::explain(path, recursive).map_err(|e| Failure::input(e.0))?;
    out::print(&text)?;
    Ok(Exit::Ok)
}
