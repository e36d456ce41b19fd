//! `kplug-conformance`: plays the kplug operator against one plugin, in any
//! language, and checks that it keeps the `kplug.v1` protocol.
//!
//! ```text
//! kplug-conformance --socket-dir /tmp/kplug-check -- ./my-plugin --flag
//! ```
//!
//! The kit serves `registry.sock` in the socket dir, starts the plugin with
//! `KPLUG_SOCKET_DIR` set, and then fails, restarts, signals and calls it as
//! an operator and a kubelet would, judging each [check](checks::CHECKS)
//! against the rule in `docs/protocol.md` it names. Responses are judged with
//! the operator's own checks, so the kit refuses exactly what the operator
//! refuses.
//!
//! The binary is the usual way in; the library is what it runs, for tests
//! and for embedding the kit in another harness.

pub mod cases;
pub mod checks;
mod kit;
mod process;
mod registry;
pub mod report;

pub use kit::{Error, Options, Outcome, run};
