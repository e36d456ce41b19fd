//! `KIND/NAME` on the command line, as kubectl spells it: the kind, its
//! plural or singular, with or without `.group`, in any case.

use kube::api::{Api, ApiResource, DynamicObject};
use kube::discovery::{Discovery, Scope};

use crate::Error;

/// An object named on the command line.
pub(crate) struct Target {
    /// Its kind.
    pub(crate) resource: ApiResource,
    /// Its name.
    pub(crate) name: String,
    /// Its namespace.
    pub(crate) namespace: String,
}

impl Target {
    /// Resolves `KIND/NAME` with API discovery, in `namespace` (default: the
    /// kubeconfig context's).
    ///
    /// # Errors
    /// A malformed argument, or a kind the API server does not serve.
    pub(crate) async fn resolve(
        client: &kube::Client,
        arg: &str,
        namespace: Option<&str>,
    ) -> Result<Self, Error> {
        let (kind, name) = arg
            .split_once('/')
            .filter(|(k, n)| !k.is_empty() && !n.is_empty())
            .ok_or_else(|| format!("{arg}: expected KIND/NAME, e.g. databasetable/users"))?;
        let (kind, group) = kind
            .split_once('.')
            .map_or((kind, None), |(k, g)| (k, Some(g)));
        let kind = kind.to_ascii_lowercase();
        let discovery = Discovery::new(client.clone())
            .run()
            .await
            .map_err(|e| format!("API discovery: {e}"))?;
        let found = discovery
            .groups()
            .filter(|g| group.is_none_or(|group| g.name().eq_ignore_ascii_case(group)))
            .flat_map(|g| g.recommended_resources())
            .find(|(ar, _)| {
                ar.kind.to_ascii_lowercase() == kind
                    || ar.plural == kind
                    || ar.plural.trim_end_matches('s') == kind
            });
        let Some((resource, caps)) = found else {
            return Err(format!(
                "the API server serves no kind {kind}{}: check the spelling (kubectl api-resources lists them)",
                group.map(|g| format!(" in group {g}")).unwrap_or_default()
            )
            .into());
        };
        if caps.scope != Scope::Namespaced {
            return Err(format!(
                "{} is cluster-scoped; kplug manages namespaced kinds",
                resource.kind
            )
            .into());
        }
        Ok(Self {
            resource,
            name: name.to_owned(),
            namespace: namespace
                .map_or_else(|| client.default_namespace().to_owned(), str::to_owned),
        })
    }

    /// Reads the object.
    ///
    /// # Errors
    /// When it does not exist or cannot be read, naming it.
    pub(crate) async fn get(&self, client: &kube::Client) -> Result<DynamicObject, Error> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &self.namespace, &self.resource);
        let mut obj = api.get(&self.name).await.map_err(|e| match e {
            kube::Error::Api(status) if status.code == 404 => format!(
                "{} not found (kubectl get {} -n {} lists them)",
                self.display(),
                self.resource.plural,
                self.namespace
            ),
            kube::Error::Api(status) => format!(
                "reading {}: the API server answered {} {}: {}",
                self.display(),
                status.code,
                status.reason,
                status.message
            ),
            other => format!("reading {}: {other}", self.display()),
        })?;
        // A get of a custom resource carries apiVersion and kind; make sure.
        obj.types.get_or_insert_with(|| kube::api::TypeMeta {
            api_version: self.resource.api_version.clone(),
            kind: self.resource.kind.clone(),
        });
        Ok(obj)
    }

    /// `Kind namespace/name`.
    pub(crate) fn display(&self) -> String {
        format!("{} {}/{}", self.resource.kind, self.namespace, self.name)
    }
}

/// The string at JSON `pointer` in `value`, if there is one.
pub(crate) fn text(value: &serde_json::Value, pointer: &str) -> Option<String> {
    value
        .pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}
