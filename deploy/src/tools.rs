//! The pinned tools in `deploy/.tools` and running programs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, bail};

use crate::deploy_dir;

/// The versions pinned in `deploy/tool-versions.env` (`KEY=value` lines).
pub fn pinned_versions() -> BTreeMap<String, String> {
    let path = deploy_dir().join("tool-versions.env");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    parse_env_file(&text)
}

/// Parses `KEY=value` lines, skipping blank lines and `#` comments.
pub fn parse_env_file(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
        .collect()
}

/// The path of tool `name` installed by `make -C deploy tools`.
///
/// # Panics
///
/// When it is not installed, saying how to install it.
pub fn tool(name: &str) -> PathBuf {
    let path = deploy_dir().join(".tools").join("bin").join(name);
    assert!(
        path.exists(),
        "{name} is not installed at {}: run `make -C deploy tools` (it installs the pinned \
         kustomize, hadolint and composecheck)",
        path.display()
    );
    path
}

/// The pinned kustomize, after checking that the installed one is the
/// version in `tool-versions.env`.
///
/// # Panics
///
/// When it is missing or of another version.
pub fn kustomize() -> PathBuf {
    let path = tool("kustomize");
    let pinned = pinned_versions()
        .remove("KUSTOMIZE_VERSION")
        .expect("tool-versions.env pins KUSTOMIZE_VERSION");
    let output = run(Command::new(&path).arg("version")).expect("kustomize version");
    let installed = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert_eq!(
        installed, pinned,
        "deploy/.tools has kustomize {installed}, tool-versions.env pins {pinned}: run `make -C deploy tools`"
    );
    path
}

/// The pinned hadolint, after checking its version.
///
/// # Panics
///
/// When it is missing or of another version.
pub fn hadolint() -> PathBuf {
    let path = tool("hadolint");
    let pinned = pinned_versions()
        .remove("HADOLINT_VERSION")
        .expect("tool-versions.env pins HADOLINT_VERSION");
    let output = run(Command::new(&path).arg("--version")).expect("hadolint --version");
    let installed = String::from_utf8_lossy(&output.stdout);
    assert!(
        installed.split_whitespace().any(|word| word == pinned),
        "deploy/.tools has {}, tool-versions.env pins hadolint {pinned}: run `make -C deploy tools`",
        installed.trim()
    );
    path
}

/// Runs `command` to completion; fails, with its stderr and stdout, unless it
/// exits 0.
pub fn run(command: &mut Command) -> Result<Output> {
    let output = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed ({}):\n--- stderr\n{}\n--- stdout\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
    }
    Ok(output)
}

/// `kustomize build <dir>` with the pinned kustomize: the rendered YAML.
pub fn kustomize_build(dir: &Path) -> Result<String> {
    let output = run(Command::new(kustomize()).arg("build").arg(dir))?;
    String::from_utf8(output.stdout).context("kustomize printed something that is not UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_files_are_parsed_without_comments() {
        let parsed = parse_env_file("# a comment\n\nA=1\n B = two \nnot a pair\n");
        assert_eq!(parsed.len(), 2, "{parsed:?}");
        assert_eq!(parsed["A"], "1");
        assert_eq!(parsed["B"], "two");
    }

    #[test]
    fn the_pinned_versions_are_all_there() {
        let versions = pinned_versions();
        assert!(
            versions["KUSTOMIZE_VERSION"].starts_with("v5."),
            "{versions:?}"
        );
        assert!(!versions["HADOLINT_VERSION"].is_empty(), "{versions:?}");
    }

    #[test]
    fn a_failing_command_reports_its_output() {
        let err = run(Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("err") && err.contains("out") && err.contains('3'),
            "{err}"
        );
    }
}
