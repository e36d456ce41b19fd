//! Write kplug plugins in Rust.
//!
//! A plugin is a gRPC server in a sidecar container next to the kplug
//! operator. You implement [`Plugin`]; [`serve`] does the rest: it binds
//! `$KPLUG_SOCKET_DIR/plugins/<name>/plugin.sock` (removing a stale socket
//! safely; the socket dir, shared with the operator, must exist and is
//! never created), registers by heartbeat (with backoff, and again after an
//! operator restart; while the operator's `registry.sock` is missing it
//! says once, at warning level, where it looks and where that came from),
//! answers `Probe`, decodes objects, builds responses, and on SIGTERM
//! unregisters and drains calls in flight, then removes its socket and its
//! emptied `plugins/<name>/` directory before exiting.
//!
//! A whole plugin:
//!
//! ```no_run
//! use kplug_sidecar::{BoxError, Offer, Plugin, PluginInfo, Request, Response};
//!
//! struct Hello;
//!
//! impl Plugin for Hello {
//!     async fn reconcile(&self, request: Request) -> Result<Response, BoxError> {
//!         let greeting = format!("hello, {}", request.name());
//!         Ok(Response::ok().status(serde_json::json!({ "greeting": greeting })))
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), kplug_sidecar::Error> {
//!     let info = PluginInfo::new("hello", "1.0.0").offer(Offer::new("example.com", "Greeting", "Hello"));
//!     kplug_sidecar::serve(info, Hello).await
//! }
//! ```
//!
//! A plugin that must clean up before its objects are deleted also
//! overrides [`Plugin::finalize`]; that alone makes the SDK advertise the
//! FINALIZE capability, so the operator waits for it.
//!
//! The same goes for admission and hooks: overriding [`Plugin::validate`]
//! (field errors refuse an object at `kubectl apply`), [`Plugin::defaults`]
//! (a JSON Patch of defaults, built with [`Defaults`]) or [`Plugin::hook`]
//! (with hooks declared by [`PluginInfo::hook`]) advertises the VALIDATE,
//! DEFAULT or HOOKS capability. [`PluginInfo::call_policy`] asks for a
//! deadline (and, for admission, a failure policy) per call.
//!
//! The protocol and the behaviour every SDK shares are described in
//! `docs/protocol.md`; its rules (names, reserved keys, limits, backoff)
//! come from [`kplug_proto::rules`] and [`kplug_proto::limits`].

mod admission;
mod heartbeat;
mod hooks;
mod info;
mod mutate;
mod object;
mod plugin;
mod request;
mod response;
mod server;

pub use admission::{AdmissionRequest, Defaults, Operation, Validation};
pub use hooks::{Behaviour, Call, CallPolicy, FailurePolicy, Hook, HookCall, Phase};
pub use kplug_proto as proto;
pub use mutate::{MutateCall, Mutation};
pub use object::Object;
pub use plugin::{BoxError, Offer, Plugin, PluginInfo, Readiness};
pub use request::Request;
pub use response::Response;
pub use server::{Server, serve};

/// Errors of the SDK. Each message is one line that names the plugin or
/// the object involved and says what to do.
///
/// `Debug` prints that message too (as `Display` does): a plugin's
/// `fn main() -> Result<(), kplug_sidecar::Error>` (or `Result<(), Box<dyn
/// std::error::Error>>`) then tells its user what went wrong and what to
/// do, not the error's Rust structure:
///
/// ```text
/// Error: plugin hello cannot start: /var/run/kplug/plugins/hello/plugin.sock is served by another live process; stop it or choose another name
/// ```
///
/// Each message already holds its cause's text, so `source()` is left
/// empty and error reporters print nothing twice.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The plugin's name is not a DNS label.
    #[error("{0}")]
    InvalidName(kplug_proto::rules::NameError),
    /// A setting read from the environment is invalid.
    #[error("plugin {plugin} cannot start: {error}")]
    Environment {
        /// The plugin.
        plugin: String,
        /// The variable and the value refused.
        error: kplug_proto::rules::IntervalError,
    },
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` is not an endpoint spans can be
    /// exported to.
    #[error(
        "plugin {plugin} cannot start: {error} ({})",
        kplug_proto::telemetry::OTLP_ENDPOINT_ENV
    )]
    Telemetry {
        /// The plugin.
        plugin: String,
        /// The endpoint and what is wrong with it.
        error: kplug_proto::telemetry::ExporterError,
    },
    /// The socket dir does not exist: the plugin does not create it (it is
    /// the volume shared with the operator). The message names the
    /// directory, where it came from (`KPLUG_SOCKET_DIR`, the default, or
    /// the program) and what to do.
    #[error("plugin {plugin} cannot start: {message}")]
    SocketDir {
        /// The plugin.
        plugin: String,
        /// The directory, where it came from, and what to do.
        message: String,
    },
    /// The plugin's socket could not be bound.
    #[error("plugin {plugin} cannot start: {error}")]
    Bind {
        /// The plugin.
        plugin: String,
        /// Why: the path, and what is in the way.
        error: kplug_proto::socket::BindError,
    },
    /// The gRPC server stopped with an error.
    #[error("plugin {plugin}: serving on {} failed: {message}; the plugin must be restarted (the operator routes no work to it meanwhile)", socket.display())]
    Serve {
        /// The plugin.
        plugin: String,
        /// Its socket.
        socket: std::path::PathBuf,
        /// The server's error, with its causes.
        message: String,
    },
    /// An object could not be decoded (the message names it).
    #[error("{0}")]
    Decode(String),
    /// The plugin's description declares something the operator would
    /// refuse (a hook name that is not a DNS label or is declared twice,
    /// hooks without [`Plugin::hook`], a call policy declared twice or with
    /// a zero deadline); the message says which.
    #[error("{0}")]
    Declaration(String),
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}
