//! Shared pieces of kplug's fuzz targets (`fuzz_targets/*.rs`): building
//! what a plugin sends from fuzz input, the fixtures it is checked against,
//! and the invariants every accepted message must satisfy.
//!
//! A violated invariant panics: that is what libFuzzer reports as a crash.

use std::sync::LazyLock;

use arbitrary::Arbitrary;

mod checks;
pub mod confinement;
mod fixture;
mod heartbeat;
mod response;
pub mod targets;

pub use checks::{check_finalize, check_reconcile};
pub use fixture::{FIXTURE, Fixture};
pub use heartbeat::{HEARTBEAT_WORDS, HeartbeatInput, check_heartbeat};
pub use response::{
    Change, ConditionInput, DurationInput, EventInput, OutcomeInput, RESPONSE_WORDS, RefInput,
    ResponseInput,
};

/// Whether `KPLUG_FUZZ_DEBUG` is set: the targets then print what they
/// built from each input (run a target's binary on one file to see it).
pub static DEBUG: LazyLock<bool> = LazyLock::new(|| std::env::var_os("KPLUG_FUZZ_DEBUG").is_some());

/// Prints `what` when [`DEBUG`] is set.
pub fn debug(what: &dyn std::fmt::Debug) {
    if *DEBUG {
        eprintln!("{what:?}");
    }
}

/// Longest string a [`Text::Repeat`] builds: past every bound it tests
/// (names 63 bytes, versions 128, messages 1024 characters), small enough
/// to keep executions fast.
const MAX_REPEAT: usize = 2100;

/// A string built from fuzz input: a known interesting value, a repeated
/// character (to cross a length bound cheaply), a DNS-label-like string, or
/// raw UTF-8.
#[derive(Arbitrary, Debug, Clone)]
pub enum Text {
    /// `known[i % known.len()]` of the caller's dictionary.
    Known(u8),
    /// `ch` repeated `len` times (at most `MAX_REPEAT`), after `prefix`.
    Repeat {
        /// Comes first.
        prefix: String,
        /// The repeated character (multi-byte ones test character counts).
        ch: char,
        /// How many.
        len: u16,
    },
    /// Bytes mapped onto `[a-z0-9-]`.
    Label(Vec<u8>),
    /// As given.
    Raw(String),
}

impl Text {
    /// The string, `known` being the caller's dictionary.
    pub fn build(&self, known: &[&str]) -> String {
        match self {
            Self::Known(i) if !known.is_empty() => known[usize::from(*i) % known.len()].to_owned(),
            Self::Known(_) => String::new(),
            Self::Repeat { prefix, ch, len } => {
                let mut s = prefix.clone();
                s.extend(std::iter::repeat_n(
                    *ch,
                    usize::from(*len) % (MAX_REPEAT + 1),
                ));
                s
            }
            Self::Label(bytes) => bytes
                .iter()
                .map(|b| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789-"[usize::from(*b) % 37]))
                .collect(),
            Self::Raw(s) => s.clone(),
        }
    }
}

/// `template` cycled to `count` items when `count` is larger (to cross a
/// count bound with little input), else as is. `unique` makes the copies'
/// strings distinct through `rename`.
pub fn cycle<T: Clone>(
    template: &[T],
    count: usize,
    unique: bool,
    rename: impl Fn(&mut T, usize),
) -> Vec<T> {
    if template.is_empty() || count <= template.len() {
        return template.to_vec();
    }
    (0..count)
        .map(|i| {
            let mut item = template[i % template.len()].clone();
            if unique && i >= template.len() {
                rename(&mut item, i);
            }
            item
        })
        .collect()
}
