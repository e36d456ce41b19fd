//! The plugin: each call runs the manifest's command for it.

use std::path::Path;

use kplug_sidecar::{BoxError, Offer, Plugin, PluginInfo, Request, Response};
use serde_json::json;

use crate::answer;
use crate::command::{CallEnv, Finished, Runner};
use crate::manifest::Manifest;

/// A plugin whose calls run commands.
#[derive(Clone, Debug)]
pub struct Exec {
    reconcile: Runner,
    finalize: Option<Runner>,
}

impl Exec {
    /// The plugin for `manifest`, loaded from `path` (commands run in its
    /// directory).
    pub fn new(manifest: &Manifest, path: &Path) -> Self {
        let dir = Manifest::working_dir(path);
        Self {
            reconcile: Runner::new(manifest.reconcile.clone(), dir.clone()),
            finalize: manifest.finalize.clone().map(|spec| Runner::new(spec, dir)),
        }
    }

    /// Whether the manifest has a finalize command.
    pub fn finalizes(&self) -> bool {
        self.finalize.is_some()
    }

    async fn call(runner: &Runner, call: &str, request: &Request) -> Response {
        let stdin = json!({
            "call": call,
            "implementation": request.implementation(),
            "object": request.object().raw(),
            "extensions": request.extensions().iter().map(kplug_sidecar::Object::raw).collect::<Vec<_>>(),
        });
        let env = CallEnv {
            call,
            implementation: request.implementation(),
            namespace: request.namespace(),
            name: request.name(),
        };
        match runner.run(&env, stdin.to_string().into_bytes()).await {
            Ok(finished) => {
                // A command's stderr is its log: it goes to the container's.
                if let Finished::Exited { stderr_tail, .. } | Finished::TimedOut { stderr_tail, .. } =
                    &finished
                    && !stderr_tail.is_empty()
                {
                    tracing::info!(
                        command = runner.program(),
                        call,
                        object = format!("{}/{}", request.namespace(), request.name()),
                        "stderr: {stderr_tail}"
                    );
                }
                answer::response(runner.program(), request, finished)
            }
            Err(e) => Response::failed(format!(
                "kplug-exec cannot run {}: {e}; check the command in the manifest and that it is executable in this container",
                runner.program()
            )),
        }
    }
}

impl Plugin for Exec {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        Ok(Self::call(&self.reconcile, "reconcile", &request).await)
    }
}

/// [`Exec`] with a finalize command: a type of its own, because the SDK
/// advertises FINALIZE for a plugin type that implements
/// [`Plugin::finalize`].
#[derive(Clone, Debug)]
pub struct ExecWithFinalize(pub Exec);

impl Plugin for ExecWithFinalize {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        self.0.reconcile(request).await
    }

    async fn finalize(&self, request: Request) -> Result<Response, BoxError> {
        let runner = self
            .0
            .finalize
            .as_ref()
            .expect("built only with a finalize command");
        Ok(Exec::call(runner, "finalize", &request).await)
    }
}

/// The plugin's description for the operator, from the manifest.
pub fn info(manifest: &Manifest) -> PluginInfo {
    manifest.offers.iter().fold(
        PluginInfo::new(&manifest.name, &manifest.version).description(&manifest.description),
        |info, o| {
            let offer = o.extensions.iter().fold(
                Offer::new(&o.base.group, &o.base.kind, &o.implementation),
                |offer, e| offer.extension(&e.group, &e.kind),
            );
            info.offer(offer)
        },
    )
}
