//! The checks at admission: the reconcile's own, each at its field.

use database_table_model::{ColumnType, SpecError, TableSpec, validate};
use kplug_sidecar::Validation;
use serde_json::Value;

/// The field errors of a `DatabaseTable` spec (as JSON, as submitted):
/// every column of an unknown type, then the first other problem the
/// reconcile would refuse the spec for, each at its field.
pub fn field_errors(name: &str, spec: &Value) -> Validation {
    let mut verdict = Validation::allowed();
    let columns = spec["columns"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    // Every unknown type at once: the reconcile's check stops at the first.
    for (i, column) in columns.iter().enumerate() {
        let type_ = column["type"].as_str().unwrap_or_default();
        if ColumnType::parse(type_).is_none() {
            let error = SpecError::UnknownType {
                column: column["name"].as_str().unwrap_or_default().to_owned(),
                type_: type_.to_owned(),
            };
            verdict = verdict.error(
                &format!("spec.columns[{i}].type"),
                &column["type"],
                error.to_string(),
            );
        }
    }
    if !verdict.is_allowed() {
        return verdict;
    }
    // The schema (the CRD) has already checked the shape; a spec that
    // does not decode is left to it.
    let Ok(spec) = serde_json::from_value::<TableSpec>(spec.clone()) else {
        return verdict;
    };
    // A name still to be generated (generateName) is not checked here.
    let name = if name.is_empty() { "generated" } else { name };
    let Err(error) = validate(name, &spec) else {
        return verdict;
    };
    at_its_field(verdict, &spec, &error)
}

/// `verdict` with `error`, a problem of `spec` other than an unknown type,
/// at its field.
fn at_its_field(verdict: Validation, spec: &TableSpec, error: &SpecError) -> Validation {
    let column_at = |wanted: &str, nth: usize| {
        spec.columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name == wanted)
            .nth(nth)
            .map_or(0, |(i, _)| i)
    };
    match error {
        SpecError::BadName {
            what: "table",
            name,
        } => verdict.error("metadata.name", name, error.to_string()),
        SpecError::BadName { name, .. } => verdict.error(
            &format!("spec.columns[{}].name", column_at(name, 0)),
            name,
            error.to_string(),
        ),
        SpecError::Duplicate(name) => verdict.error(
            &format!("spec.columns[{}].name", column_at(name, 1)),
            name,
            error.to_string(),
        ),
        SpecError::NoColumns | SpecError::UnknownType { .. } => {
            verdict.error_at("spec.columns", error.to_string())
        }
    }
}
