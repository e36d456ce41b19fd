//! Plugin responses (Reconcile, Finalize) from fuzz input.

use arbitrary::Arbitrary;
use kplug_checks::response::reference;
use kplug_proto::v1::{self, Outcome};
use kube::core::DynamicObject;

use crate::{Fixture, Text, cycle};

/// Dictionary for the strings of responses (condition types, reasons,
/// messages, object references, status keys).
pub const RESPONSE_WORDS: &[&str] = &[
    "Ready",
    "PluginAvailable",
    "ExtensionsResolved",
    "Reconciled",
    "TableReady",
    "ready",
    "Ready ",
    "",
    "Created",
    "myorg.org/v1alpha1",
    "myorg.org/v1",
    "myorg.org",
    "v1",
    "DatabaseTable",
    "DatabaseTablePostgreSqlExtension",
    "ConfigMap",
    "ns",
    "users",
    "orders",
    "é",
];

/// An object reference, from fuzz input: most variants start from a
/// fixture object, so that matches and near misses are both common.
#[derive(Arbitrary, Debug, Clone)]
pub enum RefInput {
    /// The `i`th object sent (the base when none is).
    Sent(u8),
    /// The base object.
    Base,
    /// Any fixture object, sent or not.
    Fixture(u8),
    /// A fixture object (or the base, for the last index) with one field
    /// changed.
    Changed(u8, Change),
    /// Anything.
    Raw {
        /// `api_version`.
        api_version: Text,
        /// `kind`.
        kind: Text,
        /// `namespace`.
        namespace: Text,
        /// `name`.
        name: Text,
    },
    /// The default (empty) reference.
    Empty,
}

/// How [`RefInput::Changed`] changes a reference.
#[derive(Arbitrary, Debug, Clone)]
pub enum Change {
    /// Another version of the same group: still the same object.
    Version,
    /// No version: `myorg.org` (no slash, so read as the core group).
    GroupOnly,
    /// Another group.
    Group,
    /// The core group.
    CoreGroup,
    /// Another namespace.
    Namespace,
    /// No namespace.
    NoNamespace,
    /// Another name.
    Name,
    /// Another kind, differing only in case.
    KindCase,
    /// Any field set to a [`Text`].
    Field(u8, Text),
}

fn to_ref(obj: &DynamicObject) -> v1::ObjectRef {
    let r = reference(obj);
    v1::ObjectRef {
        api_version: r.api_version.unwrap_or_default(),
        kind: r.kind.unwrap_or_default(),
        namespace: r.namespace.unwrap_or_default(),
        name: r.name.unwrap_or_default(),
    }
}

impl RefInput {
    /// The reference.
    pub fn build(&self, fixture: &Fixture, sent: &[DynamicObject]) -> v1::ObjectRef {
        let w = RESPONSE_WORDS;
        let pick = |i: u8| {
            let all = fixture.objects.len() + 1;
            fixture
                .objects
                .get(usize::from(i) % all)
                .unwrap_or(&fixture.base)
        };
        match self {
            Self::Sent(_) if sent.is_empty() => to_ref(&fixture.base),
            Self::Sent(i) => to_ref(&sent[usize::from(*i) % sent.len()]),
            Self::Base => to_ref(&fixture.base),
            Self::Fixture(i) => to_ref(pick(*i)),
            Self::Changed(i, change) => {
                let mut r = to_ref(pick(*i));
                match change {
                    Change::Version => {
                        r.api_version = match r.api_version.rsplit_once('/') {
                            Some((g, _)) => format!("{g}/v9"),
                            None => "v9".into(),
                        }
                    }
                    Change::GroupOnly => {
                        r.api_version = r
                            .api_version
                            .rsplit_once('/')
                            .map_or(String::new(), |(g, _)| g.to_owned())
                    }
                    Change::Group => r.api_version = "evil.org/v1alpha1".into(),
                    Change::CoreGroup => r.api_version = "v1".into(),
                    Change::Namespace => r.namespace = "other".into(),
                    Change::NoNamespace => r.namespace.clear(),
                    Change::Name => r.name.push('x'),
                    Change::KindCase => r.kind = r.kind.to_lowercase(),
                    Change::Field(f, t) => {
                        let v = t.build(w);
                        match f % 4 {
                            0 => r.api_version = v,
                            1 => r.kind = v,
                            2 => r.namespace = v,
                            _ => r.name = v,
                        }
                    }
                }
                r
            }
            Self::Raw {
                api_version,
                kind,
                namespace,
                name,
            } => v1::ObjectRef {
                api_version: api_version.build(w),
                kind: kind.build(w),
                namespace: namespace.build(w),
                name: name.build(w),
            },
            Self::Empty => v1::ObjectRef::default(),
        }
    }
}

/// An `Outcome`, from fuzz input.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum OutcomeInput {
    /// OUTCOME_OK.
    Ok,
    /// OUTCOME_RETRY.
    Retry,
    /// OUTCOME_FAILED.
    Failed,
    /// OUTCOME_UNSPECIFIED.
    Unspecified,
    /// Any number.
    Raw(i32),
}

impl OutcomeInput {
    /// The wire value.
    pub fn build(self) -> i32 {
        match self {
            Self::Ok => Outcome::Ok as i32,
            Self::Retry => Outcome::Retry as i32,
            Self::Failed => Outcome::Failed as i32,
            Self::Unspecified => Outcome::Unspecified as i32,
            Self::Raw(i) => i,
        }
    }
}

/// A `google.protobuf.Duration`, from fuzz input: edge values of each
/// field (around zero, the bounds, the extremes), or any.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum DurationInput {
    /// `SECONDS[s % len]`, `NANOS[n % len]`.
    Edges(u8, u8),
    /// As given.
    Raw(i64, i32),
}

impl DurationInput {
    const SECONDS: [i64; 10] = [
        i64::MIN,
        i64::MIN + 1,
        -1,
        0,
        1,
        3600,
        3601,
        315_576_000_000,
        i64::MAX - 1,
        i64::MAX,
    ];
    const NANOS: [i32; 9] = [
        i32::MIN,
        -1_000_000_000,
        -999_999_999,
        -1,
        0,
        1,
        999_999_999,
        1_000_000_000,
        i32::MAX,
    ];

    /// The message.
    pub fn build(self) -> prost_types::Duration {
        match self {
            Self::Edges(s, n) => prost_types::Duration {
                seconds: Self::SECONDS[usize::from(s) % Self::SECONDS.len()],
                nanos: Self::NANOS[usize::from(n) % Self::NANOS.len()],
            },
            Self::Raw(seconds, nanos) => prost_types::Duration { seconds, nanos },
        }
    }
}

/// A condition, from fuzz input.
#[derive(Arbitrary, Debug, Clone)]
pub struct ConditionInput {
    type_: Text,
    status: i32,
    reason: Text,
    message: Text,
}

/// An Event, from fuzz input.
#[derive(Arbitrary, Debug, Clone)]
pub struct EventInput {
    type_: i32,
    reason: Text,
    message: Text,
    regarding: Option<RefInput>,
}

/// The parts of a response besides its JSON, from fuzz input.
#[derive(Arbitrary, Debug)]
pub struct ResponseInput {
    outcome: OutcomeInput,
    /// How many fixture objects are *not* sent ([`Fixture::sent`]).
    pub unsent: u8,
    retry_after: Option<DurationInput>,
    message: Text,
    /// The target of the `i`th extension status (the `i`th sent object
    /// when there are fewer).
    targets: Vec<RefInput>,
    conditions: Vec<ConditionInput>,
    /// Conditions are cycled to `condition_count % 40` when that is more.
    condition_count: u8,
    /// Whether cycled copies get distinct types.
    unique_conditions: bool,
    events: Vec<EventInput>,
    /// Events are cycled to `event_count % 20` when that is more.
    event_count: u8,
}

impl ResponseInput {
    fn retry_after(&self) -> Option<prost_types::Duration> {
        self.retry_after.map(DurationInput::build)
    }

    fn events(&self, fixture: &Fixture, sent: &[DynamicObject]) -> Vec<v1::Event> {
        let w = RESPONSE_WORDS;
        let events: Vec<v1::Event> = self
            .events
            .iter()
            .map(|e| v1::Event {
                r#type: e.type_,
                reason: e.reason.build(w),
                message: e.message.build(w),
                regarding: e.regarding.as_ref().map(|r| r.build(fixture, sent)),
            })
            .collect();
        cycle(
            &events,
            usize::from(self.event_count % 20),
            false,
            |_, _| {},
        )
    }

    /// A Reconcile response: `status` is the base's status JSON,
    /// `extension_statuses` the extensions' (their targets from the input).
    pub fn reconcile(
        &self,
        fixture: &Fixture,
        sent: &[DynamicObject],
        status: &[u8],
        extension_statuses: &[&[u8]],
    ) -> v1::ReconcileResponse {
        let w = RESPONSE_WORDS;
        let conditions: Vec<v1::Condition> = self
            .conditions
            .iter()
            .map(|c| v1::Condition {
                r#type: c.type_.build(w),
                status: c.status,
                reason: c.reason.build(w),
                message: c.message.build(w),
            })
            .collect();
        v1::ReconcileResponse {
            children: Default::default(),
            outcome: self.outcome.build(),
            message: self.message.build(w),
            retry_after: self.retry_after(),
            status: status.to_vec(),
            extension_statuses: extension_statuses
                .iter()
                .enumerate()
                .map(|(i, json)| v1::ObjectStatus {
                    target: Some(
                        self.targets
                            .get(i)
                            .cloned()
                            .unwrap_or(RefInput::Sent(i as u8))
                            .build(fixture, sent),
                    ),
                    status: json.to_vec(),
                })
                .collect(),
            conditions: cycle(
                &conditions,
                usize::from(self.condition_count % 40),
                self.unique_conditions,
                |c, i| c.r#type.push_str(&i.to_string()),
            ),
            events: self.events(fixture, sent),
        }
    }

    /// A Finalize response.
    pub fn finalize(&self, fixture: &Fixture, sent: &[DynamicObject]) -> v1::FinalizeResponse {
        v1::FinalizeResponse {
            children: Default::default(),
            outcome: self.outcome.build(),
            message: self.message.build(RESPONSE_WORDS),
            retry_after: self.retry_after(),
            events: self.events(fixture, sent),
        }
    }
}
