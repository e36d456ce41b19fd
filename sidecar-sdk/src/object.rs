//! Kubernetes objects as plugins receive them.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::Error;

/// A Kubernetes object (the base object or an extension), decoded from the
/// JSON the operator sent. The whole object is in [`Object::raw`]; the
/// accessors cover what plugins use most.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    raw: Value,
}

impl Object {
    /// An object from its JSON, as the operator would send it (e.g. an
    /// extension for a plugin's own unit tests).
    ///
    /// # Errors
    /// [`Error::Decode`] when `raw` is not a JSON object.
    pub fn new(raw: Value) -> Result<Self, Error> {
        Self::from_value(raw, "the object")
    }

    /// `raw` as an object; `what` names it in the error.
    pub(crate) fn from_value(raw: Value, what: &str) -> Result<Self, Error> {
        if !raw.is_object() {
            let got = match raw {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                Value::Array(_) => "an array",
                Value::Object(_) => unreachable!(),
            };
            return Err(Error::Decode(format!(
                "{what} is {got}, not a JSON object: pass the whole Kubernetes object, e.g. \
                 json!({{\"apiVersion\": \"example.com/v1\", \"kind\": \"Greeting\", \
                 \"metadata\": {{\"name\": \"world\"}}, \"spec\": {{}}}})"
            )));
        }
        Ok(Self { raw })
    }

    pub(crate) fn from_json(bytes: &[u8], what: &str) -> Result<Self, Error> {
        let raw: Value = serde_json::from_slice(bytes)
            .map_err(|e| Error::Decode(format!("{what} is not valid JSON: {e}")))?;
        if !raw.is_object() {
            return Err(Error::Decode(format!("{what} is not a JSON object")));
        }
        Ok(Self { raw })
    }

    /// The whole object.
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    fn str_at(&self, pointer: &str) -> &str {
        self.raw
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `apiVersion`, e.g. `myorg.org/v1alpha1`.
    pub fn api_version(&self) -> &str {
        self.str_at("/apiVersion")
    }

    /// `kind`, e.g. `DatabaseTable`.
    pub fn kind(&self) -> &str {
        self.str_at("/kind")
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.str_at("/metadata/name")
    }

    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        self.str_at("/metadata/namespace")
    }

    /// `metadata.generation`.
    pub fn generation(&self) -> Option<i64> {
        self.raw
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
    }

    /// Whether `metadata.deletionTimestamp` is set.
    pub fn is_being_deleted(&self) -> bool {
        self.raw
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
    }

    /// `spec` as JSON (`null` when absent).
    pub fn spec(&self) -> &Value {
        self.raw.get("spec").unwrap_or(&Value::Null)
    }

    /// `spec` decoded into your own type.
    ///
    /// # Errors
    /// [`Error::Decode`] naming the object and what did not fit.
    pub fn spec_as<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_value(self.spec().clone())
            .map_err(|e| {
                Error::Decode(format!(
                    "the spec of {} {} does not fit this plugin: {e}; fix the spec (or have the CRD's schema refuse it)",
                    self.kind(),
                    self.name()
                ))
            })
    }

    /// A reference to this object, for statuses and events.
    pub fn object_ref(&self) -> kplug_proto::v1::ObjectRef {
        kplug_proto::v1::ObjectRef {
            api_version: self.api_version().to_owned(),
            kind: self.kind().to_owned(),
            namespace: self.namespace().to_owned(),
            name: self.name().to_owned(),
        }
    }
}
