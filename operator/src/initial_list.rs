//! How the operator's watches fill their caches: a paged LIST per kind, or
//! a streaming list (one WATCH with `sendInitialEvents`).
//!
//! # Why
//! A start over 10,000 objects and their extensions was 40 LIST pages (500
//! objects each) before the first watch, each a read of etcd. A streaming
//! list is one WATCH per kind that the API server answers from its watch
//! cache, object by object, then a bookmark that ends the initial state
//! (KEP-3157, `WatchList`: beta and on by default from Kubernetes 1.32).
//!
//! # Expected flow
//! - [`InitialList::Auto`] (the default) asks the API server's version once
//!   ([`InitialList::resolve`]): streaming from 1.32 on, paged before.
//! - Every watch of the operator (the managed kind's, each extension
//!   kind's) then uses [`InitialList::watcher_config`].
//!
//! # Caveats
//! - An API server of 1.32 or later with the `WatchList` feature gate
//!   turned off refuses `sendInitialEvents`, and the watches never fill:
//!   `--initial-list paged` there.
//! - The version cannot be read (RBAC on `/version` is given to every
//!   authenticated user by default): paged, and a warning says so.

use std::fmt;
use std::str::FromStr;

use kube::runtime::watcher;

/// How a watch's cache is filled: a paged LIST, or a streaming list (one
/// WATCH with `sendInitialEvents`, from Kubernetes 1.32 on).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InitialList {
    /// Streaming where the API server's version has it on by default
    /// (1.32+), else paged.
    #[default]
    Auto,
    /// A paged LIST, then a WATCH from its resource version.
    Paged,
    /// One WATCH with `sendInitialEvents=true`.
    Streaming,
}

/// The first Kubernetes minor version (of 1.x) whose API server serves
/// streaming lists by default.
const STREAMING_SINCE_MINOR: u32 = 32;

impl InitialList {
    /// The names [`FromStr`] takes, for a command line's choices.
    pub const NAMES: [&str; 3] = ["auto", "paged", "streaming"];

    /// `Auto` decided by the API server's version (one GET of `/version`);
    /// `Paged` and `Streaming` as they are.
    pub async fn resolve(self, client: &kube::Client) -> Self {
        if self != Self::Auto {
            return self;
        }
        match client.apiserver_version().await {
            Ok(info) => Self::for_version(&info.major, &info.minor),
            Err(error) => {
                tracing::warn!(
                    %error,
                    "cannot read the API server's version; its watches list in pages \
                     (--initial-list streaming to stream them)"
                );
                Self::Paged
            }
        }
    }

    /// Streaming from 1.32 on (`minor` may carry a suffix, as in `"35+"`).
    fn for_version(major: &str, minor: &str) -> Self {
        let digits = |s: &str| {
            s.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<u32>()
                .ok()
        };
        match (digits(major), digits(minor)) {
            (Some(1), Some(minor)) if minor >= STREAMING_SINCE_MINOR => Self::Streaming,
            (Some(major), Some(_)) if major > 1 => Self::Streaming,
            _ => Self::Paged,
        }
    }

    /// The watcher settings for this strategy (`Auto` counts as paged: it
    /// is resolved first).
    pub fn watcher_config(self) -> watcher::Config {
        match self {
            Self::Streaming => watcher::Config::default().streaming_lists(),
            Self::Auto | Self::Paged => watcher::Config::default(),
        }
    }
}

impl fmt::Display for InitialList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Paged => "paged",
            Self::Streaming => "streaming",
        })
    }
}

impl FromStr for InitialList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "paged" => Ok(Self::Paged),
            "streaming" => Ok(Self::Streaming),
            other => Err(format!(
                "unknown initial list {other:?}: auto, paged or streaming"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_from_1_32_on() {
        assert_eq!(InitialList::for_version("1", "31"), InitialList::Paged);
        assert_eq!(InitialList::for_version("1", "32"), InitialList::Streaming);
        assert_eq!(InitialList::for_version("1", "35+"), InitialList::Streaming);
        assert_eq!(InitialList::for_version("2", "0"), InitialList::Streaming);
        assert_eq!(InitialList::for_version("", "x"), InitialList::Paged);
    }

    #[test]
    fn names_round_trip() {
        for list in [
            InitialList::Auto,
            InitialList::Paged,
            InitialList::Streaming,
        ] {
            assert_eq!(list.to_string().parse::<InitialList>(), Ok(list));
        }
        assert!("pages".parse::<InitialList>().is_err());
    }
}
