//! Write kplug plugins in Rust.
//!
//! A plugin is a gRPC server in a sidecar container next to the kplug
//! operator. You implement [`Plugin`]; [`serve`] does the rest: it binds
//! `$KPLUG_SOCKET_DIR/plugins/<name>/plugin.sock` (removing a stale socket
//! safely), registers by heartbeat (with backoff, and again after an
//! operator restart), answers `Probe`, decodes objects, builds responses,
//! and on SIGTERM unregisters and drains calls in flight before exiting.
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
//! The protocol and the behaviour every SDK shares are described in
//! `docs/protocol.md`.

mod heartbeat;
mod object;
mod plugin;
mod request;
mod response;
mod server;

pub use kplug_proto as proto;
pub use object::Object;
pub use plugin::{BoxError, Offer, Plugin, PluginInfo, Readiness};
pub use request::Request;
pub use response::Response;
pub use server::{Server, serve};

/// Errors of the SDK.
///
/// `Debug` prints the message (as `Display` does): a plugin's
/// `fn main() -> Result<(), kplug_sidecar::Error>` then tells its user what
/// went wrong and what to do, not the error's Rust structure.
#[derive(thiserror::Error)]
pub enum Error {
    /// The plugin's configuration is invalid.
    #[error("{0}")]
    Config(String),
    /// The socket could not be bound.
    #[error(transparent)]
    Bind(#[from] kplug_proto::socket::BindError),
    /// The gRPC server failed.
    #[error("serving failed: {0}")]
    Serve(#[source] tonic::transport::Error),
    /// An object could not be decoded.
    #[error("{0}")]
    Decode(String),
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}
