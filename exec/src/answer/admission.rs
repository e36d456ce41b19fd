//! The answer of a validate or default command (see the
//! [module docs](super)).

use kplug_sidecar::{Defaults, Validation};
use serde::Deserialize;
use serde_json::Value;

use super::patch::{Operation, PatchAnswer};
use super::{EXIT_RETRY, how, stdout_answer, timed_out, with_tail};
use crate::command::Finished;

/// The JSON a validate command prints.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidationAnswer {
    #[serde(default)]
    errors: Vec<FieldErrorAnswer>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FieldErrorAnswer {
    #[serde(default)]
    path: String,
    #[serde(default)]
    value: Option<Value>,
    message: String,
}

/// The verdict of a validate command, or why it could not decide (the
/// call then fails, and the failure policy decides).
///
/// # Errors
/// The message of the call's failure: a timeout, a signal, exit 75 or 126
/// and above, an answer that cannot be used.
pub fn validation(program: &str, finished: Finished) -> Result<Validation, String> {
    match finished {
        Finished::TimedOut { after, stderr_tail } => Err(timed_out(program, after, &stderr_tail)),
        Finished::Exited {
            code: Some(0),
            stdout,
            ..
        } => verdict(program, &stdout),
        Finished::Exited {
            code: Some(EXIT_RETRY),
            stderr_tail,
            ..
        } => Err(with_tail(
            format!("{program} could not decide (exit {EXIT_RETRY})"),
            &stderr_tail,
        )),
        Finished::Exited {
            code: Some(code @ 1..=125),
            stderr_tail,
            ..
        } => {
            let message = if stderr_tail.is_empty() {
                format!("refused by {program} (exit {code}, nothing on stderr)")
            } else {
                stderr_tail
            };
            Ok(Validation::allowed().error_at("", message))
        }
        Finished::Exited {
            code: None,
            stderr_tail,
            ..
        } => Err(with_tail(
            format!("{program} was killed by a signal"),
            &stderr_tail,
        )),
        Finished::Exited {
            code: Some(code),
            stderr_tail,
            ..
        } => Err(with_tail(
            format!(
                "{program} exited {code} (126 and above: it, or a program it ran, could not be run or died of a signal)"
            ),
            &stderr_tail,
        )),
    }
}

/// The verdict a validate command that exited 0 printed on `stdout`
/// (nothing: allowed).
fn verdict(program: &str, stdout: &[u8]) -> Result<Validation, String> {
    let Some(answer) = stdout_answer::<ValidationAnswer>(stdout, |e| {
        format!(
            "{program} exited 0 but its stdout is not a validation ({e}); print {{\"errors\": [{{\"path\", \"value\", \"message\"}}], \"warnings\": []}}, or nothing and let the exit code answer"
        )
    })?
    else {
        return Ok(Validation::allowed());
    };
    let mut verdict = Validation::allowed();
    for e in answer.errors {
        verdict = match e.value {
            Some(value) => verdict.error(&e.path, value, e.message),
            None => verdict.error_at(&e.path, e.message),
        };
    }
    Ok(answer
        .warnings
        .into_iter()
        .fold(verdict, Validation::warning))
}

/// The defaults a default command answered, or why the call fails (the
/// failure policy then decides).
///
/// # Errors
/// The message of the call's failure: a timeout, a signal, an exit other
/// than 0, an answer that cannot be used.
pub fn defaults(program: &str, finished: Finished) -> Result<Defaults, String> {
    match finished {
        Finished::TimedOut { after, stderr_tail } => Err(timed_out(program, after, &stderr_tail)),
        Finished::Exited {
            code: Some(0),
            stdout,
            ..
        } => {
            let Some(mut answer) = stdout_answer::<PatchAnswer>(&stdout, |e| {
                format!(
                    "{program} exited 0 but its stdout is not defaults ({e}); print {{\"patch\": [{{\"op\": \"add\", \"path\": \"/spec/x\", \"value\": 1}}], \"warnings\": []}}, or nothing"
                )
            })?
            else {
                return Ok(Defaults::none());
            };
            let warnings = std::mem::take(&mut answer.warnings);
            let defaults = answer.operations(program)?.into_iter().fold(
                Defaults::none(),
                |defaults, operation| match operation {
                    Operation::Add(path, value) => defaults.add(&path, value),
                    Operation::Replace(path, value) => defaults.replace(&path, value),
                    Operation::Remove(path) => defaults.remove(&path),
                },
            );
            Ok(warnings.into_iter().fold(defaults, Defaults::warning))
        }
        Finished::Exited {
            code, stderr_tail, ..
        } => Err(with_tail(format!("{program} {}", how(code)), &stderr_tail)),
    }
}
