//! The plugin: each call runs the manifest's command for it.
//!
//! The SDK advertises a capability (FINALIZE, VALIDATE, DEFAULT, HOOKS,
//! MUTATE) for a plugin type that implements its method, so the plugin served is
//! [`Exec`] wrapped in one layer per command the manifest has:
//! [`serve`] picks the layers, and each layer forwards the other methods
//! to the one it wraps, unchanged, so that what is not in the manifest is
//! not advertised.

mod info;
mod layers;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kplug_sidecar::proto::v1::Outcome;
use kplug_sidecar::{
    AdmissionRequest, BoxError, Defaults, HookCall, MutateCall, Mutation, Object, Operation,
    Plugin, Request, Response, Validation,
};
use serde_json::{Value, json};

pub use info::info;
pub use layers::serve;

use crate::answer;
use crate::command::{CallEnv, Finished, Runner};
use crate::manifest::{self, Manifest};

/// A plugin whose calls run commands. On its own it reconciles; the layers
/// [`serve`] adds call its other commands.
#[derive(Clone, Debug)]
pub struct Exec(Arc<Commands>);

#[derive(Debug)]
struct Commands {
    reconcile: Runner,
    finalize: Option<Runner>,
    validate: Option<Runner>,
    default: Option<Runner>,
    hooks: BTreeMap<String, (Runner, kplug_sidecar::Phase)>,
    mutate: Option<Runner>,
}

impl Exec {
    /// The plugin for `manifest`, loaded from `path` (commands run in its
    /// directory).
    pub fn new(manifest: &Manifest, path: &Path) -> Self {
        let dir = Manifest::working_dir(path);
        let runner = |spec: manifest::CommandSpec| Runner::new(spec, dir.clone());
        Self(Arc::new(Commands {
            reconcile: runner(manifest.reconcile.clone()),
            finalize: manifest.finalize.clone().map(runner),
            validate: manifest.validate.as_ref().map(|s| runner(s.command_spec())),
            default: manifest.default.as_ref().map(|s| runner(s.command_spec())),
            hooks: manifest
                .hooks
                .iter()
                .map(|h| (h.name.clone(), (runner(h.command_spec()), h.phase)))
                .collect(),
            mutate: manifest.mutate.as_ref().map(|s| runner(s.command_spec())),
        }))
    }

    /// Runs `runner` with `stdin` and `env`; the stderr it wrote is logged
    /// (a command's stderr is its log). `Err` when it could not be started.
    async fn run(runner: &Runner, env: &CallEnv<'_>, stdin: &Value) -> Result<Finished, String> {
        match runner.run(env, stdin.to_string().into_bytes()).await {
            Ok(finished) => {
                if let Finished::Exited { stderr_tail, .. } | Finished::TimedOut { stderr_tail, .. } =
                    &finished
                    && !stderr_tail.is_empty()
                {
                    tracing::info!(
                        command = runner.program(),
                        call = env.call,
                        hook = env.hook.map(|(hook, _)| hook),
                        object = format!("{}/{}", env.namespace, env.name),
                        "stderr: {stderr_tail}"
                    );
                }
                Ok(finished)
            }
            Err(e) => Err(format!(
                "kplug-exec cannot run {}: {e}; check the command in the manifest and that it is executable in this container",
                runner.program()
            )),
        }
    }

    /// Reconcile or Finalize.
    async fn call(runner: &Runner, call: &str, request: &Request) -> Response {
        let stdin = json!({
            "call": call,
            "implementation": request.implementation(),
            "object": request.object().raw(),
            "extensions": extensions(request),
            "children": request.children().iter().map(Object::raw).collect::<Vec<_>>(),
        });
        let env = CallEnv {
            call,
            implementation: request.implementation(),
            namespace: request.namespace(),
            name: request.name(),
            hook: None,
        };
        match Self::run(runner, &env, &stdin).await {
            Ok(finished) => answer::response(runner.program(), request, finished),
            Err(message) => Response::failed(message),
        }
    }

    /// Validate or Default: the run's end, or why the call fails.
    async fn admit(
        runner: &Runner,
        call: &str,
        request: &AdmissionRequest,
    ) -> Result<Finished, String> {
        let stdin = json!({
            "call": call,
            "implementation": request.implementation(),
            "operation": match request.operation() {
                Operation::Create => "CREATE",
                Operation::Update => "UPDATE",
            },
            "object": request.object().raw(),
            "oldObject": request.old_object().map(Object::raw),
        });
        let env = CallEnv {
            call,
            implementation: request.implementation(),
            namespace: request.object().namespace(),
            name: request.object().name(),
            hook: None,
        };
        Self::run(runner, &env, &stdin).await
    }

    async fn run_validate(&self, request: AdmissionRequest) -> Result<Validation, BoxError> {
        let runner = self
            .0
            .validate
            .as_ref()
            .expect("layered only with validate");
        let finished = Self::admit(runner, "validate", &request).await?;
        Ok(answer::validation(runner.program(), finished)?)
    }

    async fn run_defaults(&self, request: AdmissionRequest) -> Result<Defaults, BoxError> {
        let runner = self.0.default.as_ref().expect("layered only with default");
        let finished = Self::admit(runner, "default", &request).await?;
        Ok(answer::defaults(runner.program(), finished)?)
    }

    /// Mutate: the object as it will be applied so far, the live one and
    /// the base, on stdin; the child's namespace and name in the
    /// environment.
    async fn run_mutate(&self, call: MutateCall) -> Result<Mutation, BoxError> {
        let runner = self.0.mutate.as_ref().expect("layered only with mutate");
        let stdin = json!({
            "call": "mutate",
            "implementation": call.implementation(),
            "object": call.object().raw(),
            "live": call.live().map(Object::raw),
            "base": call.base().map(Object::raw),
        });
        let object = call.object();
        // A child is applied in its base's namespace: an object sent
        // without one is still there.
        let namespace = match object.namespace() {
            "" => call.base().map_or("", Object::namespace),
            namespace => namespace,
        };
        let env = CallEnv {
            call: "mutate",
            implementation: call.implementation(),
            namespace,
            name: object.name(),
            hook: None,
        };
        let finished = Self::run(runner, &env, &stdin).await?;
        Ok(answer::mutation(runner.program(), finished)?)
    }

    async fn run_hook(&self, call: HookCall) -> Response {
        let Some((runner, phase)) = self.0.hooks.get(call.hook()) else {
            return Response::failed(format!(
                "kplug-exec has no hook {:?}; the manifest declares {}",
                call.hook(),
                self.0.hooks.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        };
        let request = call.request();
        // The phase called is the hook's own; a newer operator's unknown one
        // is told as the declared one.
        let phase = phase.name();
        let stdin = json!({
            "call": "hook",
            "hook": call.hook(),
            "phase": phase,
            "implementation": request.implementation(),
            "object": request.object().raw(),
            "extensions": extensions(request),
            "outcome": call.outcome().map(|o| match o {
                Outcome::Ok => "OK",
                Outcome::Retry => "RETRY",
                Outcome::Failed | Outcome::Unspecified => "FAILED",
            }),
            "message": call.message(),
        });
        let env = CallEnv {
            call: "hook",
            implementation: request.implementation(),
            namespace: request.namespace(),
            name: request.name(),
            hook: Some((call.hook(), phase)),
        };
        match Self::run(runner, &env, &stdin).await {
            Ok(finished) => answer::hook_response(runner.program(), request, finished),
            Err(message) => Response::failed(message),
        }
    }
}

fn extensions(request: &Request) -> Vec<&Value> {
    request.extensions().iter().map(Object::raw).collect()
}

impl Plugin for Exec {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        Ok(Self::call(&self.0.reconcile, "reconcile", &request).await)
    }
}
