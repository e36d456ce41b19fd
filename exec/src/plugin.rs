//! The plugin: each call runs the manifest's command for it.
//!
//! The SDK advertises a capability (FINALIZE, VALIDATE, DEFAULT, HOOKS)
//! for a plugin type that implements its method, so the plugin served is
//! [`Exec`] wrapped in one layer per command the manifest has:
//! [`serve`] picks the layers, and each layer forwards the other methods
//! to the one it wraps, unchanged, so that what is not in the manifest is
//! not advertised.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kplug_sidecar::proto::limits::{MAX_ADMISSION_DEADLINE, MAX_CALL_DEADLINE};
use kplug_sidecar::proto::v1::Outcome;
use kplug_sidecar::{
    AdmissionRequest, BoxError, Call, CallPolicy, Defaults, Hook, HookCall, Offer, Operation,
    Plugin, PluginInfo, Readiness, Request, Response, Validation,
};
use serde_json::{Value, json};

use crate::answer;
use crate::command::{CallEnv, Finished, Runner};
use crate::manifest::{self, Manifest};

/// How much longer than a command's `timeoutSeconds` the operator is asked
/// to wait, so that the answer saying the command was killed (with the end
/// of its stderr) reaches it before its own deadline.
const DEADLINE_MARGIN: Duration = Duration::from_secs(1);

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
            "oldObject": request.old_object().map(kplug_sidecar::Object::raw),
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
    request
        .extensions()
        .iter()
        .map(kplug_sidecar::Object::raw)
        .collect()
}

impl Plugin for Exec {
    async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
        Ok(Self::call(&self.0.reconcile, "reconcile", &request).await)
    }
}

/// A plugin built on [`Exec`]: the base or a layer.
trait Layer: Plugin {
    fn exec(&self) -> &Exec;
}

impl Layer for Exec {
    fn exec(&self) -> &Exec {
        self
    }
}

/// Declares, for a layer, the methods it forwards unchanged to the plugin
/// it wraps: returning the wrapped future as it is keeps the SDK's view of
/// which methods that plugin implements.
macro_rules! forward {
    (reconcile) => {
        fn reconcile(
            &self,
            request: Request,
        ) -> impl Future<Output = Result<Response, BoxError>> + Send {
            self.0.reconcile(request)
        }
    };
    (finalize) => {
        fn finalize(
            &self,
            request: Request,
        ) -> impl Future<Output = Result<Response, BoxError>> + Send {
            self.0.finalize(request)
        }
    };
    (validate) => {
        fn validate(
            &self,
            request: AdmissionRequest,
        ) -> impl Future<Output = Result<Validation, BoxError>> + Send {
            self.0.validate(request)
        }
    };
    (defaults) => {
        fn defaults(
            &self,
            request: AdmissionRequest,
        ) -> impl Future<Output = Result<Defaults, BoxError>> + Send {
            self.0.defaults(request)
        }
    };
    (hook) => {
        fn hook(&self, call: HookCall) -> impl Future<Output = Result<Response, BoxError>> + Send {
            self.0.hook(call)
        }
    };
    (ready) => {
        fn ready(&self) -> impl Future<Output = Readiness> + Send {
            self.0.ready()
        }
    };
}

/// Adds the finalize command.
struct WithFinalize<P>(P);
/// Adds the validate command.
struct WithValidate<P>(P);
/// Adds the default command.
struct WithDefault<P>(P);
/// Adds the hooks.
struct WithHooks<P>(P);

impl<P: Layer> Plugin for WithFinalize<P> {
    forward!(reconcile);
    forward!(validate);
    forward!(defaults);
    forward!(hook);
    forward!(ready);

    async fn finalize(&self, request: Request) -> Result<Response, BoxError> {
        let commands = &self.exec().0;
        let runner = commands
            .finalize
            .as_ref()
            .expect("layered only with finalize");
        Ok(Exec::call(runner, "finalize", &request).await)
    }
}

impl<P: Layer> Plugin for WithValidate<P> {
    forward!(reconcile);
    forward!(finalize);
    forward!(defaults);
    forward!(hook);
    forward!(ready);

    async fn validate(&self, request: AdmissionRequest) -> Result<Validation, BoxError> {
        self.exec().run_validate(request).await
    }
}

impl<P: Layer> Plugin for WithDefault<P> {
    forward!(reconcile);
    forward!(finalize);
    forward!(validate);
    forward!(hook);
    forward!(ready);

    async fn defaults(&self, request: AdmissionRequest) -> Result<Defaults, BoxError> {
        self.exec().run_defaults(request).await
    }
}

impl<P: Layer> Plugin for WithHooks<P> {
    forward!(reconcile);
    forward!(finalize);
    forward!(validate);
    forward!(defaults);
    forward!(ready);

    async fn hook(&self, call: HookCall) -> Result<Response, BoxError> {
        Ok(self.exec().run_hook(call).await)
    }
}

macro_rules! layer {
    ($($layer:ident),*) => {$(
        impl<P: Layer> Layer for $layer<P> {
            fn exec(&self) -> &Exec {
                self.0.exec()
            }
        }
    )*};
}
layer!(WithFinalize, WithValidate, WithDefault, WithHooks);

/// Serves the plugin `manifest` describes (loaded from `path`) until
/// SIGTERM, advertising a capability for each command it has.
///
/// # Errors
/// As [`kplug_sidecar::serve`].
pub async fn serve(manifest: &Manifest, path: &Path) -> Result<(), kplug_sidecar::Error> {
    let exec = Exec::new(manifest, path);
    let info = info(manifest);
    if manifest.finalize.is_some() {
        with_validate(manifest, info, WithFinalize(exec)).await
    } else {
        with_validate(manifest, info, exec).await
    }
}

async fn with_validate<P: Layer>(
    manifest: &Manifest,
    info: PluginInfo,
    plugin: P,
) -> Result<(), kplug_sidecar::Error> {
    if manifest.validate.is_some() {
        with_default(manifest, info, WithValidate(plugin)).await
    } else {
        with_default(manifest, info, plugin).await
    }
}

async fn with_default<P: Layer>(
    manifest: &Manifest,
    info: PluginInfo,
    plugin: P,
) -> Result<(), kplug_sidecar::Error> {
    if manifest.default.is_some() {
        with_hooks(manifest, info, WithDefault(plugin)).await
    } else {
        with_hooks(manifest, info, plugin).await
    }
}

async fn with_hooks<P: Layer>(
    manifest: &Manifest,
    info: PluginInfo,
    plugin: P,
) -> Result<(), kplug_sidecar::Error> {
    if manifest.hooks.is_empty() {
        kplug_sidecar::serve(info, plugin).await
    } else {
        kplug_sidecar::serve(info, WithHooks(plugin)).await
    }
}

/// The plugin's description for the operator, from the manifest: its
/// offers, its hooks, and a call policy per command whose deadline is the
/// command's `timeoutSeconds` and one second more (within the operator's
/// bounds), with the admission commands' failure policies. The hooks share
/// one policy (the protocol has one for `Hook`): the longest hook's.
pub fn info(manifest: &Manifest) -> PluginInfo {
    let mut info = manifest.offers.iter().fold(
        PluginInfo::new(&manifest.name, &manifest.version).description(&manifest.description),
        |info, o| {
            let offer = o.extensions.iter().fold(
                Offer::new(&o.base.group, &o.base.kind, &o.implementation),
                |offer, e| offer.extension(&e.group, &e.kind),
            );
            info.offer(offer)
        },
    );
    let deadline = |timeout: Duration, max: Duration| (timeout + DEADLINE_MARGIN).min(max);
    info = info.call_policy(
        CallPolicy::new(Call::Reconcile)
            .deadline(deadline(manifest.reconcile.timeout(), MAX_CALL_DEADLINE)),
    );
    if let Some(spec) = &manifest.finalize {
        info = info.call_policy(
            CallPolicy::new(Call::Finalize).deadline(deadline(spec.timeout(), MAX_CALL_DEADLINE)),
        );
    }
    for (call, spec) in [
        (Call::Validate, &manifest.validate),
        (Call::Default, &manifest.default),
    ] {
        let Some(spec) = spec else { continue };
        let mut policy = CallPolicy::new(call).deadline(deadline(
            spec.command_spec().timeout(),
            MAX_ADMISSION_DEADLINE,
        ));
        if let Some(failure_policy) = spec.failure_policy {
            policy = policy.failure_policy(match failure_policy {
                manifest::FailurePolicy::Fail => kplug_sidecar::FailurePolicy::Fail,
                manifest::FailurePolicy::Ignore => kplug_sidecar::FailurePolicy::Ignore,
            });
        }
        info = info.call_policy(policy);
    }
    if let Some(longest) = manifest
        .hooks
        .iter()
        .map(|h| h.command_spec().timeout())
        .max()
    {
        info = info.call_policy(
            CallPolicy::new(Call::Hook).deadline(deadline(longest, MAX_CALL_DEADLINE)),
        );
    }
    for h in &manifest.hooks {
        let behaviour = match h.behaviour {
            manifest::Behaviour::SyncEnforce => kplug_sidecar::Behaviour::SyncEnforce,
            manifest::Behaviour::SyncBypass => kplug_sidecar::Behaviour::SyncBypass,
            manifest::Behaviour::Async => kplug_sidecar::Behaviour::Async,
        };
        info = info.hook(
            Hook::new(&h.name, &h.base.group, &h.base.kind, h.phase, behaviour).order(h.order),
        );
    }
    info
}
