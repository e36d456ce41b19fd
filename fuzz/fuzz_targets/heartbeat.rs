//! A plugin's heartbeat, as the registry checks it before dialling or
//! storing anything (`kplug_checks::heartbeat::check_heartbeat`): name
//! rule, instance id, size bounds, protocol.
//!
//! Input: the first byte picks the mode. Even: the rest is structured
//! (`kplug_fuzz::HeartbeatInput`, built with `arbitrary`; long strings and
//! many offers are cheap to reach). Odd: the rest is a protobuf-encoded
//! `HeartbeatRequest`, decoded as the registry's gRPC server would.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The body is a function of the kplug-fuzz library (fuzz/lib), so that
// `cargo test -p kplug-fuzz` replays the committed inputs on stable.
fuzz_target!(|data: &[u8]| kplug_fuzz::targets::heartbeat(data));
