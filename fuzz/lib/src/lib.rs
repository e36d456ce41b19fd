//! Shared pieces of kplug's fuzz targets (`fuzz_targets/*.rs`): building
//! what a plugin sends from fuzz input, the fixtures it is checked against,
//! and the invariants every accepted message must satisfy.
//!
//! A violated invariant panics: that is what libFuzzer reports as a crash.

use std::sync::LazyLock;

use arbitrary::Arbitrary;
use k8s_openapi::api::core::v1::ObjectReference;
use kplug_operator::status::{Checked, reference};
use kplug_proto::v1::{self, Outcome};
use kplug_proto::{RESERVED_CONDITION_TYPES, RESERVED_STATUS_KEYS, limits};
use kube::core::DynamicObject;
use serde_json::{Value, json};

pub mod confinement;
pub mod targets;

/// Whether `KPLUG_FUZZ_DEBUG` is set: the targets then print what they
/// built from each input (run a target's binary on one file to see it).
pub static DEBUG: LazyLock<bool> = LazyLock::new(|| std::env::var_os("KPLUG_FUZZ_DEBUG").is_some());

/// Prints `what` when [`DEBUG`] is set.
pub fn debug(what: &dyn std::fmt::Debug) {
    if *DEBUG {
        eprintln!("{what:?}");
    }
}

/// Longest string a [`Text::Repeat`] builds: past every bound it tests
/// (names 63 bytes, versions 128, messages 1024 characters), small enough
/// to keep executions fast.
const MAX_REPEAT: usize = 2100;

/// A string built from fuzz input: a known interesting value, a repeated
/// character (to cross a length bound cheaply), a DNS-label-like string, or
/// raw UTF-8.
#[derive(Arbitrary, Debug, Clone)]
pub enum Text {
    /// `known[i % known.len()]` of the caller's dictionary.
    Known(u8),
    /// `ch` repeated `len` times (at most `MAX_REPEAT`), after `prefix`.
    Repeat {
        /// Comes first.
        prefix: String,
        /// The repeated character (multi-byte ones test character counts).
        ch: char,
        /// How many.
        len: u16,
    },
    /// Bytes mapped onto `[a-z0-9-]`.
    Label(Vec<u8>),
    /// As given.
    Raw(String),
}

impl Text {
    /// The string, `known` being the caller's dictionary.
    pub fn build(&self, known: &[&str]) -> String {
        match self {
            Self::Known(i) if !known.is_empty() => known[usize::from(*i) % known.len()].to_owned(),
            Self::Known(_) => String::new(),
            Self::Repeat { prefix, ch, len } => {
                let mut s = prefix.clone();
                s.extend(std::iter::repeat_n(
                    *ch,
                    usize::from(*len) % (MAX_REPEAT + 1),
                ));
                s
            }
            Self::Label(bytes) => bytes
                .iter()
                .map(|b| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789-"[usize::from(*b) % 37]))
                .collect(),
            Self::Raw(s) => s.clone(),
        }
    }
}

/// `template` cycled to `count` items when `count` is larger (to cross a
/// count bound with little input), else as is. `unique` makes the copies'
/// strings distinct through `rename`.
pub fn cycle<T: Clone>(
    template: &[T],
    count: usize,
    unique: bool,
    rename: impl Fn(&mut T, usize),
) -> Vec<T> {
    if template.is_empty() || count <= template.len() {
        return template.to_vec();
    }
    (0..count)
        .map(|i| {
            let mut item = template[i % template.len()].clone();
            if unique && i >= template.len() {
                rename(&mut item, i);
            }
            item
        })
        .collect()
}

// --- heartbeat ----------------------------------------------------------------

/// Dictionary for heartbeat strings.
pub const HEARTBEAT_WORDS: &[&str] = &[
    "postgresql",
    "pg-2",
    "a",
    "",
    "-",
    "-pg",
    "pg-",
    "Postgres",
    "pg_sql",
    "kplug.v1",
    "kplug.v2",
    "KPLUG.V1",
    "kplug.v1 ",
    "plugins/pg.sock",
    "1.0.0",
    "0f8fad5b-d9cb-469f-a165-70867728950e",
    "myorg.org",
    "DatabaseTable",
    "PostgreSQL",
];

/// A heartbeat, from fuzz input.
#[derive(Arbitrary, Debug)]
pub struct HeartbeatInput {
    name: Text,
    version: Text,
    instance_id: Text,
    protocol: Text,
    socket: Text,
    offers: Vec<OfferInput>,
    /// Offers are cycled to `offer_count % 100` when that is more.
    offer_count: u8,
    capabilities: Vec<i32>,
}

#[derive(Arbitrary, Debug, Clone)]
struct OfferInput {
    base: Option<(Text, Text)>,
    implementation: Text,
    extensions: Vec<(Text, Text)>,
    /// Extensions are cycled to `extension_count % 33` when that is more.
    extension_count: u8,
}

impl HeartbeatInput {
    /// The protobuf message.
    pub fn build(&self) -> v1::HeartbeatRequest {
        let w = HEARTBEAT_WORDS;
        let group_kind = |(g, k): &(Text, Text)| v1::GroupKind {
            group: g.build(w),
            kind: k.build(w),
        };
        let offers: Vec<v1::Offer> = self
            .offers
            .iter()
            .map(|o| {
                let extensions: Vec<v1::GroupKind> = o.extensions.iter().map(group_kind).collect();
                v1::Offer {
                    children: Default::default(),
                    base: o.base.as_ref().map(group_kind),
                    implementation: o.implementation.build(w),
                    extensions: cycle(
                        &extensions,
                        usize::from(o.extension_count % 33),
                        true,
                        |gk, i| gk.kind.push_str(&i.to_string()),
                    ),
                }
            })
            .collect();
        v1::HeartbeatRequest {
            mutations: Default::default(),
            name: self.name.build(w),
            version: self.version.build(w),
            instance_id: self.instance_id.build(w),
            protocol: self.protocol.build(w),
            socket: self.socket.build(w),
            offers: cycle(
                &offers,
                usize::from(self.offer_count % 100),
                true,
                |o, i| {
                    o.implementation.push_str(&i.to_string());
                },
            ),
            capabilities: self.capabilities.clone(),
            // Hooks and call policies are not fuzzed yet.
            hooks: Vec::new(),
            call_policies: Vec::new(),
        }
    }
}

/// Checks `kplug_operator::refusal::heartbeat_refusal` on `req`: it never
/// panics, and a heartbeat it accepts satisfies every documented rule (a
/// DNS-label name, an instance id, the size bounds of
/// `kplug_proto::limits`, the protocol).
pub fn check_heartbeat(req: &v1::HeartbeatRequest) {
    let result = kplug_operator::refusal::heartbeat_refusal(req);
    debug(&result);
    match result {
        Err(reason) => assert!(!reason.is_empty(), "a refusal without a reason"),
        Ok(()) => {
            let name = &req.name;
            assert!(
                !name.is_empty() && name.len() <= limits::MAX_NAME_LEN,
                "accepted name of {} bytes: {name:?}",
                name.len()
            );
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !name.starts_with('-')
                    && !name.ends_with('-'),
                "accepted a name that is not a DNS label: {name:?}"
            );
            assert!(!req.instance_id.is_empty(), "accepted an empty instance_id");
            assert!(
                req.instance_id.len() <= limits::MAX_INSTANCE_ID_LEN,
                "accepted an instance_id of {} bytes",
                req.instance_id.len()
            );
            assert!(
                req.version.len() <= limits::MAX_VERSION_LEN,
                "accepted a version of {} bytes",
                req.version.len()
            );
            assert!(
                req.offers.len() <= limits::MAX_OFFERS,
                "accepted {} offers",
                req.offers.len()
            );
            for offer in &req.offers {
                assert!(
                    offer.extensions.len() <= limits::MAX_EXTENSIONS_PER_OFFER,
                    "accepted an offer with {} extensions",
                    offer.extensions.len()
                );
            }
            assert_eq!(
                req.protocol,
                kplug_proto::PROTOCOL,
                "accepted another protocol"
            );
        }
    }
}

// --- plugin responses ------------------------------------------------------

/// What a plugin's response is checked against: the base object, and the
/// objects that may be sent to it (a prefix of them is, per input).
pub struct Fixture {
    /// The base object.
    pub base: DynamicObject,
    /// Candidates for `sent`.
    pub objects: Vec<DynamicObject>,
}

fn object(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> DynamicObject {
    let mut metadata =
        json!({ "name": name, "uid": format!("uid-{kind}-{name}"), "resourceVersion": "7" });
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    serde_json::from_value(json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
        "spec": {},
    }))
    .expect("a valid DynamicObject")
}

/// The objects of every response target.
pub static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| Fixture {
    base: object("myorg.org/v1alpha1", "DatabaseTable", "users", Some("ns")),
    objects: vec![
        object(
            "myorg.org/v1alpha1",
            "DatabaseTablePostgreSqlExtension",
            "users",
            Some("ns"),
        ),
        object(
            "myorg.org/v1alpha1",
            "DatabaseTableMariaDbExtension",
            "users",
            Some("ns"),
        ),
        object(
            "myorg.org/v1beta1",
            "DatabaseTablePostgreSqlExtension",
            "orders",
            Some("ns"),
        ),
        object("v1", "ConfigMap", "users", Some("ns")),
        object("other.org/v1", "Thing", "users", None),
    ],
});

impl Fixture {
    /// The objects sent: all of them less `fewer % (len + 1)`.
    pub fn sent(&self, fewer: u8) -> &[DynamicObject] {
        let n = self.objects.len();
        &self.objects[..n - usize::from(fewer) % (n + 1)]
    }
}

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

/// `truncate_message`'s contract, stated independently.
fn check_message(what: &str, sent: &str, kept: &str) {
    let n = sent.chars().count();
    if n <= limits::MAX_MESSAGE_CHARS {
        assert_eq!(kept, sent, "{what}: a short message was changed");
    } else {
        assert_eq!(
            kept.chars().count(),
            limits::MAX_MESSAGE_CHARS,
            "{what}: a message of {n} characters was kept at {} characters",
            kept.chars().count()
        );
        assert!(kept.ends_with('…'), "{what}: a cut message has no ellipsis");
        let head: String = sent.chars().take(limits::MAX_MESSAGE_CHARS - 1).collect();
        assert!(
            kept.starts_with(&head),
            "{what}: a cut message is not a prefix"
        );
    }
}

fn check_common(
    checked: &Checked,
    outcome: i32,
    message: &str,
    retry_after: Option<prost_types::Duration>,
    events: &[v1::Event],
    base: &DynamicObject,
    sent: &[DynamicObject],
) {
    assert_ne!(
        checked.outcome,
        Outcome::Unspecified,
        "accepted OUTCOME_UNSPECIFIED"
    );
    assert_eq!(checked.outcome as i32, outcome, "the outcome changed");
    check_message("message", message, &checked.message);
    match (retry_after, checked.retry_after) {
        (None, None) => {}
        (Some(_), Some(d)) => assert!(
            (limits::MIN_RETRY_AFTER..=limits::MAX_RETRY_AFTER).contains(&d),
            "retry_after {d:?} is outside its bounds"
        ),
        (sent, kept) => panic!("retry_after {sent:?} became {kept:?}"),
    }
    assert!(
        checked.events.len() <= limits::MAX_EVENTS,
        "accepted {} events",
        checked.events.len()
    );
    assert_eq!(checked.events.len(), events.len(), "events were dropped");
    let allowed: Vec<ObjectReference> = std::iter::once(base).chain(sent).map(reference).collect();
    for (event, sent_event) in checked.events.iter().zip(events) {
        check_message("event message", &sent_event.message, &event.message);
        assert!(!event.reason.is_empty(), "an event without a reason");
        assert!(
            allowed.contains(&event.regarding),
            "an event about an object the plugin was not sent: {:?} (from {:?})",
            event.regarding,
            sent_event.regarding
        );
    }
}

/// Checks `check_reconcile` on `resp`: it never panics, and a response it
/// accepts satisfies every bound and rule (see the crate's README).
pub fn check_reconcile(resp: &v1::ReconcileResponse, base: &DynamicObject, sent: &[DynamicObject]) {
    let result = kplug_operator::status::check_reconcile(resp.clone(), base, sent);
    debug(&result.as_ref().map(|_| "accepted"));
    let Ok(checked) = result else {
        return;
    };
    check_common(
        &checked,
        resp.outcome,
        &resp.message,
        resp.retry_after,
        &resp.events,
        base,
        sent,
    );
    match (&checked.status, resp.status.is_empty()) {
        (None, true) => {}
        (Some(status), false) => {
            for key in RESERVED_STATUS_KEYS {
                assert!(
                    !status.contains_key(key),
                    "accepted a status with the operator's key {key:?}"
                );
            }
            let parsed: Value =
                serde_json::from_slice(&resp.status).expect("an accepted status is valid JSON");
            assert_eq!(parsed, Value::Object(status.clone()), "the status changed");
        }
        (kept, _) => panic!("a status of {} bytes became {kept:?}", resp.status.len()),
    }
    assert_eq!(
        checked.extension_statuses.len(),
        resp.extension_statuses.len(),
        "extension statuses were dropped"
    );
    for (obj, _) in &checked.extension_statuses {
        assert!(
            sent.contains(obj),
            "a status for an object the plugin was not sent: {:?}",
            reference(obj)
        );
    }
    let conditions = &checked.conditions;
    assert!(
        conditions.len() <= limits::MAX_CONDITIONS,
        "accepted {} conditions",
        conditions.len()
    );
    assert_eq!(
        conditions.len(),
        resp.conditions.len(),
        "conditions were dropped"
    );
    let mut types = std::collections::HashSet::new();
    for (c, sent_c) in conditions.iter().zip(&resp.conditions) {
        assert!(!c.type_.is_empty(), "a condition with an empty type");
        assert!(
            !RESERVED_CONDITION_TYPES.contains(&c.type_.as_str()),
            "accepted the operator's condition type {:?}",
            c.type_
        );
        assert!(types.insert(&c.type_), "condition type {:?} twice", c.type_);
        assert!(
            ["True", "False", "Unknown"].contains(&c.status),
            "condition status {:?}",
            c.status
        );
        assert!(!c.reason.is_empty(), "a condition without a reason");
        check_message("condition message", &sent_c.message, &c.message);
    }
}

/// Checks `check_finalize` on `resp` like [`check_reconcile`].
pub fn check_finalize(resp: &v1::FinalizeResponse, base: &DynamicObject, sent: &[DynamicObject]) {
    let result = kplug_operator::status::check_finalize(resp.clone(), base, sent);
    debug(&result.as_ref().map(|_| "accepted"));
    let Ok(checked) = result else {
        return;
    };
    check_common(
        &checked,
        resp.outcome,
        &resp.message,
        resp.retry_after,
        &resp.events,
        base,
        sent,
    );
    assert!(
        checked.status.is_none(),
        "a Finalize response with a status"
    );
    assert!(
        checked.extension_statuses.is_empty(),
        "a Finalize response with extension statuses"
    );
    assert!(
        checked.conditions.is_empty(),
        "a Finalize response with conditions"
    );
}
