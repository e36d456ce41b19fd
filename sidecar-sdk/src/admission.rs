//! Admission: what a plugin is asked when an object is created or changed
//! (`Validate`, `Default`), and how it answers.

use kplug_proto::limits;
use kplug_proto::v1;
use serde::Serialize;
use serde_json::Value;

use crate::Error;
use crate::object::Object;

/// Whether the object is being created or changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Created: there is no old object.
    Create,
    /// Changed: [`AdmissionRequest::old_object`] is the object as stored.
    Update,
}

/// A `Validate` or `Default` request: the object being admitted and, on
/// update, the object as it is stored now.
#[derive(Clone, Debug)]
pub struct AdmissionRequest {
    implementation: String,
    operation: Operation,
    object: Object,
    old_object: Option<Object>,
}

impl AdmissionRequest {
    /// Decodes a request as the operator sends it. An operation that is not
    /// CREATE or UPDATE, or an object that is not a JSON object, is an
    /// error the SDK answers with `INVALID_ARGUMENT`.
    pub(crate) fn decode(
        implementation: String,
        operation: i32,
        object: &[u8],
        old_object: &[u8],
    ) -> Result<Self, Error> {
        let operation = match v1::Operation::try_from(operation) {
            Ok(v1::Operation::Create) => Operation::Create,
            Ok(v1::Operation::Update) => Operation::Update,
            _ => {
                return Err(Error::Decode(format!(
                    "the admission request's operation {operation} is neither CREATE nor UPDATE"
                )));
            }
        };
        let object = Object::from_json(object, "the object")?;
        let old_object = if old_object.is_empty() {
            None
        } else {
            Some(Object::from_json(old_object, "the old object")?)
        };
        Ok(Self {
            implementation,
            operation,
            object,
            old_object,
        })
    }

    /// A request as the operator would send it, for a plugin's own unit
    /// tests (see [`crate::Request::from_json`]). `old_object` is `None`
    /// for [`Operation::Create`].
    ///
    /// # Errors
    /// [`Error::Decode`] when an object is not a JSON object.
    pub fn from_json(
        implementation: &str,
        operation: Operation,
        object: Value,
        old_object: Option<Value>,
    ) -> Result<Self, Error> {
        Ok(Self {
            implementation: implementation.to_owned(),
            operation,
            object: Object::from_value(object, "AdmissionRequest::from_json: the object")?,
            old_object: old_object
                .map(|o| Object::from_value(o, "AdmissionRequest::from_json: the old object"))
                .transpose()?,
        })
    }

    /// For a base object, the implementation it is (or would be) reconciled
    /// by; for an extension object, the implementation of this plugin's
    /// offer that declares its kind.
    pub fn implementation(&self) -> &str {
        &self.implementation
    }

    /// Create or update.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    /// The object being admitted (a base object or an extension: see
    /// [`Object::kind`]).
    pub fn object(&self) -> &Object {
        &self.object
    }

    /// On update, the object as it is stored now.
    pub fn old_object(&self) -> Option<&Object> {
        self.old_object.as_ref()
    }

    /// The object's spec, decoded into your type.
    ///
    /// # Errors
    /// [`Error::Decode`] when the spec does not fit `T`.
    pub fn spec<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        self.object.spec_as()
    }
}

/// A plugin's answer to `Validate`: allowed when it holds no errors.
///
/// ```
/// use kplug_sidecar::Validation;
/// let refused = Validation::allowed()
///     .error("spec.columns[1].type", "varchar2", "unknown column type; use one of text, integer, real, blob")
///     .warning("spec.comment is ignored by SQLite");
/// assert!(!refused.is_allowed());
/// ```
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct Validation {
    errors: Vec<v1::FieldError>,
    warnings: Vec<String>,
}

impl Validation {
    /// Allowed, so far: add errors to refuse.
    pub fn allowed() -> Self {
        Self::default()
    }

    /// Refuses the value at `path` (Kubernetes' notation, e.g.
    /// `spec.columns[1].type`; `""` for the object as a whole). `value` is
    /// sent as JSON text (a string keeps its quotes).
    pub fn error(mut self, path: &str, value: impl Serialize, message: impl Into<String>) -> Self {
        let value = serde_json::to_string(&value).unwrap_or_default();
        self.errors.push(v1::FieldError {
            path: path.to_owned(),
            value,
            message: message.into(),
        });
        self
    }

    /// Refuses the object for a field without a value to show (e.g. a
    /// required field that is missing).
    pub fn error_at(mut self, path: &str, message: impl Into<String>) -> Self {
        self.errors.push(v1::FieldError {
            path: path.to_owned(),
            value: String::new(),
            message: message.into(),
        });
        self
    }

    /// A warning shown to the client (kubectl prints it), allowed or not.
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// Whether no error was added.
    pub fn is_allowed(&self) -> bool {
        self.errors.is_empty()
    }

    /// The answer as it would be sent, as JSON, for a plugin's own tests:
    /// `allowed`, `errors` (`{path, value, message}`) and `warnings`.
    pub fn to_json(&self) -> Value {
        let r = self.clone().into_proto();
        serde_json::json!({
            "allowed": r.errors.is_empty(),
            "errors": r.errors.iter().map(|e| serde_json::json!({
                "path": e.path, "value": e.value, "message": e.message,
            })).collect::<Vec<_>>(),
            "warnings": r.warnings,
        })
    }

    /// Within the protocol's bounds: past [`limits::MAX_FIELD_ERRORS`], the
    /// last error kept says how many more there were (the object is refused
    /// either way, and the operator would refuse a longer list).
    pub(crate) fn into_proto(self) -> v1::ValidateResponse {
        let mut errors = self.errors;
        if errors.len() > limits::MAX_FIELD_ERRORS {
            let more = errors.len() - (limits::MAX_FIELD_ERRORS - 1);
            errors.truncate(limits::MAX_FIELD_ERRORS - 1);
            errors.push(v1::FieldError {
                path: String::new(),
                value: String::new(),
                message: format!("and {more} more errors"),
            });
        }
        for e in &mut errors {
            e.message = limits::truncate_message(&e.message);
            e.value = limits::truncate_message(&e.value);
        }
        v1::ValidateResponse {
            errors,
            warnings: bounded_warnings(self.warnings),
        }
    }
}

/// Warnings within the protocol's bounds: each cut to
/// [`limits::MAX_WARNING_CHARS`]; past [`limits::MAX_WARNINGS`], the last
/// one kept says how many more there were.
fn bounded_warnings(mut warnings: Vec<String>) -> Vec<String> {
    if warnings.len() > limits::MAX_WARNINGS {
        let more = warnings.len() - (limits::MAX_WARNINGS - 1);
        warnings.truncate(limits::MAX_WARNINGS - 1);
        warnings.push(format!("and {more} more warnings"));
    }
    warnings
        .into_iter()
        .map(|w| cut(&w, limits::MAX_WARNING_CHARS))
        .collect()
}

/// `text` cut to `max` characters, the last one an ellipsis when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

/// A plugin's answer to `Default`: JSON Patch operations (RFC 6902) on the
/// object, limited to `/spec`, `/metadata/labels` and
/// `/metadata/annotations`.
///
/// Paths are JSON Pointers (`/spec/storageEngine`; `~1` stands for `/` in a
/// key, as in `/metadata/labels/app.kubernetes.io~1name`). A path outside
/// those prefixes is a plugin bug: the answer becomes an error (so the
/// failure policy decides) whose message says which path, instead of a
/// patch the operator would refuse.
///
/// ```
/// use kplug_sidecar::Defaults;
/// let defaults = Defaults::none()
///     .add("/spec/storageEngine", "InnoDB")
///     .add("/metadata/labels/engine", "innodb");
/// assert_eq!(defaults.to_json()["patch"][0]["path"], "/spec/storageEngine");
/// ```
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct Defaults {
    operations: Vec<Value>,
    warnings: Vec<String>,
    problem: Option<String>,
}

impl Defaults {
    /// Nothing to default, so far.
    pub fn none() -> Self {
        Self::default()
    }

    /// Sets `value` at `path` (JSON Patch `add`: a new member, or the
    /// member replaced; its parent must exist, or be added first).
    pub fn add(self, path: &str, value: impl Serialize) -> Self {
        self.push("add", path, Some(value))
    }

    /// Replaces the value at `path`, which must exist (JSON Patch
    /// `replace`).
    pub fn replace(self, path: &str, value: impl Serialize) -> Self {
        self.push("replace", path, Some(value))
    }

    /// Removes the value at `path`, which must exist (JSON Patch `remove`).
    pub fn remove(self, path: &str) -> Self {
        self.push("remove", path, None::<()>)
    }

    /// A warning shown to the client (kubectl prints it).
    pub fn warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// Whether no operation was added.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    fn push(mut self, op: &str, path: &str, value: Option<impl Serialize>) -> Self {
        if !limits::default_patch_path_allowed(path) {
            self.problem.get_or_insert(format!(
                "a default may only change /spec, /metadata/labels and /metadata/annotations; {op} {path:?} is outside them"
            ));
            return self;
        }
        match patch_operation(op, path, value) {
            Ok(operation) => self.operations.push(operation),
            Err(problem) => {
                self.problem.get_or_insert(problem);
            }
        }
        self
    }

    /// The answer as it would be sent, as JSON, for a plugin's own tests:
    /// `patch` (the JSON Patch, an array) and `warnings`; a builder mistake
    /// (a path outside the allowed ones) shows as `error`, the message of
    /// the error the operator would get.
    pub fn to_json(&self) -> Value {
        match self.clone().into_proto() {
            Ok(r) => serde_json::json!({
                "patch": Value::Array(self.operations.clone()),
                "warnings": r.warnings,
            }),
            Err(error) => serde_json::json!({ "error": error }),
        }
    }

    /// The response, or the plugin bug that prevents it (a path outside the
    /// allowed ones, a patch over [`limits::MAX_PATCH_BYTES`]).
    pub(crate) fn into_proto(self) -> Result<v1::DefaultResponse, String> {
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
                "plugin bug: the defaults' JSON Patch is {} bytes; at most {} are accepted",
                patch.len(),
                limits::MAX_PATCH_BYTES
            ));
        }
        Ok(v1::DefaultResponse {
            patch,
            warnings: bounded_warnings(self.warnings),
        })
    }
}

/// One JSON Patch operation, `value` encoded (the builders of `Default`
/// and `Mutate` answers share it).
pub(crate) fn patch_operation(
    op: &str,
    path: &str,
    value: Option<impl Serialize>,
) -> Result<Value, String> {
    let mut operation = serde_json::json!({ "op": op, "path": path });
    if let Some(value) = value {
        operation["value"] = serde_json::to_value(value)
            .map_err(|e| format!("the value of {op} {path:?} cannot be encoded as JSON: {e}"))?;
    }
    Ok(operation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validation_errors_carry_json_values_and_are_bounded() {
        let v = Validation::allowed()
            .error("spec.columns[1].type", "varchar2", "unknown type")
            .error("spec.size", 3, "too small")
            .error_at("spec.name", "required");
        assert_eq!(
            v.to_json(),
            json!({"allowed": false, "warnings": [], "errors": [
                {"path": "spec.columns[1].type", "value": "\"varchar2\"", "message": "unknown type"},
                {"path": "spec.size", "value": "3", "message": "too small"},
                {"path": "spec.name", "value": "", "message": "required"},
            ]})
        );
        let mut many = Validation::allowed();
        for i in 0..100 {
            many = many.error(&format!("spec.x[{i}]"), i, "bad");
        }
        for i in 0..20 {
            many = many.warning(format!("w{i} {}", "x".repeat(300)));
        }
        let r = many.into_proto();
        assert_eq!(r.errors.len(), limits::MAX_FIELD_ERRORS);
        assert_eq!(r.errors.last().unwrap().message, "and 37 more errors");
        assert_eq!(r.warnings.len(), limits::MAX_WARNINGS);
        assert_eq!(r.warnings.last().unwrap(), "and 5 more warnings");
        assert_eq!(r.warnings[0].chars().count(), limits::MAX_WARNING_CHARS);
        assert!(Validation::allowed().warning("fine").is_allowed());
    }

    #[test]
    fn defaults_build_a_json_patch_within_the_allowed_paths() {
        let d = Defaults::none()
            .add("/spec/storageEngine", "InnoDB")
            .replace("/metadata/annotations/a", "b")
            .remove("/metadata/labels/old")
            .warning("defaulted storageEngine");
        let r = d.into_proto().unwrap();
        let patch: Value = serde_json::from_slice(&r.patch).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/spec/storageEngine", "value": "InnoDB"},
                {"op": "replace", "path": "/metadata/annotations/a", "value": "b"},
                {"op": "remove", "path": "/metadata/labels/old"},
            ])
        );
        assert_eq!(r.warnings, ["defaulted storageEngine"]);
        assert!(Defaults::none().into_proto().unwrap().patch.is_empty());
    }

    #[test]
    fn defaults_outside_the_allowed_paths_are_a_plugin_bug() {
        for path in ["/status/x", "/metadata/name", "/specx", "spec/x", ""] {
            let d = Defaults::none().add("/spec/a", 1).add(path, 2);
            let error = d.clone().into_proto().unwrap_err();
            assert!(
                error.starts_with("plugin bug: a default may only change"),
                "{error}"
            );
            assert!(error.contains(&format!("{path:?}")), "{error}");
            assert_eq!(d.to_json()["error"], error);
        }
        let huge = Defaults::none().add("/spec/blob", "x".repeat(limits::MAX_PATCH_BYTES));
        let error = huge.into_proto().unwrap_err();
        assert!(error.contains("at most 262144"), "{error}");
    }

    #[test]
    fn requests_decode_create_and_update() {
        let object = br#"{"apiVersion":"v1","kind":"K","metadata":{"name":"n"},"spec":{"a":1}}"#;
        let r = AdmissionRequest::decode("I".into(), v1::Operation::Create as i32, object, b"")
            .unwrap();
        assert_eq!(r.operation(), Operation::Create);
        assert!(r.old_object().is_none());
        assert_eq!(r.spec::<Value>().unwrap(), json!({"a": 1}));
        let r = AdmissionRequest::decode("I".into(), v1::Operation::Update as i32, object, object)
            .unwrap();
        assert_eq!(r.old_object().unwrap().name(), "n");
        let e = AdmissionRequest::decode("I".into(), 0, object, b"").unwrap_err();
        assert!(e.to_string().contains("neither CREATE nor UPDATE"), "{e}");
        assert!(AdmissionRequest::decode("I".into(), 1, b"not json", b"").is_err());
    }
}
