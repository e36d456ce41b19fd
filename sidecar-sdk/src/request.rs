//! What a plugin is asked to do.

use crate::Error;
use crate::object::Object;

/// A `Reconcile` or `Finalize` request: the base object and the extensions
/// of the kinds this plugin declared for the chosen implementation.
#[derive(Clone, Debug)]
pub struct Request {
    implementation: String,
    object: Object,
    extensions: Vec<Object>,
}

impl Request {
    pub(crate) fn decode(
        implementation: String,
        object: &[u8],
        extensions: &[Vec<u8>],
    ) -> Result<Self, Error> {
        let object = Object::from_json(object, "the base object")?;
        let extensions = extensions
            .iter()
            .enumerate()
            .map(|(i, e)| Object::from_json(e, &format!("extension #{i}")))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            implementation,
            object,
            extensions,
        })
    }

    /// The implementation the operator chose (one of this plugin's offers).
    pub fn implementation(&self) -> &str {
        &self.implementation
    }

    /// The base object.
    pub fn object(&self) -> &Object {
        &self.object
    }

    /// The base object's name.
    pub fn name(&self) -> &str {
        self.object.name()
    }

    /// The base object's namespace.
    pub fn namespace(&self) -> &str {
        self.object.namespace()
    }

    /// The base object's spec, decoded into your type.
    ///
    /// # Errors
    /// [`Error::Decode`] when the spec does not fit `T`.
    pub fn spec<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        self.object.spec_as()
    }

    /// Every extension sent, in the order the base object references them.
    pub fn extensions(&self) -> &[Object] {
        &self.extensions
    }

    /// The first extension of `kind`, if one was sent.
    pub fn extension(&self, kind: &str) -> Option<&Object> {
        self.extensions.iter().find(|e| e.kind() == kind)
    }
}
