//! Hooks and call policies: what a plugin declares in [`crate::PluginInfo`]
//! beyond its offers, and the request a hook gets.

use std::time::Duration;

use kplug_proto::v1::{self, GroupKind, Outcome};

use crate::Error;
use crate::request::Request;

/// Where in an object's lifecycle a hook runs.
///
/// It deserializes from its [name](Phase::name) (`"before-reconcile"`, ...),
/// as kplug-exec's manifests spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Before the implementation's Reconcile.
    BeforeReconcile,
    /// After the implementation's Reconcile answered.
    AfterReconcile,
    /// Before the implementation's Finalize.
    BeforeFinalize,
    /// After the implementation's Finalize answered.
    AfterFinalize,
}

impl Phase {
    /// Its name in kebab-case: `"before-reconcile"`, `"after-reconcile"`,
    /// `"before-finalize"` or `"after-finalize"` (as it deserializes).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::BeforeReconcile => "before-reconcile",
            Self::AfterReconcile => "after-reconcile",
            Self::BeforeFinalize => "before-finalize",
            Self::AfterFinalize => "after-finalize",
        }
    }

    fn to_proto(self) -> v1::HookPhase {
        match self {
            Self::BeforeReconcile => v1::HookPhase::BeforeReconcile,
            Self::AfterReconcile => v1::HookPhase::AfterReconcile,
            Self::BeforeFinalize => v1::HookPhase::BeforeFinalize,
            Self::AfterFinalize => v1::HookPhase::AfterFinalize,
        }
    }

    fn from_proto(phase: i32) -> Option<Self> {
        match v1::HookPhase::try_from(phase).ok()? {
            v1::HookPhase::BeforeReconcile => Some(Self::BeforeReconcile),
            v1::HookPhase::AfterReconcile => Some(Self::AfterReconcile),
            v1::HookPhase::BeforeFinalize => Some(Self::BeforeFinalize),
            v1::HookPhase::AfterFinalize => Some(Self::AfterFinalize),
            v1::HookPhase::Unspecified => None,
        }
    }
}

/// How a hook's result affects the step it surrounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// The operator waits; anything but OK stops the step, and a condition
    /// names the hook.
    SyncEnforce,
    /// The operator waits; a failure becomes a Warning Event, and the step
    /// goes on.
    SyncBypass,
    /// Queued, never waited for; a failure becomes a Warning Event.
    Async,
}

impl Behaviour {
    fn to_proto(self) -> v1::HookBehaviour {
        match self {
            Self::SyncEnforce => v1::HookBehaviour::SyncEnforce,
            Self::SyncBypass => v1::HookBehaviour::SyncBypass,
            Self::Async => v1::HookBehaviour::Async,
        }
    }
}

/// A hook the plugin declares with [`crate::PluginInfo::hook`]: the
/// operator calls [`crate::Plugin::hook`] at `phase` for every object of
/// the base kind, whichever implementation reconciles it.
///
/// ```
/// use kplug_sidecar::{Behaviour, Hook, Phase};
/// let backup = Hook::new("backup", "myorg.org", "DatabaseTable", Phase::BeforeReconcile, Behaviour::SyncEnforce)
///     .order(-10);
/// ```
#[derive(Clone, Debug)]
pub struct Hook {
    name: String,
    base: GroupKind,
    phase: Phase,
    behaviour: Behaviour,
    order: i32,
}

impl Hook {
    /// A hook called `name` (a DNS label, unique within the plugin) for the
    /// base kind `kind` of API group `group`, with order 0.
    pub fn new(name: &str, group: &str, kind: &str, phase: Phase, behaviour: Behaviour) -> Self {
        Self {
            name: name.to_owned(),
            base: GroupKind {
                group: group.to_owned(),
                kind: kind.to_owned(),
            },
            phase,
            behaviour,
            order: 0,
        }
    }

    /// Hooks of one phase and kind run by increasing order, then by plugin
    /// name.
    pub fn order(mut self, order: i32) -> Self {
        self.order = order;
        self
    }

    /// The hook's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn to_proto(&self) -> v1::Hook {
        v1::Hook {
            name: self.name.clone(),
            base: Some(self.base.clone()),
            phase: self.phase.to_proto() as i32,
            behaviour: self.behaviour.to_proto() as i32,
            order: self.order,
        }
    }

    /// The checks the operator applies to a declared hook, made at
    /// start-up so that the author sees the mistake in their own process.
    pub(crate) fn validate(&self, plugin: &str, earlier: &[Hook]) -> Result<(), Error> {
        let problem = if kplug_proto::rules::validate_plugin_name(&self.name).is_err() {
            "its name must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
        } else if earlier.iter().any(|h| h.name == self.name) {
            "it is declared twice; hook names are unique within a plugin"
        } else if self.base.kind.is_empty() {
            "it names no base kind"
        } else {
            return Ok(());
        };
        Err(Error::Declaration(format!(
            "plugin {plugin} cannot start: hook {:?}: {problem}",
            self.name
        )))
    }
}

/// A call of the Plugin service, for [`CallPolicy`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `Reconcile`.
    Reconcile,
    /// `Finalize`.
    Finalize,
    /// `Validate`.
    Validate,
    /// `Default`.
    Default,
    /// `Hook` (every hook of the plugin).
    Hook,
    /// `Mutate`.
    Mutate,
}

impl Call {
    fn to_proto(self) -> v1::Call {
        match self {
            Self::Reconcile => v1::Call::Reconcile,
            Self::Finalize => v1::Call::Finalize,
            Self::Validate => v1::Call::Validate,
            Self::Default => v1::Call::Default,
            Self::Hook => v1::Call::Hook,
            Self::Mutate => v1::Call::Mutate,
        }
    }
}

/// What admission does when a `Validate` or `Default` call fails (an
/// error, a timeout, the plugin gone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Refuse the object.
    Fail,
    /// Admit it, with a warning.
    Ignore,
}

/// How the plugin asks to be called for one call, declared with
/// [`crate::PluginInfo::call_policy`]. The operator clamps the deadline to
/// its own bounds (by default at least 1 s, at most 10 min, and at most
/// 10 s for `Validate` and `Default`); a call past its deadline is reported
/// as a timeout, and the plugin stays registered.
///
/// ```
/// use std::time::Duration;
/// use kplug_sidecar::{Call, CallPolicy, FailurePolicy};
/// let reconcile = CallPolicy::new(Call::Reconcile).deadline(Duration::from_secs(120));
/// let validate = CallPolicy::new(Call::Validate)
///     .deadline(Duration::from_secs(2))
///     .failure_policy(FailurePolicy::Ignore);
/// ```
#[derive(Clone, Debug)]
pub struct CallPolicy {
    call: Call,
    deadline: Option<Duration>,
    failure_policy: Option<FailurePolicy>,
}

impl CallPolicy {
    /// The operator's defaults for `call`, until set.
    pub fn new(call: Call) -> Self {
        Self {
            call,
            deadline: None,
            failure_policy: None,
        }
    }

    /// How long the operator waits for the call (positive).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// For `Validate` and `Default`: refuse or admit when the call fails.
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = Some(policy);
        self
    }

    pub(crate) fn to_proto(&self) -> v1::CallPolicy {
        v1::CallPolicy {
            call: self.call.to_proto() as i32,
            deadline: self
                .deadline
                .and_then(|d| prost_types::Duration::try_from(d).ok()),
            failure_policy: match self.failure_policy {
                None => v1::FailurePolicy::Unspecified,
                Some(FailurePolicy::Fail) => v1::FailurePolicy::Fail,
                Some(FailurePolicy::Ignore) => v1::FailurePolicy::Ignore,
            } as i32,
        }
    }

    /// The operator's checks, at start-up: one policy per call, a positive
    /// deadline.
    pub(crate) fn validate(&self, plugin: &str, earlier: &[CallPolicy]) -> Result<(), Error> {
        let problem = if earlier.iter().any(|p| p.call == self.call) {
            "declared twice; one policy per call"
        } else if self.deadline.is_some_and(|d| d.is_zero()) {
            "the deadline must be positive"
        } else {
            return Ok(());
        };
        Err(Error::Declaration(format!(
            "plugin {plugin} cannot start: call policy for {:?}: {problem}",
            self.call
        )))
    }
}

/// A `Hook` request: which hook runs, and the objects the implementation
/// is (or was) sent.
#[derive(Clone, Debug)]
pub struct HookCall {
    hook: String,
    phase: Option<Phase>,
    request: Request,
    outcome: Option<Outcome>,
    message: String,
}

impl HookCall {
    pub(crate) fn decode(r: v1::HookRequest) -> Result<Self, Error> {
        let request = Request::decode(r.implementation, &r.object, &r.extensions, &[])?;
        let outcome = match Outcome::try_from(r.outcome) {
            Ok(Outcome::Unspecified) | Err(_) => None,
            Ok(outcome) => Some(outcome),
        };
        Ok(Self {
            hook: r.hook,
            phase: Phase::from_proto(r.phase),
            request,
            outcome,
            message: r.message,
        })
    }

    /// A call as the operator would make it, for a plugin's own unit tests
    /// (see [`Request::from_json`]); `outcome` and `message` are the
    /// implementation's, in after-* phases.
    pub fn new(
        hook: &str,
        phase: Phase,
        request: Request,
        outcome: Option<Outcome>,
        message: &str,
    ) -> Self {
        Self {
            hook: hook.to_owned(),
            phase: Some(phase),
            request,
            outcome,
            message: message.to_owned(),
        }
    }

    /// The hook's name, as declared.
    pub fn hook(&self) -> &str {
        &self.hook
    }

    /// The phase; `None` for one this SDK does not know (a newer operator).
    pub fn phase(&self) -> Option<Phase> {
        self.phase
    }

    /// The implementation chosen for the object, the object and the
    /// extensions the implementation is sent.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// In after-* phases: the outcome of the implementation's call (FAILED
    /// too when the call itself failed). `None` before.
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    /// In after-* phases: the message of the implementation's call.
    pub fn message(&self) -> &str {
        &self.message
    }
}
