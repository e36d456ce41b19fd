//! The protocol's rules that both sides apply: which plugin names are
//! valid, how the heartbeat interval is read from the environment, how a
//! plugin backs off while the operator's registry cannot be reached, and
//! what a plugin says about its socket dir when the registry or the
//! directory itself is missing.
//!
//! This module, [`crate::limits`] and the crate root
//! ([`crate::RESERVED_STATUS_KEYS`], [`crate::RESERVED_CONDITION_TYPES`],
//! [`crate::SOCKET_DIR_ENV`]) are the one source of these rules. The Rust
//! SDK and the operator use them directly; the SDKs in other languages hold
//! the same values, and `sidecar-sdk/conformance/rules.json`, which a test
//! of this crate checks against this code, makes every SDK's test suite
//! fail when its copy drifts.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use crate::limits::MAX_NAME_LEN;
use crate::{DEFAULT_SOCKET_DIR, REGISTRY_SOCKET, SOCKET_DIR_ENV};

/// Why a plugin name is refused. Its message names the plugin and says
/// what a valid name looks like.
///
/// ```
/// use kplug_proto::rules::{NameError, validate_plugin_name};
///
/// assert!(validate_plugin_name("postgresql").is_ok());
/// let err = validate_plugin_name("Postgres").unwrap_err();
/// assert!(matches!(err, NameError::Character { found: 'P', .. }));
/// assert!(err.to_string().starts_with("invalid plugin name \"Postgres\": 'P' is not allowed"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("invalid plugin name \"\": a plugin needs a name; {DNS_LABEL}")]
    Empty,
    /// The name holds a character other than `a-z`, `0-9` and `-`.
    #[error("invalid plugin name {}: {found:?} is not allowed; {DNS_LABEL}", Shown(.name))]
    Character {
        /// The name.
        name: String,
        /// The first character that is not allowed.
        found: char,
    },
    /// The name starts or ends with `-`.
    #[error("invalid plugin name {}: it starts or ends with '-'; {DNS_LABEL}", Shown(.name))]
    Hyphen {
        /// The name.
        name: String,
    },
    /// The name is longer than [`MAX_NAME_LEN`].
    #[error("invalid plugin name {}: it is {len} characters long; shorten it, {DNS_LABEL}", Shown(.name))]
    TooLong {
        /// The name.
        name: String,
        /// Its length.
        len: usize,
    },
}

/// What a valid name looks like, the end of every [`NameError`] message.
const DNS_LABEL: &str = "use a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters, e.g. \"postgresql\"";

/// A name quoted for a message, cut after 80 characters: a refused name
/// can be as long as the registry's message bound.
struct Shown<'a>(&'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 80;
        match self.0.char_indices().nth(SHOWN) {
            Some((cut, _)) => write!(f, "{:?}…", &self.0[..cut]),
            None => write!(f, "{:?}", self.0),
        }
    }
}

/// Checks that `name` is a valid plugin name: a DNS label (RFC 1123) of
/// lowercase letters, digits and `-`, starting and ending with a letter or
/// digit, at most [`MAX_NAME_LEN`] (63) characters. It becomes part of
/// socket paths, field manager names and metric labels.
///
/// SDKs check it at start-up; the operator refuses a heartbeat whose name
/// fails it.
///
/// # Errors
/// The first rule the name breaks, checked in this order: empty, a
/// character not allowed, a `-` at either end, too long.
pub fn validate_plugin_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if let Some(found) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(NameError::Character {
            name: name.to_owned(),
            found,
        });
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(NameError::Hyphen {
            name: name.to_owned(),
        });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong {
            name: name.to_owned(),
            len: name.len(),
        });
    }
    Ok(())
}

/// Environment variable holding a plugin's heartbeat interval in seconds
/// (see [`parse_heartbeat_interval`]).
pub const HEARTBEAT_INTERVAL_ENV: &str = "KPLUG_HEARTBEAT_INTERVAL";

/// A plugin's heartbeat interval when [`HEARTBEAT_INTERVAL_ENV`] is unset or
/// empty, until the operator's first answer asks for another.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// Deadline of one `Heartbeat` call.
pub const HEARTBEAT_CALL_DEADLINE: Duration = Duration::from_secs(2);

/// Deadline of the `Unregister` call at shutdown (the operator answers once
/// the calls in flight to the instance are done).
pub const UNREGISTER_DEADLINE: Duration = Duration::from_secs(10);

/// Why a heartbeat interval is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{HEARTBEAT_INTERVAL_ENV}={text:?} is not a heartbeat interval: set it to a positive number of seconds, e.g. 5 or 0.5, or unset it for the default ({}s)",
    DEFAULT_HEARTBEAT_INTERVAL.as_secs()
)]
pub struct IntervalError {
    /// The value refused.
    pub text: String,
}

/// The heartbeat interval from the value of [`HEARTBEAT_INTERVAL_ENV`]:
/// `None` (unset) or empty gives [`DEFAULT_HEARTBEAT_INTERVAL`]; otherwise a
/// plain decimal number of seconds (`5`, `0.5`, `.5`, `1e1`), finite and
/// greater than zero. Spaces, units (`5s`), digit separators (`1_0`), hex,
/// `inf` and `NaN` are refused.
///
/// ```
/// use std::time::Duration;
/// use kplug_proto::rules::parse_heartbeat_interval;
///
/// assert_eq!(parse_heartbeat_interval(Some("0.5")), Ok(Duration::from_millis(500)));
/// assert_eq!(parse_heartbeat_interval(None), Ok(Duration::from_secs(5)));
/// assert!(parse_heartbeat_interval(Some("5s")).is_err());
/// ```
///
/// # Errors
/// [`IntervalError`], naming the variable and the value, when the value is
/// not such a number.
pub fn parse_heartbeat_interval(text: Option<&str>) -> Result<Duration, IntervalError> {
    let text = match text {
        None | Some("") => return Ok(DEFAULT_HEARTBEAT_INTERVAL),
        Some(text) => text,
    };
    let refused = || IntervalError {
        text: text.to_owned(),
    };
    // Rust's f64 grammar, minus its words (inf, infinity, nan): what every
    // language's number parser reads the same way.
    if !text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return Err(refused());
    }
    let seconds: f64 = text.parse().map_err(|_| refused())?;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(refused());
    }
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(refused)
}

/// First delay after a failed heartbeat.
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(100);

/// Each further failure in a row multiplies the delay by this, up to the cap.
pub const BACKOFF_FACTOR: u32 = 2;

/// A delay is shortened at random by up to this fraction of it, so that
/// plugins restarted together do not retry in lockstep. Shortened, never
/// lengthened: the cap holds.
pub const BACKOFF_JITTER: f64 = 0.1;

/// The wait after the `attempt`-th failed heartbeat in a row (counting from
/// 1; 0 counts as 1), for `random_unit` drawn uniformly from `[0, 1)`:
///
/// ```text
/// base  = min(cap, BACKOFF_INITIAL × BACKOFF_FACTOR^(attempt − 1))
/// delay = base × (1 − BACKOFF_JITTER × random_unit)
/// ```
///
/// so `delay` is within `(0.9 × base, base]` and never above `cap`. The cap
/// is the heartbeat interval in force (the configured one, then the one the
/// operator asks for), [`DEFAULT_HEARTBEAT_INTERVAL`] by default: a plugin
/// retries at least once per interval, which the operator's start-up grace
/// relies on. `random_unit` outside `[0, 1]` (or NaN) is clamped (NaN
/// counts as 0). A success resets `attempt`.
///
/// With the defaults: 100 ms, 200 ms, 400 ms, 800 ms, 1.6 s, 3.2 s, then 5 s,
/// each up to 10 % shorter.
///
/// ```
/// use std::time::Duration;
/// use kplug_proto::rules::backoff_delay;
///
/// let cap = Duration::from_secs(5);
/// assert_eq!(backoff_delay(1, cap, 0.0), Duration::from_millis(100));
/// assert_eq!(backoff_delay(3, cap, 0.5), Duration::from_millis(380));
/// assert_eq!(backoff_delay(40, cap, 0.0), cap);
/// ```
pub fn backoff_delay(attempt: u32, cap: Duration, random_unit: f64) -> Duration {
    // Past 2^31 × 100 ms every cap a Duration holds is reached already.
    let exponent = attempt.saturating_sub(1).min(31);
    let base = BACKOFF_INITIAL
        .checked_mul(BACKOFF_FACTOR.saturating_pow(exponent))
        .map_or(cap, |d| d.min(cap));
    let unit = if random_unit.is_nan() {
        0.0
    } else {
        random_unit.clamp(0.0, 1.0)
    };
    // Only the cut goes through floating point: without jitter the delay is
    // exact.
    base.saturating_sub(base.mul_f64(BACKOFF_JITTER * unit))
}

/// Where a plugin's socket dir came from, which its messages about the
/// socket dir name, so that a wrong setting is fixed where it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketDirOrigin {
    /// [`SOCKET_DIR_ENV`] is unset or empty: [`DEFAULT_SOCKET_DIR`].
    Default,
    /// [`SOCKET_DIR_ENV`].
    Environment,
    /// The program gave it (an SDK's constructor or option); the variable
    /// is not read.
    Program,
}

impl SocketDirOrigin {
    /// The origin of a socket dir read from [`SOCKET_DIR_ENV`], given the
    /// variable's value: unset or empty means the default.
    pub fn of_variable(value: Option<&std::ffi::OsStr>) -> Self {
        match value {
            Some(v) if !v.is_empty() => Self::Environment,
            _ => Self::Default,
        }
    }

    /// Its name in `sidecar-sdk/conformance/rules.json`: `default`,
    /// `environment` or `program`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Environment => "environment",
            Self::Program => "program",
        }
    }

    /// Where the directory came from, for the parentheses of a message.
    fn said(self) -> String {
        match self {
            Self::Default => {
                format!("{SOCKET_DIR_ENV} is not set; the default is {DEFAULT_SOCKET_DIR}")
            }
            Self::Environment => format!("from {SOCKET_DIR_ENV}"),
            Self::Program => format!("set by the program; {SOCKET_DIR_ENV} is not read"),
        }
    }

    /// What to do when the directory is the wrong one.
    fn fix(self) -> String {
        match self {
            Self::Program => "have the program use the directory shared with the operator".into(),
            _ => format!("set {SOCKET_DIR_ENV} to the directory shared with the operator"),
        }
    }
}

/// What a plugin logs, once at warning level, while `registry.sock` in its
/// socket dir is missing or refuses connections: where it looked, where
/// that came from, and what to do. Later retries log at debug level only.
///
/// ```
/// use std::path::Path;
/// use kplug_proto::rules::{SocketDirOrigin, registry_waiting_message};
///
/// let text = registry_waiting_message(Path::new("/tmp/k"), SocketDirOrigin::Environment);
/// assert!(text.starts_with("no operator registry at /tmp/k/registry.sock yet (from KPLUG_SOCKET_DIR): "));
/// ```
pub fn registry_waiting_message(socket_dir: &Path, origin: SocketDirOrigin) -> String {
    format!(
        "no operator registry at {} yet ({}): {}, unless the operator is still starting; retrying with backoff",
        socket_dir.join(REGISTRY_SOCKET).display(),
        origin.said(),
        origin.fix()
    )
}

/// The start-up error of a plugin whose socket dir does not exist. A
/// plugin never creates the socket dir (nor `plugins/` in a missing one):
/// it is the volume shared with the operator, so a missing one means a
/// wrong setting, and a directory the plugin made would be one the
/// operator never looks in.
pub fn socket_dir_missing_message(socket_dir: &Path, origin: SocketDirOrigin) -> String {
    format!(
        "the socket dir {} does not exist ({}): {} (a plugin does not create the socket dir: it is a volume shared with the operator)",
        socket_dir.display(),
        origin.said(),
        origin.fix()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_dns_label_rule() {
        for ok in ["a", "0", "postgresql", "pg-2", &"x".repeat(63)] {
            assert_eq!(validate_plugin_name(ok), Ok(()), "{ok}");
        }
        assert_eq!(validate_plugin_name(""), Err(NameError::Empty));
        assert!(matches!(
            validate_plugin_name("pg_sql"),
            Err(NameError::Character { found: '_', .. })
        ));
        assert!(matches!(
            validate_plugin_name("-pg"),
            Err(NameError::Hyphen { .. })
        ));
        assert!(matches!(
            validate_plugin_name(&"x".repeat(64)),
            Err(NameError::TooLong { len: 64, .. })
        ));
    }

    #[test]
    fn name_errors_say_what_is_wrong_and_what_to_do() {
        let err = validate_plugin_name("my_plugin").unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid plugin name \"my_plugin\": '_' is not allowed; use a DNS label: lowercase \
             letters, digits and '-', starting and ending with a letter or digit, at most 63 \
             characters, e.g. \"postgresql\""
        );
        // A huge name is cut in the message, and control characters are
        // escaped (messages end up in Events).
        let err = validate_plugin_name(&format!("{}\u{1b}", "y".repeat(100_000)))
            .unwrap_err()
            .to_string();
        assert!(err.len() < 400, "{err}");
        let err = validate_plugin_name("a\u{1b}[31m").unwrap_err().to_string();
        assert!(!err.contains('\u{1b}'), "{err}");
    }

    #[test]
    fn heartbeat_interval_is_a_positive_plain_number_of_seconds() {
        let secs = |s: f64| Ok(Duration::from_secs_f64(s));
        assert_eq!(parse_heartbeat_interval(None), secs(5.0));
        assert_eq!(parse_heartbeat_interval(Some("")), secs(5.0));
        assert_eq!(parse_heartbeat_interval(Some("1e1")), secs(10.0));
        assert_eq!(parse_heartbeat_interval(Some(".25")), secs(0.25));
        for bad in [
            "0", "-1", "abc", "inf", "NaN", " 5", "5s", "1_0", "0x10", "1e400",
        ] {
            let err = parse_heartbeat_interval(Some(bad)).unwrap_err();
            assert!(
                err.to_string().contains("KPLUG_HEARTBEAT_INTERVAL="),
                "{err}"
            );
        }
        // Positive but shorter than a nanosecond: refused, not zero.
        assert!(parse_heartbeat_interval(Some("1e-12")).is_err());
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_jitter_only_shortens() {
        let cap = Duration::from_secs(1);
        let no_jitter: Vec<_> = (1..=6).map(|n| backoff_delay(n, cap, 0.0)).collect();
        assert_eq!(
            no_jitter,
            [100, 200, 400, 800, 1000, 1000].map(Duration::from_millis)
        );
        for attempt in [0, 1, 5, 31, 32, 33, u32::MAX] {
            for unit in [0.0, 0.5, 0.999_999, 1.0, -3.0, 7.0, f64::NAN] {
                let d = backoff_delay(attempt, cap, unit);
                let base = backoff_delay(attempt, cap, 0.0);
                assert!(
                    d <= base && d >= base.mul_f64(0.9),
                    "{attempt} {unit}: {d:?}"
                );
                assert!(d <= cap);
            }
        }
        assert_eq!(backoff_delay(0, cap, 0.0), BACKOFF_INITIAL);
        assert_eq!(
            backoff_delay(u32::MAX, Duration::MAX, 0.0),
            BACKOFF_INITIAL * 2u32.pow(31)
        );
    }
}
