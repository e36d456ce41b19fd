//! The parsers of the command line's values, and the entries of its
//! repeatable mapping flags that come from the environment.

use std::time::Duration;

/// Parses `500ms`, `15s`, `2m`, `1h` (a bare number means seconds).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; use e.g. 500ms, 15s, 2m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}; use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// Parses `sqlite=65533`.
pub(crate) fn parse_plugin_uid(s: &str) -> Result<(String, u32), String> {
    match s.split_once('=') {
        Some((name, uid)) if !name.is_empty() => uid
            .parse()
            .map(|uid| (name.to_owned(), uid))
            .map_err(|_| format!("{s:?}: {uid:?} is not a UID (a number)")),
        _ => Err(format!("{s:?}: expected NAME=UID, e.g. sqlite=65533")),
    }
}

/// Entries of a repeatable flag from the environment: each variable whose
/// name starts with `prefix` holds one, parsed with `parse`. One variable
/// per plugin lets each kustomize component add its own mapping to the
/// operator container (env entries merge by name; args cannot be merged).
pub(crate) fn entries_from_env<T>(
    vars: impl Iterator<Item = (String, String)>,
    prefix: &str,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let mut vars: Vec<(String, String)> = vars.filter(|(key, _)| key.starts_with(prefix)).collect();
    vars.sort();
    vars.into_iter()
        .map(|(key, value)| parse(&value).map_err(|e| format!("environment variable {key}: {e}")))
        .collect()
}

/// Parses `SQLite=sqlite`.
pub(crate) fn parse_owner(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((implementation, plugin)) if !implementation.is_empty() && !plugin.is_empty() => {
            Ok((implementation.to_owned(), plugin.to_owned()))
        }
        _ => Err(format!(
            "{s:?}: expected IMPLEMENTATION=PLUGIN, e.g. SQLite=sqlite"
        )),
    }
}

/// Parses `2MiB`, `512KiB`, `1048576` (bytes).
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: usize = number
        .parse()
        .map_err(|_| format!("{s:?} is not a size; use e.g. 2MiB, 512KiB or bytes"))?;
    let unit = match unit {
        "" | "B" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}; use KiB or MiB")),
    };
    n.checked_mul(unit)
        .filter(|&bytes| bytes > 0)
        .ok_or_else(|| format!("{s:?} must be more than 0 and fit in memory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2MiB").unwrap(), 2 * 1024 * 1024);
        assert_eq!(parse_size("512KiB").unwrap(), 512 * 1024);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("0").is_err());
        assert!(parse_size("2MB").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn mappings_come_from_one_variable_each() {
        let vars = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<Vec<_>>()
                .into_iter()
        };
        let uids = entries_from_env(
            vars(&[
                ("KPLUG_PLUGIN_UID_SQLITE", "sqlite=10001"),
                ("HOME", "/root"),
                ("KPLUG_PLUGIN_UID_MARIADB", "mariadb=10002"),
            ]),
            "KPLUG_PLUGIN_UID_",
            parse_plugin_uid,
        )
        .unwrap();
        assert_eq!(
            uids,
            [("mariadb".to_owned(), 10002), ("sqlite".to_owned(), 10001)]
        );
        let err = entries_from_env(
            vars(&[("KPLUG_PLUGIN_UID_SQLITE", "sqlite=root")]),
            "KPLUG_PLUGIN_UID_",
            parse_plugin_uid,
        )
        .unwrap_err();
        assert!(
            err.contains("KPLUG_PLUGIN_UID_SQLITE") && err.contains("not a UID"),
            "{err}"
        );
    }
}
