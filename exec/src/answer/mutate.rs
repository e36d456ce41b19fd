//! The answer of a mutate command (see the [module docs](super)).

use kplug_sidecar::Mutation;
use kplug_sidecar::proto::limits::mutation_path_problem;

use super::patch::{Operation, PatchAnswer};
use super::{how, stdout_answer, timed_out, with_tail};
use crate::command::Finished;

/// The mutation a mutate command answered, or why the call fails (the
/// operator then holds the object until a call succeeds).
///
/// The patch is built with the SDK's [`Mutation`], so its paths are judged
/// by the rule a Rust plugin's are (only `/spec` and single labels and
/// annotations, never a `kplug.io/` one), here, where the message can
/// name the command, and say in the rule's words why the path is refused.
///
/// # Errors
/// The message of the call's failure: a timeout, a signal, an exit other
/// than 0, an answer that cannot be used or that patches outside the
/// paths a mutation may.
pub fn mutation(program: &str, finished: Finished) -> Result<Mutation, String> {
    let stdout = match finished {
        Finished::TimedOut { after, stderr_tail } => {
            return Err(timed_out(program, after, &stderr_tail));
        }
        Finished::Exited {
            code: Some(0),
            stdout,
            ..
        } => stdout,
        Finished::Exited {
            code, stderr_tail, ..
        } => return Err(with_tail(format!("{program} {}", how(code)), &stderr_tail)),
    };
    let Some(mut answer) = stdout_answer::<PatchAnswer>(&stdout, |e| {
        format!(
            "{program} exited 0 but its stdout is not a mutation ({e}); print {{\"patch\": [{{\"op\": \"add\", \"path\": \"/spec/x\", \"value\": 1}}], \"warnings\": []}}, or nothing"
        )
    })?
    else {
        return Ok(Mutation::none());
    };
    let warnings = std::mem::take(&mut answer.warnings);
    let operations = answer.operations(program)?;
    // Why the operator refuses the first path outside (the shared rule's
    // words); the SDK's message says what a mutation may change.
    let why = operations
        .iter()
        .find_map(|o| mutation_path_problem(o.path()));
    let mutation = operations
        .into_iter()
        .fold(Mutation::none(), |mutation, operation| match operation {
            Operation::Add(path, value) => mutation.add(&path, value),
            Operation::Replace(path, value) => mutation.replace(&path, value),
            Operation::Remove(path) => mutation.remove(&path),
        });
    let mutation = warnings.into_iter().fold(mutation, Mutation::warning);
    // The SDK would refuse it when sending, as a "plugin bug"; said here,
    // the message names the command that answered.
    if let Some(problem) = mutation.to_json()["error"].as_str() {
        let problem = problem.strip_prefix("plugin bug: ").unwrap_or(problem);
        let why = why.map(|why| format!("; {why}")).unwrap_or_default();
        return Err(format!("{program} answered: {problem}{why}"));
    }
    Ok(mutation)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn exited(code: i32, stdout: &str, stderr: &str) -> Finished {
        Finished::Exited {
            code: Some(code),
            stdout: stdout.as_bytes().to_vec(),
            stderr_tail: stderr.to_owned(),
        }
    }

    fn mutate(code: i32, stdout: &str) -> Result<serde_json::Value, String> {
        mutation("./mutate.sh", exited(code, stdout, "no sidecar image")).map(|m| m.to_json())
    }

    #[test]
    fn a_mutation_comes_from_a_json_patch_or_nothing() {
        assert_eq!(mutate(0, " \n").unwrap()["patch"], json!([]));
        let out = json!({
            "patch": [{"op": "add", "path": "/spec/template/spec/volumes/-", "value": {"name": "backup"}},
                      {"op": "replace", "path": "/metadata/labels/backup", "value": "yes"},
                      {"op": "remove", "path": "/metadata/annotations/old"}],
            "warnings": ["added a backup volume"],
        });
        let got = mutate(0, &out.to_string()).unwrap();
        assert_eq!(got["patch"], out["patch"]);
        assert_eq!(got["warnings"], out["warnings"]);
    }

    #[test]
    fn a_mutation_outside_the_allowed_paths_fails_naming_the_command() {
        for path in [
            "/status/x",
            "/metadata/name",
            "/metadata/labels",
            "/metadata/labels/kplug.io~1plugin",
        ] {
            let patch = json!({"patch": [
                {"op": "add", "path": "/spec/replicas", "value": 2},
                {"op": "add", "path": path, "value": "x"},
            ]});
            let e = mutate(0, &patch.to_string()).unwrap_err();
            // The SDK's words (every SDK's), the path, and the shared
            // rule's reason for that path.
            let why = mutation_path_problem(path).unwrap();
            assert_eq!(
                e,
                format!(
                    "./mutate.sh answered: a mutation may only change /spec and single labels and annotations, \
                     not kplug.io/ ones; add {path:?} is outside them; {why}"
                ),
            );
        }
    }

    #[test]
    fn a_failed_run_or_an_unusable_answer_fails_the_call() {
        assert_eq!(
            mutate(1, "").unwrap_err(),
            "./mutate.sh exited 1: no sidecar image"
        );
        let e = mutate(0, r#"{"patch": [{"op": "copy", "path": "/spec/a"}]}"#).unwrap_err();
        assert!(e.contains(r#"patch[0] has op "copy""#), "{e}");
        let e = mutate(0, r#"{"patch": [], "allowed": true}"#).unwrap_err();
        assert!(e.contains("not a mutation") && e.contains("allowed"), "{e}");
        let e = mutation(
            "./mutate.sh",
            Finished::TimedOut {
                after: Duration::from_secs(2),
                stderr_tail: String::new(),
            },
        )
        .unwrap_err();
        assert!(e.contains("ran past its timeout of 2 s"), "{e}");
    }
}
