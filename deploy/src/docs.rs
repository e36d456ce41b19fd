//! The commands of the deployment docs, read from the pages and run word for
//! word as a user's shell would, so that the docs cannot drift from what the
//! tests check.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::repo_root;

/// The commands of the first indented code block under the heading `title`
/// (any level, without its `#`s) of the page `page` (relative to the
/// repository root), one per entry: a line ending in `\` is joined with the
/// next, and blank lines are dropped. Comment lines (`# ...`) are kept, so a
/// caller can split the block at them.
///
/// # Panics
/// When the page cannot be read or has no such section or block; the
/// message names both.
pub fn commands(page: &str, title: &str) -> Vec<String> {
    let text =
        std::fs::read_to_string(repo_root().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
    let mut lines = text.lines().skip_while(|line| {
        !(line.starts_with('#') && line.trim_start_matches('#').trim() == title)
    });
    assert!(lines.next().is_some(), "{page} has no section \"{title}\"");
    let mut commands: Vec<String> = Vec::new();
    let mut continued = false;
    for line in lines
        .take_while(|line| !line.starts_with('#'))
        .skip_while(|line| !line.starts_with("    "))
        .take_while(|line| line.starts_with("    ") || line.is_empty())
        .filter(|line| !line.is_empty())
    {
        let line = line.trim();
        let (text, continues) = match line.strip_suffix('\\') {
            Some(text) => (text.trim_end(), true),
            None => (line, false),
        };
        match commands.last_mut() {
            Some(last) if continued => {
                last.push(' ');
                last.push_str(text);
            }
            _ => commands.push(text.to_owned()),
        }
        continued = continues;
    }
    assert!(
        !commands.is_empty(),
        "{page}, section \"{title}\": no indented command block"
    );
    commands
}

/// What a command printed.
#[derive(Debug, Clone)]
pub struct Printed {
    /// Its standard output.
    pub stdout: String,
    /// Its standard output, then its standard error.
    pub all: String,
}

/// Runs `script` with `bash -eo pipefail` from the repository root, feeding
/// it `stdin` when given, and says on stderr how long it took.
///
/// # Panics
/// When it cannot be started or fails; the message has what it printed.
pub fn sh(script: &str, stdin: Option<&str>) -> Printed {
    let started = Instant::now();
    let mut child = Command::new("bash")
        .args(["-eo", "pipefail", "-c", script])
        .current_dir(repo_root())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("`{script}`: {e}"));
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("a piped stdin")
            .write_all(input.as_bytes())
            .expect("writing the command's stdin");
    }
    let output = child.wait_with_output().expect("waiting for the command");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    eprintln!(
        "[docs] $ {}  ({:.1} s, {})",
        script.replace('\n', "; "),
        started.elapsed().as_secs_f64(),
        output.status
    );
    assert!(
        output.status.success(),
        "`{script}` failed ({}):\n{all}",
        output.status
    );
    Printed { stdout, all }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_block_with_continuations_and_comments() {
        let dir = tempfile_page(
            "# Page\n\n## Other\n\n    not this\n\n### Try it\n\nSome text:\n\n    make a \\\n        --flag b\n    # in another shell:\n\n    run c\n\nAfter.\n\n    not this either\n",
        );
        assert_eq!(
            commands(&dir, "Try it"),
            ["make a --flag b", "# in another shell:", "run c"]
        );
    }

    fn tempfile_page(text: &str) -> String {
        let dir = repo_root().join("target").join("docs-test-pages");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("page-{}.md", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path.strip_prefix(repo_root())
            .unwrap()
            .display()
            .to_string()
    }
}
