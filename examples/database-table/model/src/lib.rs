//! The `DatabaseTable` example's model, shared by its Rust plugins:
//! the spec, the portable column types, and the plan that brings an
//! existing table to the spec.
//!
//! # Column types
//!
//! | type | meaning |
//! |---|---|
//! | `int32` | 32-bit signed integer |
//! | `int64` | 64-bit signed integer |
//! | `uint64` | 64-bit unsigned integer |
//! | `string` | text of any length |
//! | `bool` | true/false |
//! | `float64` | IEEE double |
//! | `timestamp` | date and time |
//!
//! Each plugin maps them to its database's types (see their READMEs). An
//! unknown type fails the whole spec before anything is changed.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

/// The `spec` of a `DatabaseTable`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TableSpec {
    /// Which server (the plugin's own configuration maps it to a connection).
    pub server_name: String,
    /// The columns, in order.
    pub columns: Vec<ColumnSpec>,
    /// What happens to the table when the resource is deleted.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// One column of the spec.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ColumnSpec {
    /// Column name.
    pub name: String,
    /// Column type, one of [`ColumnType::ALL`].
    #[serde(rename = "type")]
    pub type_: String,
}

/// `spec.deletionPolicy`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum DeletionPolicy {
    /// Keep the table when the resource goes (the default: data is precious).
    #[default]
    Retain,
    /// Drop the table when the resource goes.
    Delete,
}

/// The portable column types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ColumnType {
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `uint64`.
    Uint64,
    /// `string`.
    String,
    /// `bool`.
    Bool,
    /// `float64`.
    Float64,
    /// `timestamp`.
    Timestamp,
}

impl ColumnType {
    /// Every type, with its name in specs.
    pub const ALL: [(&'static str, ColumnType); 7] = [
        ("int32", Self::Int32),
        ("int64", Self::Int64),
        ("uint64", Self::Uint64),
        ("string", Self::String),
        ("bool", Self::Bool),
        ("float64", Self::Float64),
        ("timestamp", Self::Timestamp),
    ];

    /// Parses a type name from a spec.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// The name used in specs.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("?", |(n, _)| n)
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A spec that cannot be applied. Nothing has been changed when this is
/// returned.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpecError {
    /// A column has a type outside [`ColumnType::ALL`].
    #[error(
        "column {column:?} has unknown type {type_:?}; use one of: int32, int64, uint64, string, bool, float64, timestamp"
    )]
    UnknownType {
        /// The column.
        column: String,
        /// The type given.
        type_: String,
    },
    /// A name that is not a safe SQL identifier.
    #[error(
        "{what} {name:?} is not a valid identifier: use lowercase letters, digits and '_', starting with a letter or '_', at most 63 characters"
    )]
    BadName {
        /// What it names.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// The same column twice.
    #[error("column {0:?} appears more than once")]
    Duplicate(String),
    /// No columns.
    #[error("a table needs at least one column")]
    NoColumns,
}

/// A validated table: name and typed columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Table name.
    pub name: String,
    /// Columns, in spec order.
    pub columns: Vec<(String, ColumnType)>,
}

/// Whether `name` is safe to use as an identifier in every database here
/// (it is also quoted, but a strict rule keeps names portable).
pub fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Validates a spec for the table `name` (the resource's name, with `-`
/// turned into `_`).
///
/// # Errors
/// The first problem found; nothing is changed anywhere.
pub fn validate(name: &str, spec: &TableSpec) -> Result<Table, SpecError> {
    let table = name.replace('-', "_");
    if !is_identifier(&table) {
        return Err(SpecError::BadName {
            what: "table",
            name: table,
        });
    }
    if spec.columns.is_empty() {
        return Err(SpecError::NoColumns);
    }
    let mut columns = Vec::with_capacity(spec.columns.len());
    for c in &spec.columns {
        if !is_identifier(&c.name) {
            return Err(SpecError::BadName {
                what: "column",
                name: c.name.clone(),
            });
        }
        if columns.iter().any(|(n, _)| n == &c.name) {
            return Err(SpecError::Duplicate(c.name.clone()));
        }
        let type_ = ColumnType::parse(&c.type_).ok_or_else(|| SpecError::UnknownType {
            column: c.name.clone(),
            type_: c.type_.clone(),
        })?;
        columns.push((c.name.clone(), type_));
    }
    Ok(Table {
        name: table,
        columns,
    })
}

/// What must change to bring an existing table to the spec.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Columns to add, in spec order.
    pub add: Vec<(String, ColumnType)>,
    /// Columns to drop.
    pub drop: Vec<String>,
    /// Columns whose type must change: (name, from, to). `from` is the
    /// database's own type name.
    pub retype: Vec<(String, String, ColumnType)>,
}

impl Plan {
    /// Whether nothing needs to change.
    pub fn is_empty(&self) -> bool {
        self.add.is_empty() && self.drop.is_empty() && self.retype.is_empty()
    }

    /// A one-line summary, e.g. `added 1 (email), dropped 1 (legacy)`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        let names = |v: Vec<&str>| v.join(", ");
        if !self.add.is_empty() {
            parts.push(format!(
                "added {} ({})",
                self.add.len(),
                names(self.add.iter().map(|(n, _)| n.as_str()).collect())
            ));
        }
        if !self.drop.is_empty() {
            parts.push(format!(
                "dropped {} ({})",
                self.drop.len(),
                names(self.drop.iter().map(String::as_str).collect())
            ));
        }
        if !self.retype.is_empty() {
            parts.push(format!(
                "retyped {} ({})",
                self.retype.len(),
                names(self.retype.iter().map(|(n, _, _)| n.as_str()).collect())
            ));
        }
        if parts.is_empty() {
            "no changes".into()
        } else {
            parts.join(", ")
        }
    }
}

/// Compares the existing columns (name → the database's type name) with the
/// desired table. `matches(db_type, wanted)` says whether a database type is
/// already the wanted portable type.
pub fn plan(
    existing: &BTreeMap<String, String>,
    desired: &Table,
    matches: impl Fn(&str, ColumnType) -> bool,
) -> Plan {
    let mut plan = Plan::default();
    for (name, type_) in &desired.columns {
        match existing.get(name) {
            None => plan.add.push((name.clone(), *type_)),
            Some(current) if !matches(current, *type_) => {
                plan.retype.push((name.clone(), current.clone(), *type_))
            }
            Some(_) => {}
        }
    }
    for name in existing.keys() {
        if !desired.columns.iter().any(|(n, _)| n == name) {
            plan.drop.push(name.clone());
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(columns: &[(&str, &str)]) -> TableSpec {
        TableSpec {
            server_name: "s".into(),
            columns: columns
                .iter()
                .map(|(n, t)| ColumnSpec {
                    name: (*n).into(),
                    type_: (*t).into(),
                })
                .collect(),
            deletion_policy: DeletionPolicy::Retain,
        }
    }

    #[test]
    fn validates_types_and_names() {
        let t = validate(
            "user-accounts",
            &spec(&[("id", "uint64"), ("name", "string")]),
        )
        .unwrap();
        assert_eq!(t.name, "user_accounts");
        assert_eq!(t.columns[0].1, ColumnType::Uint64);
        assert_eq!(
            validate("users", &spec(&[("id", "uint64"), ("x", "varchar")])),
            Err(SpecError::UnknownType {
                column: "x".into(),
                type_: "varchar".into()
            })
        );
        assert!(matches!(
            validate("users", &spec(&[("Robert'); DROP", "string")])),
            Err(SpecError::BadName { .. })
        ));
        assert!(matches!(
            validate("users", &spec(&[("a", "bool"), ("a", "bool")])),
            Err(SpecError::Duplicate(_))
        ));
        assert_eq!(validate("users", &spec(&[])), Err(SpecError::NoColumns));
    }

    #[test]
    fn the_error_lists_the_allowed_types() {
        let err = validate("t", &spec(&[("x", "money")]))
            .unwrap_err()
            .to_string();
        for (name, _) in ColumnType::ALL {
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn plans_add_drop_retype() {
        let existing: BTreeMap<String, String> =
            [("id", "BIGINT"), ("name", "INTEGER"), ("legacy", "TEXT")]
                .iter()
                .map(|(a, b)| ((*a).into(), (*b).into()))
                .collect();
        let desired = validate(
            "t",
            &spec(&[("id", "int64"), ("name", "string"), ("email", "string")]),
        )
        .unwrap();
        let map = |db: &str, t: ColumnType| {
            matches!(
                (db, t),
                ("BIGINT", ColumnType::Int64) | ("TEXT", ColumnType::String)
            )
        };
        let p = plan(&existing, &desired, map);
        assert_eq!(p.add, vec![("email".into(), ColumnType::String)]);
        assert_eq!(p.drop, vec!["legacy".to_owned()]);
        assert_eq!(
            p.retype,
            vec![("name".into(), "INTEGER".into(), ColumnType::String)]
        );
        assert_eq!(
            p.summary(),
            "added 1 (email), dropped 1 (legacy), retyped 1 (name)"
        );
    }

    #[test]
    fn an_up_to_date_table_needs_nothing() {
        let existing: BTreeMap<String, String> = [("id".to_owned(), "BIGINT".to_owned())].into();
        let desired = validate("t", &spec(&[("id", "int64")])).unwrap();
        assert!(
            plan(&existing, &desired, |db, t| db == "BIGINT"
                && t == ColumnType::Int64)
            .is_empty()
        );
    }

    #[test]
    fn deletion_policy_defaults_to_retain() {
        let s: TableSpec =
            serde_json::from_value(serde_json::json!({"serverName": "a", "columns": []})).unwrap();
        assert_eq!(s.deletion_policy, DeletionPolicy::Retain);
    }
}
