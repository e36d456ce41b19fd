//! The layers: one per command the manifest has beside reconcile, each
//! adding the method that runs it and forwarding the others unchanged (see
//! the [module docs](super)).

use std::future::Future;
use std::path::Path;

use kplug_sidecar::{
    AdmissionRequest, BoxError, Defaults, HookCall, MutateCall, Mutation, Plugin, PluginInfo,
    Readiness, Request, Response, Validation,
};

use super::{Exec, info};
use crate::manifest::Manifest;

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
    (mutate) => {
        fn mutate(
            &self,
            call: MutateCall,
        ) -> impl Future<Output = Result<Mutation, BoxError>> + Send {
            self.0.mutate(call)
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
/// Adds the mutate command.
struct WithMutate<P>(P);

impl<P: Layer> Plugin for WithFinalize<P> {
    forward!(reconcile);
    forward!(validate);
    forward!(defaults);
    forward!(hook);
    forward!(mutate);
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
    forward!(mutate);
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
    forward!(mutate);
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
    forward!(mutate);
    forward!(ready);

    async fn hook(&self, call: HookCall) -> Result<Response, BoxError> {
        Ok(self.exec().run_hook(call).await)
    }
}

impl<P: Layer> Plugin for WithMutate<P> {
    forward!(reconcile);
    forward!(finalize);
    forward!(validate);
    forward!(defaults);
    forward!(hook);
    forward!(ready);

    async fn mutate(&self, call: MutateCall) -> Result<Mutation, BoxError> {
        self.exec().run_mutate(call).await
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
layer!(
    WithFinalize,
    WithValidate,
    WithDefault,
    WithHooks,
    WithMutate
);

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
        with_mutate(manifest, info, plugin).await
    } else {
        with_mutate(manifest, info, WithHooks(plugin)).await
    }
}

async fn with_mutate<P: Layer>(
    manifest: &Manifest,
    info: PluginInfo,
    plugin: P,
) -> Result<(), kplug_sidecar::Error> {
    if manifest.mutate.is_some() {
        kplug_sidecar::serve(info, WithMutate(plugin)).await
    } else {
        kplug_sidecar::serve(info, plugin).await
    }
}
