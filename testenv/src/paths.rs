//! Where things are: the workspace, its target directory, its binaries.

use std::path::{Path, PathBuf};

/// The root of the kplug workspace (the directory holding the root `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    // This crate lives in <root>/testenv; the path is fixed at compile time,
    // which is what a test binary of this workspace wants.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testenv/ has a parent directory")
        .to_path_buf()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` (relative to the workspace
/// root when relative) if set, else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => workspace_root().join(dir),
        _ => workspace_root().join("target"),
    }
}

/// Where the `kube-testenv` program is expected: `$KPLUG_TESTENV_BIN` if set,
/// else `<target dir>/testenv/kube-testenv` (where `make testenv` puts it).
///
/// Existence is checked when the control plane starts, with an error that
/// says to run `make testenv`.
pub fn testenv_binary() -> PathBuf {
    match std::env::var_os("KPLUG_TESTENV_BIN") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => target_dir().join("testenv").join("kube-testenv"),
    }
}

/// The path of binary `name` of this workspace, built with the same profile as
/// the running test (`target/<profile>/<name>`; an example is
/// `"examples/<name>"`).
///
/// # Panics
///
/// When the binary does not exist, with a message saying how to build it.
pub fn workspace_binary(name: &str) -> PathBuf {
    let path = profile_dir().join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "workspace binary `{name}` not found at {}: build it with `cargo build --workspace --bins --examples` \
         (same profile as the tests; `make test` does it)",
        path.display()
    );
    path
}

/// `target/<profile>`, derived from the running executable: a test binary is
/// `target/<profile>/deps/<test>-<hash>`, a binary is `target/<profile>/<name>`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the path of the running executable is known");
    let dir = exe
        .parent()
        .expect("the running executable is in a directory");
    if dir.file_name().is_some_and(|name| name == "deps") {
        dir.parent().unwrap_or(dir).to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_root_holds_the_workspace_manifest() {
        let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace]"), "{manifest}");
    }

    #[test]
    fn profile_dir_is_the_parent_of_deps() {
        // Unit tests run from target/<profile>/deps/kplug_testenv-<hash>.
        let dir = profile_dir();
        assert!(dir.join("deps").is_dir(), "{}", dir.display());
        assert_ne!(dir.file_name().unwrap(), "deps");
    }

    #[test]
    #[should_panic(expected = "build it with `cargo build --workspace --bins --examples`")]
    fn a_missing_workspace_binary_says_how_to_build_it() {
        workspace_binary("no-such-binary-in-kplug");
    }
}
