//! Lifecycle mutation: a plugin that patches the children other plugins
//! desire before the operator applies them (`Mutate`, as CNPG-I's backup
//! plugins add a sidecar and a volume to the Pods an operator creates).

use kplug_proto::limits;
use kplug_proto::v1;
use serde::Serialize;
use serde_json::Value;

use crate::Error;
use crate::object::Object;

/// A `Mutate` request: the object about to be applied, as it is so far.
#[derive(Clone, Debug)]
pub struct MutateCall {
    implementation: String,
    object: Object,
    live: Option<Object>,
    base: Option<Object>,
}

impl MutateCall {
    /// Decodes a request as the operator sends it; an object that is not
    /// a JSON object is answered `INVALID_ARGUMENT`.
    pub(crate) fn decode(r: &v1::MutateRequest) -> Result<Self, Error> {
        let optional = |bytes: &[u8], what: &str| {
            (!bytes.is_empty())
                .then(|| Object::from_json(bytes, what))
                .transpose()
        };
        Ok(Self {
            implementation: r.implementation.clone(),
            object: Object::from_json(&r.object, "the object")?,
            live: optional(&r.live, "the live object")?,
            base: optional(&r.base, "the base object")?,
        })
    }

    /// A request as the operator would send it, for a plugin's own unit
    /// tests.
    ///
    /// # Errors
    /// [`Error::Decode`] when an object is not a JSON object.
    pub fn from_json(
        implementation: &str,
        object: Value,
        live: Option<Value>,
        base: Option<Value>,
    ) -> Result<Self, Error> {
        let optional = |value: Option<Value>, what: &str| {
            value.map(|v| Object::from_value(v, what)).transpose()
        };
        Ok(Self {
            implementation: implementation.to_owned(),
            object: Object::from_value(object, "MutateCall::from_json: the object")?,
            live: optional(live, "MutateCall::from_json: the live object")?,
            base: optional(base, "MutateCall::from_json: the base object")?,
        })
    }

    /// The object about to be applied: what the plugin that desires it
    /// answered, with kplug's labels and owner, and the patches of the
    /// mutators before this one.
    pub fn object(&self) -> &Object {
        &self.object
    }

    /// The object as it is now; `None` when it does not exist yet.
    pub fn live(&self) -> Option<&Object> {
        self.live.as_ref()
    }

    /// The base object the child is for; `None` for an embedding
    /// operator's own object.
    pub fn base(&self) -> Option<&Object> {
        self.base.as_ref()
    }

    /// The implementation that desires the object; empty for an embedding
    /// operator's own object.
    pub fn implementation(&self) -> &str {
        &self.implementation
    }
}

/// The answer to `Mutate`: a JSON Patch against [`MutateCall::object`],
/// built operation by operation, limited to `/spec` and single labels and
/// annotations (never a `kplug.io/` one). It must be deterministic: the
/// same call, the same patch (the operator judges drift by the mutated
/// object, and the conformance kit calls twice and compares).
///
/// ```
/// use kplug_sidecar::Mutation;
/// use serde_json::json;
/// let mutation = Mutation::none()
///     .add("/spec/template/spec/volumes/-", json!({"name": "backup", "emptyDir": {}}))
///     .add("/metadata/annotations/backup.example~1enabled", "true");
/// assert_eq!(mutation.to_json()["patch"][1]["op"], "add");
/// ```
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct Mutation {
    operations: Vec<Value>,
    warnings: Vec<String>,
    problem: Option<String>,
}

impl Mutation {
    /// No change, so far.
    pub fn none() -> Self {
        Self::default()
    }

    /// Sets `value` at `path` (JSON Patch `add`; `-` appends to a list).
    pub fn add(self, path: &str, value: impl Serialize) -> Self {
        self.push("add", path, Some(value))
    }

    /// Replaces the value at `path`, which must exist.
    pub fn replace(self, path: &str, value: impl Serialize) -> Self {
        self.push("replace", path, Some(value))
    }

    /// Removes the value at `path`, which must exist.
    pub fn remove(self, path: &str) -> Self {
        self.push("remove", path, None::<()>)
    }

    /// A warning for humans, recorded on the base object.
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    fn push(mut self, op: &str, path: &str, value: Option<impl Serialize>) -> Self {
        if let Some(problem) = path_problem(path) {
            self.problem
                .get_or_insert(format!("{problem}; {op} {path:?} is outside them"));
            return self;
        }
        match crate::admission::patch_operation(op, path, value) {
            Ok(operation) => self.operations.push(operation),
            Err(problem) => {
                self.problem.get_or_insert(problem);
            }
        }
        self
    }

    /// The answer as it would be sent, as JSON, for a plugin's own tests:
    /// `patch` and `warnings`, or `error` for a builder mistake.
    pub fn to_json(&self) -> Value {
        match self.clone().into_proto() {
            Ok(r) => serde_json::json!({
                "patch": Value::Array(self.operations.clone()),
                "warnings": r.warnings,
            }),
            Err(error) => serde_json::json!({ "error": error }),
        }
    }

    /// The response, or the plugin bug that prevents it.
    pub(crate) fn into_proto(self) -> Result<v1::MutateResponse, String> {
        if let Some(problem) = self.problem {
            return Err(format!("plugin bug: {problem}"));
        }
        let patch = if self.operations.is_empty() {
            Vec::new()
        } else {
            Value::Array(self.operations).to_string().into_bytes()
        };
        if patch.len() > limits::MAX_PATCH_BYTES {
            return Err(format!(
                "plugin bug: the mutation's JSON Patch is {} bytes; at most {} are accepted",
                patch.len(),
                limits::MAX_PATCH_BYTES
            ));
        }
        let mut warnings = self.warnings;
        warnings.truncate(limits::MAX_WARNINGS);
        Ok(v1::MutateResponse { patch, warnings })
    }
}

/// Why a mutation may not touch `path`, as the operator judges it
/// (`kplug_proto::limits::mutation_path_problem`), in the words every SDK
/// uses.
fn path_problem(path: &str) -> Option<&'static str> {
    limits::mutation_path_problem(path).map(|_| {
        "a mutation may only change /spec and single labels and annotations, not kplug.io/ ones"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_outside_the_spec_and_single_foreign_labels_are_a_plugin_bug() {
        for path in [
            "/status/x",
            "/metadata/labels",
            "/metadata/annotations/kplug.io~1intent-hash",
            "/metadata/name",
        ] {
            let error = Mutation::none().add(path, 1).into_proto().unwrap_err();
            assert!(
                error.starts_with("plugin bug: a mutation may only change"),
                "{path}: {error}"
            );
        }
        let ok = Mutation::none()
            .add("/spec/replicas", 2)
            .add("/metadata/labels/backup", "yes")
            .warning("added a sidecar")
            .into_proto()
            .unwrap();
        let patch: Value = serde_json::from_slice(&ok.patch).unwrap();
        assert_eq!(
            patch[0],
            json!({"op": "add", "path": "/spec/replicas", "value": 2})
        );
        assert_eq!(ok.warnings, ["added a sidecar"]);
        assert!(Mutation::none().into_proto().unwrap().patch.is_empty());
    }
}
