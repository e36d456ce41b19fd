//! What a plugin is asked to do.

use crate::Error;
use crate::object::Object;

/// A `Reconcile` or `Finalize` request: the base object, the extensions
/// of the kinds this plugin declared for the chosen implementation, and
/// the children the operator manages for it ([`Request::children`]).
#[derive(Clone, Debug)]
pub struct Request {
    implementation: String,
    object: Object,
    extensions: Vec<Object>,
    children: Vec<Object>,
}

impl Request {
    pub(crate) fn decode(
        implementation: String,
        object: &[u8],
        extensions: &[Vec<u8>],
        children: &[Vec<u8>],
    ) -> Result<Self, Error> {
        let object = Object::from_json(object, "the base object")?;
        let extensions = extensions
            .iter()
            .enumerate()
            .map(|(i, e)| Object::from_json(e, &format!("extension #{i}")))
            .collect::<Result<_, _>>()?;
        let children = children
            .iter()
            .enumerate()
            .map(|(i, c)| Object::from_json(c, &format!("child #{i}")))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            implementation,
            object,
            extensions,
            children,
        })
    }

    /// A request as the operator would send it: for a plugin's own unit
    /// tests, which then call its handlers directly, with no socket and no
    /// operator.
    ///
    /// ```
    /// use kplug_sidecar::{BoxError, Plugin, Request, Response};
    /// use serde_json::json;
    ///
    /// struct Hello;
    ///
    /// impl Plugin for Hello {
    ///     async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
    ///         Ok(Response::ok().status(json!({ "greeting": format!("hello, {}", request.name()) })))
    ///     }
    /// }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let request = Request::from_json(
    ///     "Hello",
    ///     json!({"apiVersion": "example.com/v1", "kind": "Greeting",
    ///            "metadata": {"name": "world", "namespace": "default"}, "spec": {}}),
    ///     [],
    /// )
    /// .unwrap();
    /// let response = Hello.reconcile(request).await.unwrap();
    /// assert_eq!(response.to_json()["outcome"], "OK");
    /// assert_eq!(response.to_json()["status"]["greeting"], "hello, world");
    /// # });
    /// ```
    ///
    /// # Errors
    /// [`Error::Decode`] when the object or an extension is not a JSON
    /// object.
    pub fn from_json(
        implementation: &str,
        object: serde_json::Value,
        extensions: impl IntoIterator<Item = serde_json::Value>,
    ) -> Result<Self, Error> {
        Ok(Self {
            implementation: implementation.to_owned(),
            object: Object::from_value(object, "Request::from_json: the base object")?,
            extensions: extensions
                .into_iter()
                .enumerate()
                .map(|(i, e)| Object::from_value(e, &format!("Request::from_json: extension #{i}")))
                .collect::<Result<_, _>>()?,
            children: Vec::new(),
        })
    }

    /// This request with `children` as the observed children, for a
    /// plugin's own tests (see [`Request::from_json`]).
    ///
    /// # Errors
    /// [`Error::Decode`] when a child is not a JSON object.
    pub fn with_children(
        mut self,
        children: impl IntoIterator<Item = serde_json::Value>,
    ) -> Result<Self, Error> {
        self.children = children
            .into_iter()
            .enumerate()
            .map(|(i, c)| Object::from_value(c, &format!("Request::with_children: child #{i}")))
            .collect::<Result<_, _>>()?;
        Ok(self)
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

    /// The children the operator manages for this base object on this
    /// plugin's behalf, as they are now (with their status, e.g. a
    /// Deployment's `readyReplicas`), including those being deleted. Empty
    /// when the plugin declares no child kinds.
    pub fn children(&self) -> &[Object] {
        &self.children
    }

    /// The observed child of `kind` named `name`, if it exists.
    pub fn child(&self, kind: &str, name: &str) -> Option<&Object> {
        self.children
            .iter()
            .find(|c| c.kind() == kind && c.name() == name)
    }
}
