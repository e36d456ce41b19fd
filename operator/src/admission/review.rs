//! One admission review: which plugins are asked, their calls, and the
//! answer (see the [module docs](super)).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use kplug_proto::limits::{MAX_FIELD_ERRORS, MAX_WARNINGS};
use kplug_proto::v1::{
    Call, Capability, DefaultRequest, FailurePolicy as Declared, GroupKind, Operation,
    ValidateRequest,
};
use kube::core::DynamicObject;
use kube::core::admission::{self, AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::Value;

use super::asked::{Ask, Asked, Role, asked, display};
use super::config::{FailurePolicy, NoPlugin};
use super::patch::{self, Composed};
use super::respond::{self, PluginFieldError};
use crate::extensions::AllowList;
use crate::metrics::{AdmissionMetrics, CallOutcome};
use crate::plugin::{CallError, PluginInstance};
use crate::reconcile::Settings;
use crate::registry::Registry;

/// The two webhooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Webhook {
    /// `/validate`: `Validate`.
    Validating,
    /// `/mutate`: `Default`.
    Mutating,
}

impl Webhook {
    fn label(self) -> &'static str {
        match self {
            Self::Validating => "validating",
            Self::Mutating => "mutating",
        }
    }

    fn call(self) -> Call {
        match self {
            Self::Validating => Call::Validate,
            Self::Mutating => Call::Default,
        }
    }

    fn capability(self) -> Capability {
        match self {
            Self::Validating => Capability::Validate,
            Self::Mutating => Capability::Default,
        }
    }

    /// The call, for messages.
    fn verb(self) -> &'static str {
        match self {
            Self::Validating => "Validate",
            Self::Mutating => "Default",
        }
    }
}

/// What the webhooks need to answer.
#[derive(Clone, Debug)]
pub(crate) struct Reviewer {
    pub(crate) registry: Registry,
    /// The managed kind.
    pub(crate) base: GroupKind,
    pub(crate) settings: Settings,
    /// The namespace the operator watches (none: all).
    pub(crate) namespace: Option<String>,
    pub(crate) extension_kinds: AllowList,
    pub(crate) failure_policy: FailurePolicy,
    pub(crate) no_plugin: NoPlugin,
    pub(crate) metrics: AdmissionMetrics,
    /// The capabilities each plugin last registered with. A plugin that
    /// went away is no longer in the registry, but an object bound to it
    /// still names it: this tells whether it would have been asked at all
    /// (SQLite, which only validates, is not "down" for defaulting).
    pub(crate) known: Arc<Mutex<HashMap<String, Vec<Capability>>>>,
}

/// A request the webhook cannot read: answered 400 with `0`.
#[derive(Debug)]
pub(crate) struct BadRequest(pub(crate) String);

/// The object under review, for messages: `DatabaseTable team-a/users`.
struct Subject {
    group: String,
    kind: String,
    name: String,
    label: String,
}

/// A plugin's call that failed (no answer, or an answer that broke the
/// protocol).
struct Failure {
    plugin: String,
    message: String,
}

impl Reviewer {
    /// Answers the body of one `AdmissionReview` request.
    ///
    /// # Errors
    /// [`BadRequest`] when the body is not an `AdmissionReview` with a
    /// request.
    pub(crate) async fn review(
        &self,
        webhook: Webhook,
        body: &[u8],
    ) -> Result<AdmissionReview<DynamicObject>, BadRequest> {
        let bad = |message: String| {
            self.metrics.count(webhook.label(), "", "bad_request");
            tracing::info!(webhook = webhook.label(), %message, "admission: bad request");
            BadRequest(message)
        };
        let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).map_err(|e| {
            bad(format!(
                "the body is not an admission.k8s.io/v1 AdmissionReview whose object is a Kubernetes object: {e}"
            ))
        })?;
        let request: AdmissionRequest<DynamicObject> = review
            .try_into()
            .map_err(|_| bad("the AdmissionReview carries no request".into()))?;
        let response = self.admit(webhook, &request).await;
        // Both webhooks see the object; one warning is enough, and only for
        // an object of the managed kind in a namespace it watches.
        let managed = request.kind.group == self.base.group
            && request.kind.kind == self.base.kind
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| request.namespace.as_ref() == Some(ns));
        let response = match webhook {
            Webhook::Validating if managed => super::preference::warn_if_not_offered(
                &request,
                &self.settings,
                &self.registry.ever_offered(&self.base),
                response,
            ),
            _ => response,
        };
        Ok(response.into_review())
    }

    async fn admit(
        &self,
        webhook: Webhook,
        req: &AdmissionRequest<DynamicObject>,
    ) -> AdmissionResponse {
        let response = AdmissionResponse::from(req);
        let operation = match req.operation {
            admission::Operation::Create => Operation::Create,
            admission::Operation::Update => Operation::Update,
            // Not registered for; nothing to ask.
            _ => return response,
        };
        // Only objects this operator manages: configurations written by
        // hand may match more namespaces than it watches.
        if self
            .namespace
            .as_ref()
            .is_some_and(|ns| req.namespace.as_ref() != Some(ns))
        {
            return response;
        }
        let kind = GroupKind {
            group: req.kind.group.clone(),
            kind: req.kind.kind.clone(),
        };
        let role = if crate::plugin::same_kind(&kind, &self.base) {
            Role::Base
        } else if self.extension_kinds.allows(&kind.group, &kind.kind) {
            Role::Extension(&kind)
        } else {
            // Not a kind this operator manages (a configuration written by
            // someone else): not this operator's to judge.
            return response;
        };
        let subject = Subject {
            group: kind.group.clone(),
            kind: kind.kind.clone(),
            name: req.name.clone(),
            label: format!(
                "{} {}{}",
                display(&kind),
                req.namespace
                    .as_deref()
                    .map(|ns| format!("{ns}/"))
                    .unwrap_or_default(),
                if req.name.is_empty() {
                    "(name to be generated)"
                } else {
                    &req.name
                }
            ),
        };
        let Some(object) = &req.object else {
            self.metrics.count(webhook.label(), "", "bad_request");
            return respond::refused(
                response,
                400,
                "BadRequest",
                &format!("the review of {} carries no object", subject.label),
                vec![],
            );
        };
        if let (Webhook::Validating, Role::Base) = (webhook, &role)
            && let Some(message) =
                super::choice::refusal(req, object, &self.settings.field_manager, &subject.label)
        {
            self.metrics.count(webhook.label(), "", "denied");
            return respond::refused(response, 403, "Forbidden", &message, vec![]);
        }
        if let (Operation::Update, Some(old)) = (operation, &req.old_object)
            && (object.metadata.deletion_timestamp.is_some() || !judged_changed(object, old))
        {
            // Nothing a plugin judges changed (the operator's own finalizer
            // patch, another controller's metadata), or the object is going
            // away (only finalizers can still change): asking could only
            // block a deletion, or the operator's own work, for a spec that
            // was admitted before.
            self.metrics.count(webhook.label(), "", "allowed");
            tracing::debug!(webhook = webhook.label(), object = %subject.label, "admission: spec, labels and annotations unchanged (or being deleted); allowed");
            return response;
        }
        let object_json = match serde_json::to_value(object) {
            Ok(v) => v,
            Err(e) => {
                self.metrics.count(webhook.label(), "", "bad_request");
                return respond::refused(
                    response,
                    400,
                    "BadRequest",
                    &format!(
                        "the object {} cannot be encoded as JSON: {e}",
                        subject.label
                    ),
                    vec![],
                );
            }
        };
        let old_json = req
            .old_object
            .as_ref()
            .and_then(|o| serde_json::to_vec(o).ok())
            .unwrap_or_default();
        let asks = match asked(
            &self.registry,
            &self.base,
            &self.settings,
            role,
            object,
            req.old_object.as_ref(),
            webhook.capability(),
        ) {
            Asked::Plugins(asks) => self.that_would_answer(asks, webhook.capability()),
            Asked::NoPlugin(why) => return self.no_plugin(webhook, response, &subject, &why),
        };
        if asks.is_empty() {
            self.metrics.count(webhook.label(), "", "allowed");
            tracing::debug!(webhook = webhook.label(), object = %subject.label, "admission: no plugin asks to be asked; allowed");
            return response;
        }
        match webhook {
            Webhook::Mutating => {
                self.default(response, &subject, operation, object_json, old_json, asks)
                    .await
            }
            Webhook::Validating => {
                self.validate(response, &subject, operation, object_json, old_json, asks)
                    .await
            }
        }
    }

    /// `asks` without the plugins that are gone and did not advertise
    /// `capability` when they were last registered.
    fn that_would_answer(&self, mut asks: Vec<Ask>, capability: Capability) -> Vec<Ask> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        for instance in self.registry.instances() {
            known.insert(instance.name().to_owned(), instance.capabilities().to_vec());
        }
        asks.retain(|ask| {
            known
                .get(&ask.plugin)
                .is_none_or(|capabilities| capabilities.contains(&capability))
        });
        asks
    }

    fn no_plugin(
        &self,
        webhook: Webhook,
        response: AdmissionResponse,
        subject: &Subject,
        why: &str,
    ) -> AdmissionResponse {
        match self.no_plugin {
            NoPlugin::Allow => {
                self.metrics.count(webhook.label(), "", "no_plugin_allowed");
                tracing::debug!(webhook = webhook.label(), object = %subject.label, why, "admission: no plugin asked; allowed");
                // Both webhooks see the object; one warning is enough.
                let warnings = match webhook {
                    Webhook::Validating => vec![respond::cut(format!(
                        "no plugin was asked about {}: {why}; admitted unchecked (--webhook-no-plugin allow)",
                        subject.label
                    ))],
                    Webhook::Mutating => vec![],
                };
                respond::allowed(response, warnings, None).unwrap_or_else(|e| {
                    respond::refused(
                        AdmissionResponse::invalid(&e),
                        500,
                        "InternalError",
                        &e,
                        vec![],
                    )
                })
            }
            NoPlugin::Deny => {
                self.metrics.count(webhook.label(), "", "no_plugin_denied");
                let message = format!(
                    "no plugin could be asked about {}: {why}; refused (--webhook-no-plugin deny). Try again once a plugin serving it is registered",
                    subject.label
                );
                tracing::info!(webhook = webhook.label(), object = %subject.label, %message, "admission: refused");
                respond::refused(response, 403, "Forbidden", &message, vec![])
            }
        }
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

    /// Applies the failure policy to `failure`: `Some(message)` to refuse;
    /// otherwise a warning is added.
    fn on_failure(
        &self,
        webhook: Webhook,
        subject: &Subject,
        failure: &Failure,
        warnings: &mut Vec<String>,
    ) -> Option<String> {
        match self.policy(&failure.plugin, webhook.call()) {
            FailurePolicy::Fail => {
                self.metrics
                    .count(webhook.label(), &failure.plugin, "failed");
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
                self.metrics
                    .count(webhook.label(), &failure.plugin, "ignored");
                tracing::info!(webhook = webhook.label(), object = %subject.label, plugin = %failure.plugin, failure = %failure.message, "admission: a plugin failed; admitted (failure policy Ignore)");
                warnings.push(respond::warning(
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

    async fn validate(
        &self,
        response: AdmissionResponse,
        subject: &Subject,
        operation: Operation,
        object: Value,
        old_object: Vec<u8>,
        asks: Vec<Ask>,
    ) -> AdmissionResponse {
        let object = serde_json::to_vec(&object).unwrap_or_default();
        // The plugins do not see each other's verdicts: ask them at once.
        let answers = join_all(asks.iter().map(|ask| {
            let request = ValidateRequest {
                implementation: ask.implementation.clone(),
                operation: operation as i32,
                object: object.clone(),
                old_object: old_object.clone(),
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
                Ok::<_, Failure>(answer)
            }
        }))
        .await;
        let mut warnings = Vec::new();
        let mut errors = Vec::new();
        let mut refusals = Vec::new();
        for (ask, answer) in asks.iter().zip(answers) {
            match answer {
                Ok(answer) => {
                    warnings.extend(
                        answer
                            .warnings
                            .iter()
                            .map(|w| respond::warning(&ask.plugin, w)),
                    );
                    let outcome = if answer.errors.is_empty() {
                        "allowed"
                    } else {
                        "invalid"
                    };
                    self.metrics.count("validating", &ask.plugin, outcome);
                    errors.extend(answer.errors.into_iter().map(|error| PluginFieldError {
                        plugin: ask.plugin.clone(),
                        error,
                    }));
                }
                Err(failure) => {
                    if let Some(refusal) =
                        self.on_failure(Webhook::Validating, subject, &failure, &mut warnings)
                    {
                        refusals.push(refusal);
                    }
                }
            }
        }
        if !errors.is_empty() {
            let response = respond::invalid(
                response,
                &subject.group,
                &subject.kind,
                &subject.name,
                &errors,
                warnings,
            );
            tracing::info!(webhook = "validating", object = %subject.label, refusal = %response.result.message, "admission: refused for field errors");
            return response;
        }
        if !refusals.is_empty() {
            return respond::refused(
                response,
                503,
                "ServiceUnavailable",
                &refusals.join("; "),
                warnings,
            );
        }
        tracing::debug!(webhook = "validating", object = %subject.label, plugins = asks.len(), "admission: allowed");
        respond::allowed(response, warnings, None).unwrap_or_else(|e| {
            respond::refused(
                AdmissionResponse::invalid(&e),
                500,
                "InternalError",
                &e,
                vec![],
            )
        })
    }

    async fn default(
        &self,
        response: AdmissionResponse,
        subject: &Subject,
        operation: Operation,
        mut object: Value,
        old_object: Vec<u8>,
        asks: Vec<Ask>,
    ) -> AdmissionResponse {
        let mut composed = Composed::default();
        let mut warnings = Vec::new();
        // In order: each plugin defaults the object as the ones before it
        // left it, so the patches compose.
        for ask in &asks {
            let request = DefaultRequest {
                implementation: ask.implementation.clone(),
                operation: operation as i32,
                object: serde_json::to_vec(&object).unwrap_or_default(),
                old_object: old_object.clone(),
            };
            let answered = async {
                let instance = self.instance(&ask.plugin)?;
                let answer = instance
                    .default(request)
                    .await
                    .map_err(|e| failure(&ask.plugin, &e))?;
                check_counts(&instance, "Default", 0, answer.warnings.len())?;
                let patch = patch::decode(&answer.patch)
                    .and_then(|p| {
                        composed
                            .apply(&mut object, p)
                            .map(|()| answer.patch.is_empty())
                    })
                    .map_err(|why| invalid(&instance, "Default", why))?;
                instance.count_answer("Default", CallOutcome::Ok);
                Ok::<_, Failure>((patch, answer.warnings))
            }
            .await;
            match answered {
                Ok((unchanged, plugin_warnings)) => {
                    let outcome = if unchanged { "allowed" } else { "defaulted" };
                    self.metrics.count("mutating", &ask.plugin, outcome);
                    warnings.extend(
                        plugin_warnings
                            .iter()
                            .map(|w| respond::warning(&ask.plugin, w)),
                    );
                }
                Err(failure) => {
                    if let Some(refusal) =
                        self.on_failure(Webhook::Mutating, subject, &failure, &mut warnings)
                    {
                        return respond::refused(
                            response,
                            503,
                            "ServiceUnavailable",
                            &refusal,
                            warnings,
                        );
                    }
                }
            }
        }
        let patch = composed.into_patch();
        tracing::debug!(webhook = "mutating", object = %subject.label, patched = patch.is_some(), "admission: allowed");
        respond::allowed(response, warnings, patch).unwrap_or_else(|e| {
            respond::refused(
                AdmissionResponse::invalid(&e),
                500,
                "InternalError",
                &e,
                vec![],
            )
        })
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
}

/// Whether an update changes what plugins validate and default: the spec,
/// the labels or the annotations.
fn judged_changed(object: &DynamicObject, old: &DynamicObject) -> bool {
    object.data.get("spec") != old.data.get("spec")
        || object.metadata.labels != old.metadata.labels
        || object.metadata.annotations != old.metadata.annotations
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
