//! Socket confinement (`kplug_checks::confinement::confine`): a path a
//! plugin registers must resolve to a Unix socket inside the socket dir,
//! against a real tree of sockets, files, directories and symlinks (see
//! `kplug_fuzz::confinement::Tree`).
//!
//! Input: structured (`kplug_fuzz::confinement::PathInput`): how the
//! socket dir is spelled, where the path starts, its components.
#![no_main]

use libfuzzer_sys::fuzz_target;

// The body is a function of the kplug-fuzz library (fuzz/lib), so that
// `cargo test -p kplug-fuzz` replays the committed inputs on stable.
fuzz_target!(
    init: {
        // libFuzzer leaves by exit(): the socket tree goes with the process.
        unsafe extern "C" {
            fn atexit(callback: extern "C" fn()) -> std::os::raw::c_int;
        }
        // SAFETY: registers a plain function, once.
        unsafe {
            atexit(kplug_fuzz::confinement::remove_tree);
        }
    },
    |data: &[u8]| kplug_fuzz::targets::confinement(data)
);
