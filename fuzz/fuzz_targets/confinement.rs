//! Socket confinement (`kplug_operator::confinement::confine`): a path a
//! plugin registers must resolve to a Unix socket inside the socket dir,
//! against a real tree of sockets, files, directories and symlinks (see
//! `kplug_fuzz::confinement::Tree`).
//!
//! Input: structured (`kplug_fuzz::confinement::PathInput`): how the
//! socket dir is spelled, where the path starts, its components.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use kplug_fuzz::confinement::{PathInput, check, tree};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let tree = tree();
    let Ok(input) = PathInput::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let socket_dir = input.socket_dir(tree);
    let registered = input.registered(tree);
    kplug_fuzz::debug(&(&socket_dir, &registered));
    check(tree, &socket_dir, &registered);
});
