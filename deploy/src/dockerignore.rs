//! `.dockerignore` matching, for the check that nothing a Dockerfile copies
//! is excluded from the build context.
//!
//! Supported: the patterns the repository's `.dockerignore` uses, that is
//! path globs relative to the context root with `*`, `?` and `**` (any
//! number of directories), a trailing `/`, and `!` exceptions; a pattern
//! that matches a directory excludes everything under it (like Docker).

/// The patterns of a `.dockerignore` text, in order.
#[derive(Debug, Clone)]
pub struct DockerIgnore {
    patterns: Vec<(bool, Vec<String>)>,
}

impl DockerIgnore {
    /// Parses a `.dockerignore` (comments and blank lines skipped).
    pub fn parse(text: &str) -> Self {
        let patterns = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| {
                let (negated, pattern) = match line.strip_prefix('!') {
                    Some(rest) => (true, rest),
                    None => (false, line),
                };
                let parts = pattern
                    .trim_start_matches("./")
                    .trim_start_matches('/')
                    .trim_end_matches('/')
                    .split('/')
                    .filter(|p| !p.is_empty())
                    .map(str::to_owned)
                    .collect();
                (negated, parts)
            })
            .collect();
        Self { patterns }
    }

    /// Whether `path` (relative to the context root, `/`-separated) is
    /// excluded: the last pattern that matches it or one of its parent
    /// directories decides.
    pub fn excludes(&self, path: &str) -> bool {
        let parts: Vec<&str> = path
            .trim_start_matches("./")
            .split('/')
            .filter(|p| !p.is_empty())
            .collect();
        let mut excluded = false;
        for (negated, pattern) in &self.patterns {
            // The path itself or any parent directory of it.
            let hit = (1..=parts.len()).any(|n| glob_parts(pattern, &parts[..n]));
            if hit {
                excluded = !negated;
            }
        }
        excluded
    }
}

fn glob_parts(pattern: &[String], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| glob_parts(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((segment, path_rest)) => {
                glob_segment(first.as_bytes(), segment.as_bytes()) && glob_parts(rest, path_rest)
            }
            None => false,
        },
    }
}

fn glob_segment(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_segment(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && glob_segment(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && glob_segment(rest, &text[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_like_docker() {
        let ignore = DockerIgnore::parse(
            "# build outputs\ntarget/\n**/.venv\n**/*.pyc\n.git\nsecret*\n!secret-ok\n",
        );
        assert!(ignore.excludes("target"));
        assert!(ignore.excludes("target/debug/x"));
        assert!(!ignore.excludes("operator/target-like"));
        assert!(ignore.excludes("a/b/.venv/bin/python"));
        assert!(ignore.excludes(".venv"));
        assert!(ignore.excludes("x/y.pyc"));
        assert!(ignore.excludes(".git/HEAD"));
        assert!(ignore.excludes("secret-key"));
        assert!(!ignore.excludes("secret-ok"));
        assert!(!ignore.excludes("operator/cli/src/main.rs"));
        assert!(!ignore.excludes("Cargo.toml"));
    }
}
