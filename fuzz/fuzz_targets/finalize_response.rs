//! A plugin's `FinalizeResponse`, as the operator checks it
//! (`kplug_checks::response::check_finalize`): outcome, events (count,
//! objects they are about, message lengths), retry_after.
//!
//! Input: the first byte picks the mode. Even: the rest is structured
//! (`kplug_fuzz::ResponseInput`; its conditions and statuses are unused).
//! Odd: the rest is a protobuf-encoded `FinalizeResponse`, checked against
//! every fixture object sent.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The body is a function of the kplug-fuzz library (fuzz/lib), so that
// `cargo test -p kplug-fuzz` replays the committed inputs on stable.
fuzz_target!(|data: &[u8]| kplug_fuzz::targets::finalize_response(data));
