//! `kplug-exec`: turns executables into a kplug plugin.
//!
//! A sidecar that reads a YAML [manifest](manifest::Manifest) (name,
//! version, offers, and the command for each call), serves the plugin with
//! the Rust SDK, and answers each call by running its command:
//!
//! - the request on stdin, as JSON: `{"call", "implementation", "object",
//!   "extensions", "children"}` for reconcile and finalize (`children`: the
//!   observed children), `{"call", "implementation", "operation", "object",
//!   "oldObject"}` for validate and default, `{"call", "hook", "phase",
//!   "implementation", "object", "extensions", "outcome", "message"}` for a
//!   hook, and `{"call", "implementation", "object", "live", "base"}` for
//!   mutate;
//! - `KPLUG_CALL`, `KPLUG_IMPLEMENTATION`, `KPLUG_NAMESPACE` and
//!   `KPLUG_NAME` in the environment, and `KPLUG_HOOK` and `KPLUG_PHASE`
//!   for a hook;
//! - the answer from stdout as JSON, or from the exit code alone (0 OK, 75
//!   RETRY, anything else FAILED with the end of stderr; for validate, 0
//!   allows and 1 to 125 refuse; for mutate, anything but 0 is a gRPC
//!   error): see [`answer`]; a reconcile answer's `children`, when present,
//!   is the whole set of children the plugin desires;
//! - at most `concurrency` runs of a command at once; a run past
//!   `timeoutSeconds` is killed with its whole process group;
//! - the capabilities (FINALIZE, VALIDATE, DEFAULT, HOOKS, MUTATE) of the
//!   commands the manifest has, CHILDREN when an offer declares child
//!   kinds, its hooks and the kinds it mutates, and a call policy per
//!   command whose deadline follows its `timeoutSeconds`.
//!
//! `docs/shell-plugins.md` in the repository is the guide.

pub mod answer;
pub mod command;
pub mod manifest;
mod plugin;

pub use plugin::{Exec, info, serve};
