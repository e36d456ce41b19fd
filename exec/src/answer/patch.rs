//! The JSON Patch a default or mutate command prints, read operation by
//! operation into the SDK's builders (see the [module docs](super)), so
//! that the paths are judged by the same rules as a Rust plugin's.

use serde::Deserialize;
use serde_json::Value;

/// The JSON a default or mutate command prints.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PatchAnswer {
    #[serde(default)]
    pub(super) patch: Vec<PatchOperation>,
    #[serde(default)]
    pub(super) warnings: Vec<String>,
}

/// One operation as printed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PatchOperation {
    op: String,
    path: String,
    #[serde(default)]
    value: Option<Value>,
}

/// One operation the SDK's builders take: JSON Patch's `move`, `copy` and
/// `test` are not among them (a patch built from the object's own values
/// says the same with `add`).
#[derive(Debug)]
pub(super) enum Operation {
    Add(String, Value),
    Replace(String, Value),
    Remove(String),
}

impl Operation {
    /// The JSON Pointer it changes.
    pub(super) fn path(&self) -> &str {
        match self {
            Self::Add(path, _) | Self::Replace(path, _) | Self::Remove(path) => path,
        }
    }
}

impl PatchAnswer {
    /// The operations, or what is wrong with one (`program` names the
    /// command in the message).
    pub(super) fn operations(self, program: &str) -> Result<Vec<Operation>, String> {
        self.patch
            .into_iter()
            .enumerate()
            .map(|(i, o)| match (o.op.as_str(), o.value) {
                ("add", Some(value)) => Ok(Operation::Add(o.path, value)),
                ("replace", Some(value)) => Ok(Operation::Replace(o.path, value)),
                ("remove", None) => Ok(Operation::Remove(o.path)),
                ("add" | "replace", None) => Err(format!(
                    "{program} answered: patch[{i}] ({} {:?}) has no value",
                    o.op, o.path
                )),
                ("remove", Some(_)) => Err(format!(
                    "{program} answered: patch[{i}] (remove {:?}) has a value; a remove takes none",
                    o.path
                )),
                (op, _) => Err(format!(
                    "{program} answered: patch[{i}] has op {op:?}; use \"add\", \"replace\" or \"remove\""
                )),
            })
            .collect()
    }
}
