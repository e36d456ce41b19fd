//! One admission review: whether the object is this operator's to judge,
//! which plugins are asked ([`super::asked`]), their calls
//! ([`super::calls`]), and what it came to ([`super::outcome`]); see the
//! [module docs](super).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kplug_proto::v1::{Call, Capability, GroupKind, Operation};
use kube::core::DynamicObject;
use kube::core::admission::{self, AdmissionRequest, AdmissionResponse, AdmissionReview};

use super::asked::{Ask, Asked, Role, asked, display};
use super::config::{FailurePolicy, NoPlugin};
use super::outcome::{self, Outcome, Subject};
use crate::extensions::AllowList;
use crate::metrics::AdmissionMetrics;
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
    /// The `webhook` label of `kplug_admission_total`.
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Validating => "validating",
            Self::Mutating => "mutating",
        }
    }

    /// The call it makes.
    pub(super) fn call(self) -> Call {
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
    pub(super) fn verb(self) -> &'static str {
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
        let bad = |message| outcome::unreadable(webhook, &self.metrics, message);
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
            && self.watches(&request);
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

    /// The answer to `req`: admitted unasked when it is not this
    /// operator's to judge, else what [`Self::judge`] came to.
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
        if !self.watches(req) {
            return response;
        }
        let kind = GroupKind {
            group: req.kind.group.clone(),
            kind: req.kind.kind.clone(),
        };
        let Some(role) = self.role(&kind) else {
            // Not a kind this operator manages (a configuration written by
            // someone else): not this operator's to judge.
            return response;
        };
        let subject = subject(&kind, req);
        self.judge(webhook, req, operation, role, &subject)
            .await
            .conclude(webhook, &subject, &self.metrics, response)
    }

    /// Whether `req`'s object is in a namespace the operator watches.
    fn watches(&self, req: &AdmissionRequest<DynamicObject>) -> bool {
        self.namespace
            .as_ref()
            .is_none_or(|ns| req.namespace.as_ref() == Some(ns))
    }

    /// What an object of `kind` is to the operator; `None`: not its own.
    fn role<'k>(&self, kind: &'k GroupKind) -> Option<Role<'k>> {
        if crate::plugin::same_kind(kind, &self.base) {
            Some(Role::Base)
        } else if self.extension_kinds.allows(&kind.group, &kind.kind) {
            Some(Role::Extension(kind))
        } else {
            None
        }
    }

    /// Judges an object this operator manages: the operator's own checks,
    /// then the plugins'.
    async fn judge(
        &self,
        webhook: Webhook,
        req: &AdmissionRequest<DynamicObject>,
        operation: Operation,
        role: Role<'_>,
        subject: &Subject,
    ) -> Outcome {
        let Some(object) = &req.object else {
            return Outcome::BadRequest(format!(
                "the review of {} carries no object",
                subject.label
            ));
        };
        if let (Webhook::Validating, Role::Base) = (webhook, &role)
            && let Some(message) =
                super::choice::refusal(req, object, &self.settings.field_manager, &subject.label)
        {
            return Outcome::Denied(message);
        }
        if let (Operation::Update, Some(old)) = (operation, &req.old_object)
            && (object.metadata.deletion_timestamp.is_some() || !judged_changed(object, old))
        {
            // Nothing a plugin judges changed, or the object is going away
            // (only finalizers can still change): asking could only block
            // a deletion, or the operator's own work, for a spec that was
            // admitted before.
            return Outcome::Unchanged;
        }
        let object_json = match serde_json::to_value(object) {
            Ok(v) => v,
            Err(e) => {
                return Outcome::BadRequest(format!(
                    "the object {} cannot be encoded as JSON: {e}",
                    subject.label
                ));
            }
        };
        let old_json = req
            .old_object
            .as_ref()
            .and_then(|o| serde_json::to_vec(o).ok())
            .unwrap_or_default();
        let asks = match self.to_ask(webhook, req, object, role) {
            Ok(asks) => asks,
            Err(outcome) => return outcome,
        };
        match webhook {
            Webhook::Mutating => {
                self.default(subject, operation, object_json, old_json, &asks)
                    .await
            }
            Webhook::Validating => {
                self.validate(subject, operation, &object_json, old_json, &asks)
                    .await
            }
        }
    }

    /// The plugins to ask about `object`, or what the review comes to when
    /// there are none.
    fn to_ask(
        &self,
        webhook: Webhook,
        req: &AdmissionRequest<DynamicObject>,
        object: &DynamicObject,
        role: Role<'_>,
    ) -> Result<Vec<Ask>, Outcome> {
        let capability = webhook.capability();
        let asks = match asked(
            &self.registry,
            &self.base,
            &self.settings,
            role,
            object,
            req.old_object.as_ref(),
            capability,
        ) {
            Asked::Plugins(asks) => self.that_would_answer(asks, capability),
            Asked::NoPlugin(why) => {
                let policy = self.no_plugin;
                return Err(Outcome::NoPlugin { policy, why });
            }
        };
        if asks.is_empty() {
            return Err(Outcome::NoneAsks);
        }
        Ok(asks)
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
}

/// `DatabaseTable team-a/users`, for messages.
fn subject(kind: &GroupKind, req: &AdmissionRequest<DynamicObject>) -> Subject {
    let namespace = req
        .namespace
        .as_deref()
        .map(|ns| format!("{ns}/"))
        .unwrap_or_default();
    let name = if req.name.is_empty() {
        "(name to be generated)"
    } else {
        &req.name
    };
    Subject {
        group: kind.group.clone(),
        kind: kind.kind.clone(),
        name: req.name.clone(),
        label: format!("{} {namespace}{name}", display(kind)),
    }
}

/// Whether an update changes what plugins validate and default: the spec,
/// the labels or the annotations.
fn judged_changed(object: &DynamicObject, old: &DynamicObject) -> bool {
    object.data.get("spec") != old.data.get("spec")
        || object.metadata.labels != old.metadata.labels
        || object.metadata.annotations != old.metadata.annotations
}
