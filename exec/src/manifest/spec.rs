//! The parts of a manifest: the offers, and the command of each call with
//! its timeout, concurrency and environment (see the [module docs](super)).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::Phase;

/// The largest `concurrency` allowed.
const MAX_CONCURRENCY: usize = 64;

/// A group and kind.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupKind {
    /// The API group.
    pub group: String,
    /// The kind.
    pub kind: String,
}

/// A kind by `apiVersion` and kind, written as the operator's
/// `--child-kinds` and `--mutators` flags write it: `apps/v1/Deployment`,
/// or `v1/ConfigMap` for the core group.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct ApiKind {
    /// `apps/v1`, or `v1` for the core group.
    pub api_version: String,
    /// `Deployment`.
    pub kind: String,
}

impl TryFrom<String> for ApiKind {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let parts: Vec<&str> = text.split('/').collect();
        if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.trim().is_empty()) {
            return Err(format!(
                "{text:?} is not <apiVersion>/<Kind>; write apps/v1/Deployment, or v1/ConfigMap for the core group"
            ));
        }
        let (api_version, kind) = text.rsplit_once('/').expect("two parts or more");
        Ok(Self {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        })
    }
}

impl std::fmt::Display for ApiKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.api_version, self.kind)
    }
}

/// One implementation offered for one base kind.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfferSpec {
    /// The base kind.
    pub base: GroupKind,
    /// The implementation's name.
    pub implementation: String,
    /// The extension kinds it reads.
    #[serde(default)]
    pub extensions: Vec<GroupKind>,
    /// The kinds of Kubernetes objects it manages for each base object
    /// (its children): the reconcile command's answer may carry them, and
    /// its requests carry the observed ones.
    #[serde(default)]
    pub children: Vec<ApiKind>,
}

/// How to run one call.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CommandSpec {
    /// The program and its arguments (no shell: use `[sh, -c, "..."]` for
    /// one). A relative program path with a `/` is relative to the
    /// manifest's directory, which is also the working directory.
    pub command: Vec<String>,
    /// How long a run may take before it is killed, with its whole process
    /// group (default 30, at most 600: the longest the operator waits).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: f64,
    /// How many runs of this command at once; more calls wait (default 4).
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// What admission does when a `validate` or `default` command fails (a
/// timeout, a crash, an answer that cannot be used).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum FailurePolicy {
    /// Refuse the object.
    Fail,
    /// Admit it, with a warning.
    Ignore,
}

/// How to run `validate` or `default`: a command, with a failure policy.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AdmissionSpec {
    /// As [`CommandSpec::command`].
    pub command: Vec<String>,
    /// How long a run may take (default 5, at most 10: the API server waits
    /// for the operator's webhook, and the operator for the plugin, at most
    /// that long).
    #[serde(default = "default_admission_timeout")]
    pub timeout_seconds: f64,
    /// As [`CommandSpec::concurrency`].
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// As [`CommandSpec::env`].
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Refuse (`Fail`) or admit (`Ignore`) when the command fails; unset,
    /// the operator's `--webhook-failure-policy` decides.
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
}

/// How to run `mutate`: a command, with the kinds it patches.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MutateSpec {
    /// The kinds of objects it patches (`apps/v1/Deployment`); the
    /// operator sends it only those its `--mutators` flag allows it.
    pub kinds: Vec<ApiKind>,
    /// As [`CommandSpec::command`].
    pub command: Vec<String>,
    /// As [`CommandSpec::timeout_seconds`] (default 30, at most 600).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: f64,
    /// As [`CommandSpec::concurrency`].
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// As [`CommandSpec::env`].
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// How a hook's result affects the step it surrounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Behaviour {
    /// The operator waits; anything but OK stops the step.
    SyncEnforce,
    /// The operator waits; a failure is a Warning Event, the step goes on.
    SyncBypass,
    /// Queued, never waited for; a failure is a Warning Event.
    Async,
}

impl Behaviour {
    /// As the manifest spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SyncEnforce => "sync-enforce",
            Self::SyncBypass => "sync-bypass",
            Self::Async => "async",
        }
    }
}

/// A hook: when the operator calls it, and the command that answers.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HookSpec {
    /// Its name: a DNS label, unique within the plugin.
    pub name: String,
    /// The base kind whose objects it runs for (any implementation's).
    pub base: GroupKind,
    /// When it runs.
    pub phase: Phase,
    /// What its result does to the step.
    pub behaviour: Behaviour,
    /// Hooks of one phase and kind run by increasing order (default 0).
    #[serde(default)]
    pub order: i32,
    /// As [`CommandSpec::command`].
    pub command: Vec<String>,
    /// As [`CommandSpec::timeout_seconds`].
    #[serde(default = "default_timeout")]
    pub timeout_seconds: f64,
    /// As [`CommandSpec::concurrency`].
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// As [`CommandSpec::env`].
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

fn default_timeout() -> f64 {
    30.0
}

fn default_admission_timeout() -> f64 {
    5.0
}

fn default_concurrency() -> usize {
    4
}

impl CommandSpec {
    /// The timeout as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout_seconds)
    }

    /// `./x` and `dir/x` are relative to the manifest; `x` is looked up on
    /// the PATH.
    pub(super) fn resolve(&mut self, dir: &Path) {
        let program = &self.command[0];
        if program.contains('/') && Path::new(program).is_relative() {
            let relative = program.trim_start_matches("./");
            self.command[0] = dir.join(relative).display().to_string();
        }
    }

    /// The checks of one command; `at` names it in the manifest
    /// (`reconcile`, `hooks[0] (backup)`), `max` is the longest timeout.
    pub(super) fn check(&self, at: &str, max: Duration) -> Result<(), String> {
        if self.command.first().is_none_or(String::is_empty) {
            return Err(format!(
                "{at}.command: give the program to run, e.g. [./script.sh]"
            ));
        }
        let max = max.as_secs_f64();
        if !(self.timeout_seconds > 0.0 && self.timeout_seconds <= max) {
            return Err(format!(
                "{at}.timeoutSeconds is {}; it must be more than 0 and at most {max} (the longest the operator waits for this call)",
                self.timeout_seconds
            ));
        }
        if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            return Err(format!(
                "{at}.concurrency is {}; it must be from 1 to {MAX_CONCURRENCY}",
                self.concurrency
            ));
        }
        Ok(())
    }
}

impl AdmissionSpec {
    /// The command to run.
    pub fn command_spec(&self) -> CommandSpec {
        CommandSpec {
            command: self.command.clone(),
            timeout_seconds: self.timeout_seconds,
            concurrency: self.concurrency,
            env: self.env.clone(),
        }
    }
}

impl MutateSpec {
    /// The command to run.
    pub fn command_spec(&self) -> CommandSpec {
        CommandSpec {
            command: self.command.clone(),
            timeout_seconds: self.timeout_seconds,
            concurrency: self.concurrency,
            env: self.env.clone(),
        }
    }
}

impl HookSpec {
    /// The command to run.
    pub fn command_spec(&self) -> CommandSpec {
        CommandSpec {
            command: self.command.clone(),
            timeout_seconds: self.timeout_seconds,
            concurrency: self.concurrency,
            env: self.env.clone(),
        }
    }
}
