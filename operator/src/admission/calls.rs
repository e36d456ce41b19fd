//! The plugins' calls in one review: `Validate` of every plugin asked at
//! once, `Default` of each in order; a call that fails follows the failure
//! policy (the plugin's own, else `--webhook-failure-policy`).

use std::sync::Arc;

use futures::future::join_all;
use kplug_proto::limits::{MAX_FIELD_ERRORS, MAX_WARNINGS};
use kplug_proto::v1::{
    Call, DefaultRequest, FailurePolicy as Declared, Operation, ValidateRequest, ValidateResponse,
};
use serde_json::Value;

use super::asked::Ask;
use super::config::FailurePolicy;
use super::outcome::{Answer, Outcome, Part, Subject};
use super::patch::{self, Composed};
use super::respond::{self, PluginFieldError};
use super::review::{Reviewer, Webhook};
use crate::metrics::CallOutcome;
use crate::plugin::{CallError, PluginInstance};

/// A plugin's call that failed (no answer, or an answer that broke the
/// protocol).
struct Failure {
    plugin: String,
    message: String,
}

/// What the plugins' answers add up to so far.
#[derive(Default)]
struct Tally {
    parts: Vec<(String, Part)>,
    warnings: Vec<String>,
}

impl Reviewer {
    /// Asks every plugin of `asks` to `Validate` the object, at once.
    pub(super) async fn validate(
        &self,
        subject: &Subject,
        operation: Operation,
        object: &Value,
        old_object: Vec<u8>,
        asks: &[Ask],
    ) -> Outcome {
        let object = serde_json::to_vec(object).unwrap_or_default();
        let answers = self
            .ask_validate(operation, &object, &old_object, asks)
            .await;
        let mut tally = Tally::default();
        let mut errors = Vec::new();
        let mut refusals = Vec::new();
        for (ask, answer) in asks.iter().zip(answers) {
            match answer {
                Ok(answer) => {
                    tally.warned(&ask.plugin, &answer.warnings);
                    let part = if answer.errors.is_empty() {
                        Part::Allowed
                    } else {
                        Part::Invalid
                    };
                    tally.parts.push((ask.plugin.clone(), part));
                    errors.extend(answer.errors.into_iter().map(|error| PluginFieldError {
                        plugin: ask.plugin.clone(),
                        error,
                    }));
                }
                Err(failure) => {
                    refusals.extend(self.on_failure(
                        Webhook::Validating,
                        subject,
                        &failure,
                        &mut tally,
                    ));
                }
            }
        }
        let Tally { parts, warnings } = tally;
        let answer = if !errors.is_empty() {
            Answer::Invalid { errors, warnings }
        } else if !refusals.is_empty() {
            Answer::Unavailable { refusals, warnings }
        } else {
            Answer::Allowed {
                warnings,
                patch: None,
            }
        };
        Outcome::Asked { parts, answer }
    }

    /// The `Validate` calls, at once: the plugins do not see each other's
    /// verdicts.
    async fn ask_validate(
        &self,
        operation: Operation,
        object: &[u8],
        old_object: &[u8],
        asks: &[Ask],
    ) -> Vec<Result<ValidateResponse, Failure>> {
        join_all(asks.iter().map(|ask| {
            let request = ValidateRequest {
                implementation: ask.implementation.clone(),
                operation: operation as i32,
                object: object.to_vec(),
                old_object: old_object.to_vec(),
            };
            async move {
                let instance = self.instance(&ask.plugin)?;
                let answer = instance
                    .validate(request)
                    .await
                    .map_err(|e| failure(&ask.plugin, &e))?;
                check_counts(
                    &instance,
                    "Validate",
                    answer.errors.len(),
                    answer.warnings.len(),
                )?;
                instance.count_answer("Validate", CallOutcome::Ok);
                Ok(answer)
            }
        }))
        .await
    }

    /// Asks each plugin of `asks` to `Default` the object, in order: each
    /// defaults it as the ones before it left it, so the patches compose.
    pub(super) async fn default(
        &self,
        subject: &Subject,
        operation: Operation,
        mut object: Value,
        old_object: Vec<u8>,
        asks: &[Ask],
    ) -> Outcome {
        let mut composed = Composed::default();
        let mut tally = Tally::default();
        for ask in asks {
            let request = DefaultRequest {
                implementation: ask.implementation.clone(),
                operation: operation as i32,
                object: serde_json::to_vec(&object).unwrap_or_default(),
                old_object: old_object.clone(),
            };
            match self
                .ask_default(ask, request, &mut composed, &mut object)
                .await
            {
                Ok((unchanged, plugin_warnings)) => {
                    let part = if unchanged {
                        Part::Allowed
                    } else {
                        Part::Defaulted
                    };
                    tally.parts.push((ask.plugin.clone(), part));
                    tally.warned(&ask.plugin, &plugin_warnings);
                }
                Err(failure) => {
                    if let Some(refusal) =
                        self.on_failure(Webhook::Mutating, subject, &failure, &mut tally)
                    {
                        let Tally { parts, warnings } = tally;
                        let refusals = vec![refusal];
                        let answer = Answer::Unavailable { refusals, warnings };
                        return Outcome::Asked { parts, answer };
                    }
                }
            }
        }
        let Tally { parts, warnings } = tally;
        let patch = composed.into_patch();
        Outcome::Asked {
            parts,
            answer: Answer::Allowed { warnings, patch },
        }
    }

    /// One `Default` call, its patch applied to `object`: whether the patch
    /// was empty, and the plugin's warnings.
    async fn ask_default(
        &self,
        ask: &Ask,
        request: DefaultRequest,
        composed: &mut Composed,
        object: &mut Value,
    ) -> Result<(bool, Vec<String>), Failure> {
        let instance = self.instance(&ask.plugin)?;
        let answer = instance
            .default(request)
            .await
            .map_err(|e| failure(&ask.plugin, &e))?;
        check_counts(&instance, "Default", 0, answer.warnings.len())?;
        let unchanged = patch::decode(&answer.patch)
            .and_then(|p| composed.apply(object, p).map(|()| answer.patch.is_empty()))
            .map_err(|why| invalid(&instance, "Default", why))?;
        instance.count_answer("Default", CallOutcome::Ok);
        Ok((unchanged, answer.warnings))
    }

    fn instance(&self, plugin: &str) -> Result<Arc<PluginInstance>, Failure> {
        self.registry.get(plugin).ok_or_else(|| {
            failure(
                plugin,
                &CallError::Gone {
                    plugin: plugin.to_owned(),
                },
            )
        })
    }

    /// The failure policy for `plugin`'s `call`: its own, else the flag.
    fn policy(&self, plugin: &str, call: Call) -> FailurePolicy {
        let declared = self
            .registry
            .instances()
            .into_iter()
            .find(|p| p.name() == plugin)
            .map_or(Declared::Unspecified, |p| p.policies().failure_policy(call));
        match declared {
            Declared::Fail => FailurePolicy::Fail,
            Declared::Ignore => FailurePolicy::Ignore,
            Declared::Unspecified => self.failure_policy,
        }
    }

    /// Applies the failure policy to `failure`, and records the plugin's
    /// part: `Some(message)` to refuse; otherwise a warning is added.
    fn on_failure(
        &self,
        webhook: Webhook,
        subject: &Subject,
        failure: &Failure,
        tally: &mut Tally,
    ) -> Option<String> {
        match self.policy(&failure.plugin, webhook.call()) {
            FailurePolicy::Fail => {
                tally.parts.push((failure.plugin.clone(), Part::Failed));
                tracing::info!(webhook = webhook.label(), object = %subject.label, plugin = %failure.plugin, failure = %failure.message, "admission: a plugin failed; refused (failure policy Fail)");
                Some(format!(
                    "{} was not checked by plugin {} ({}): {}; refused under the failure policy Fail. Try again once the plugin answers",
                    subject.label,
                    failure.plugin,
                    webhook.verb(),
                    failure.message
                ))
            }
            FailurePolicy::Ignore => {
                tally.parts.push((failure.plugin.clone(), Part::Ignored));
                tracing::info!(webhook = webhook.label(), object = %subject.label, plugin = %failure.plugin, failure = %failure.message, "admission: a plugin failed; admitted (failure policy Ignore)");
                tally.warnings.push(respond::warning(
                    &failure.plugin,
                    &format!(
                        "{} failed ({}); admitted without it (failure policy Ignore)",
                        webhook.verb(),
                        failure.message
                    ),
                ));
                None
            }
        }
    }
}

impl Tally {
    /// Adds `plugin`'s warnings, each naming it.
    fn warned(&mut self, plugin: &str, warnings: &[String]) {
        self.warnings
            .extend(warnings.iter().map(|w| respond::warning(plugin, w)));
    }
}

fn failure(plugin: &str, error: &CallError) -> Failure {
    Failure {
        plugin: plugin.to_owned(),
        message: error.to_string(),
    }
}

/// An answer that broke the protocol, counted as `invalid`.
fn invalid(instance: &PluginInstance, call: &'static str, why: String) -> Failure {
    instance.count_answer(call, CallOutcome::Invalid);
    Failure {
        plugin: instance.name().to_owned(),
        message: format!(
            "plugin {} answered {call} with an invalid response: {why}",
            instance.name()
        ),
    }
}

/// The bounds on field errors and warnings per answer.
fn check_counts(
    instance: &PluginInstance,
    call: &'static str,
    errors: usize,
    warnings: usize,
) -> Result<(), Failure> {
    if errors > MAX_FIELD_ERRORS {
        return Err(invalid(
            instance,
            call,
            format!("{errors} field errors, more than the {MAX_FIELD_ERRORS} allowed"),
        ));
    }
    if warnings > MAX_WARNINGS {
        return Err(invalid(
            instance,
            call,
            format!("{warnings} warnings, more than the {MAX_WARNINGS} allowed"),
        ));
    }
    Ok(())
}
