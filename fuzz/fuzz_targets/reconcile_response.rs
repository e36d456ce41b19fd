//! A plugin's `ReconcileResponse`, as the operator checks it before writing
//! anything (`kplug_checks::response::check_reconcile`): outcome, JSON
//! statuses, reserved keys and condition types, targets that were sent,
//! counts, message lengths, retry_after.
//!
//! Input: the first byte picks the mode.
//! - Even (structured): the second byte is a length L; the next L bytes
//!   are the response's structure (`kplug_fuzz::ResponseInput`, built with
//!   `arbitrary`; zero bytes mean OUTCOME_OK, every fixture object sent,
//!   nothing else); the rest, split at NUL bytes (which JSON never
//!   contains), is the base's status JSON, then one extension status JSON
//!   per part (targeting the sent objects in order unless the structure
//!   says otherwise). E.g. `\0\0{"a":1}\0{"b":2}`.
//! - Odd: the rest is a protobuf-encoded `ReconcileResponse`, checked
//!   against every fixture object sent.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The body is a function of the kplug-fuzz library (fuzz/lib), so that
// `cargo test -p kplug-fuzz` replays the committed inputs on stable.
fuzz_target!(|data: &[u8]| kplug_fuzz::targets::reconcile_response(data));
