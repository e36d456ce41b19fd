//! Why the registry refuses a heartbeat: the checks on what a plugin
//! declares (its heartbeat, and again its `GetInfo`), before anything is
//! dialled or stored.
//!
//! Refusals are answered (`accepted: false` with the reason), recorded as a
//! `PluginRefused` Warning Event, and counted by reason in
//! `kplug_registrations_refused_total`.

use std::path::PathBuf;

use kplug_proto::limits;
use kplug_proto::rules::{NameError, validate_plugin_name};
use kplug_proto::v1::{Call, CallPolicy, Capability, HeartbeatRequest, Hook, Mutation, Offer};

use crate::ownership::{Impostor, WrongUid};
use crate::plugin::CallError;

/// Why a heartbeat was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("plugin {0}: instance_id is empty; send a fresh random id per process start")]
    InstanceId(String),
    #[error("plugin {name}: {field} is {got}; at most {max} are accepted")]
    TooLarge {
        name: String,
        field: &'static str,
        got: usize,
        max: usize,
    },
    #[error(
        "plugin {name}: {registered} plugins are registered, the most this operator accepts (--max-plugins); remove one or raise the limit"
    )]
    TooMany { name: String, registered: usize },
    #[error("plugin {name}: protocol {got:?} is not supported; this operator speaks {want:?}")]
    Protocol {
        name: String,
        got: String,
        want: &'static str,
    },
    #[error("plugin {name}: {source}")]
    Socket {
        name: String,
        #[source]
        source: crate::confinement::ConfinementError,
    },
    #[error("plugin {name}: cannot dial {socket}: {message}")]
    Dial {
        name: String,
        socket: PathBuf,
        message: String,
    },
    #[error("plugin {name}: GetInfo failed: {source}")]
    GetInfo {
        name: String,
        #[source]
        source: CallError,
    },
    #[error(
        "plugin {name}: GetInfo answers name {got:?} and protocol {protocol:?}; it must match the heartbeat ({name:?}, {want:?})"
    )]
    Mismatch {
        name: String,
        got: String,
        protocol: String,
        want: &'static str,
    },
    #[error("plugin {name}: hook {hook}: {problem}")]
    Hook {
        name: String,
        /// The hook's name, quoted and cut for the message.
        hook: String,
        problem: &'static str,
    },
    #[error("plugin {name}: call policy for {call}: {problem}")]
    CallPolicy {
        name: String,
        /// The call, by its proto name (or number, when unknown).
        call: String,
        problem: &'static str,
    },
    #[error("plugin {name}: {problem}")]
    Capability { name: String, problem: String },
    #[error(
        "plugin {name}: GetInfo declares other {field} than the heartbeat; a heartbeat carries the full description, exactly as GetInfo"
    )]
    Disagree { name: String, field: &'static str },
    #[error(transparent)]
    Impostor(#[from] Impostor),
    #[error(transparent)]
    WrongUid(#[from] WrongUid),
    #[error(
        "plugin {0}: the registry could not read the caller's credentials (SO_PEERCRED); heartbeats are only accepted on registry.sock"
    )]
    NoCredentials(String),
    #[error(
        "plugin {name}: instance {instance_id} unregistered (it is shutting down); a restarted process heartbeats with a new instance id"
    )]
    Unregistered { name: String, instance_id: String },
}

impl Refusal {
    /// Whether the refusal is part of normal operation (a late heartbeat of
    /// an instance that unregistered), so not worth a Warning Event.
    pub(crate) fn is_expected(&self) -> bool {
        matches!(self, Self::Unregistered { .. })
    }

    /// A CamelCase code for the `reason` label of
    /// `kplug_registrations_refused_total`.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::Name(_) => "InvalidName",
            Self::InstanceId(_) => "InvalidInstanceId",
            Self::TooLarge { .. } => "TooLarge",
            Self::TooMany { .. } => "TooManyPlugins",
            Self::Protocol { .. } => "UnsupportedProtocol",
            Self::Socket { .. } => "SocketNotConfined",
            Self::Dial { .. } => "DialFailed",
            Self::GetInfo { .. } => "GetInfoFailed",
            Self::Mismatch { .. } | Self::Disagree { .. } => "GetInfoMismatch",
            Self::Hook { .. } => "InvalidHook",
            Self::CallPolicy { .. } => "InvalidCallPolicy",
            Self::Capability { .. } => "UnsupportedCapability",
            Self::Impostor(_) => "ImplementationOwned",
            Self::WrongUid(_) => "WrongUid",
            Self::NoCredentials(_) => "NoPeerCredentials",
            Self::Unregistered { .. } => "Unregistered",
        }
    }
}

/// Checks a heartbeat's own fields: name, instance id, sizes, protocol,
/// hooks and call policies. (Its socket is checked when it is dialled, its
/// offers' owners once `GetInfo` confirms them.)
pub(crate) fn check_heartbeat(req: &HeartbeatRequest) -> Result<(), Refusal> {
    validate_plugin_name(&req.name)?;
    if req.instance_id.is_empty() {
        return Err(Refusal::InstanceId(req.name.clone()));
    }
    if req.instance_id.len() > limits::MAX_INSTANCE_ID_LEN {
        return Err(Refusal::TooLarge {
            name: req.name.clone(),
            field: "instance_id (bytes)",
            got: req.instance_id.len(),
            max: limits::MAX_INSTANCE_ID_LEN,
        });
    }
    check_sizes(&req.name, &req.version, "", &req.offers)?;
    check_declarations(&req.name, &req.hooks, &req.call_policies)?;
    check_capabilities(&req.name, &req.capabilities, &req.offers)?;
    check_mutations(&req.name, &req.capabilities, &req.mutations)?;
    if req.protocol != kplug_proto::PROTOCOL {
        return Err(Refusal::Protocol {
            name: req.name.clone(),
            got: req.protocol.clone(),
            want: kplug_proto::PROTOCOL,
        });
    }
    Ok(())
}

/// The capabilities this operator supports, in the order of the proto: its
/// answer to every heartbeat lists them (`HeartbeatResponse.capabilities`).
pub(crate) const SUPPORTED: [Capability; 7] = [
    Capability::Reconcile,
    Capability::Finalize,
    Capability::Validate,
    Capability::Default,
    Capability::Hooks,
    Capability::Children,
    Capability::Mutate,
];

/// Refuses a plugin that declares a capability this operator does not
/// support (a newer plugin's, or one it knows and does not serve yet):
/// what a plugin declares is never silently ignored. Child kinds in an
/// offer go with `CAPABILITY_CHILDREN`.
pub(crate) fn check_capabilities(
    name: &str,
    capabilities: &[i32],
    offers: &[Offer],
) -> Result<(), Refusal> {
    let refuse = |problem: String| Refusal::Capability {
        name: name.to_owned(),
        problem,
    };
    let supported: Vec<String> = SUPPORTED
        .iter()
        .map(|c| c.as_str_name().to_owned())
        .collect();
    for &capability in capabilities {
        match Capability::try_from(capability) {
            // "Not a capability; ignored", as the proto says.
            Ok(Capability::Unspecified) => {}
            Ok(known) if SUPPORTED.contains(&known) => {}
            Ok(known) => {
                return Err(refuse(format!(
                    "it declares {}, which this operator does not support yet (it supports {}); run a newer operator, or leave the capability out",
                    known.as_str_name(),
                    supported.join(", ")
                )));
            }
            Err(_) => {
                return Err(refuse(format!(
                    "it declares capability {capability}, which this operator does not know (it supports {}); run a newer operator, or leave the capability out",
                    supported.join(", ")
                )));
            }
        }
    }
    let children = Capability::Children as i32;
    if let Some(offer) = offers.iter().find(|o| !o.children.is_empty())
        && !capabilities.contains(&children)
    {
        return Err(refuse(format!(
            "its offer {} declares child kinds without CAPABILITY_CHILDREN; declare the capability too",
            offer.implementation
        )));
    }
    Ok(())
}

/// The kinds a plugin declares it patches: each named, at most
/// [`limits::MAX_MUTATIONS`], and only with `CAPABILITY_MUTATE`.
pub(crate) fn check_mutations(
    name: &str,
    capabilities: &[i32],
    mutations: &[Mutation],
) -> Result<(), Refusal> {
    let refuse = |problem: String| Refusal::Capability {
        name: name.to_owned(),
        problem,
    };
    if mutations.len() > limits::MAX_MUTATIONS {
        return Err(Refusal::TooLarge {
            name: name.to_owned(),
            field: "mutations",
            got: mutations.len(),
            max: limits::MAX_MUTATIONS,
        });
    }
    if mutations.iter().any(|m| {
        m.kind
            .as_ref()
            .is_none_or(|k| k.kind.is_empty() || k.version.is_empty())
    }) {
        return Err(refuse(
            "a mutation names no kind; each names the group, version and kind it patches".into(),
        ));
    }
    if !mutations.is_empty() && !capabilities.contains(&(Capability::Mutate as i32)) {
        return Err(refuse(
            "it declares mutations without CAPABILITY_MUTATE; declare the capability too".into(),
        ));
    }
    Ok(())
}

/// [`check_heartbeat`], for fuzzing and kplug-conformance: the refusal as
/// the reason a plugin is sent.
///
/// # Errors
/// The reason the heartbeat would be refused.
#[doc(hidden)]
#[cfg_attr(
    not(any(feature = "fuzzing", feature = "conformance")),
    allow(dead_code)
)]
pub fn heartbeat_refusal(req: &HeartbeatRequest) -> Result<(), String> {
    check_heartbeat(req).map_err(|r| r.to_string())
}

/// The bounds of `kplug_proto::limits` on what a plugin declares, in its
/// heartbeat and again in `GetInfo`.
pub(crate) fn check_sizes(
    name: &str,
    version: &str,
    description: &str,
    offers: &[Offer],
) -> Result<(), Refusal> {
    let too_large = |field: &'static str, got: usize, max: usize| {
        (got > max).then(|| Refusal::TooLarge {
            name: name.to_owned(),
            field,
            got,
            max,
        })
    };
    let checks = [
        too_large("version (bytes)", version.len(), limits::MAX_VERSION_LEN),
        too_large(
            "description (bytes)",
            description.len(),
            limits::MAX_DESCRIPTION_LEN,
        ),
        too_large("offers", offers.len(), limits::MAX_OFFERS),
        too_large(
            "extensions of one offer",
            offers.iter().map(|o| o.extensions.len()).max().unwrap_or(0),
            limits::MAX_EXTENSIONS_PER_OFFER,
        ),
        too_large(
            "child kinds of one offer",
            offers.iter().map(|o| o.children.len()).max().unwrap_or(0),
            limits::MAX_CHILD_KINDS_PER_OFFER,
        ),
    ];
    match checks.into_iter().flatten().next() {
        Some(refusal) => Err(refusal),
        None => Ok(()),
    }
}

/// The checks on the hooks and call policies a plugin declares, in its
/// heartbeat and again in `GetInfo`: bounded counts; hooks with a unique
/// DNS-label name, a base kind, a phase and a behaviour; at most one
/// policy per call, each naming its call, with a positive deadline when it
/// sets one.
///
/// Phases, behaviours and calls this operator does not know (a newer
/// plugin) are not refused: such a hook is never called, such a policy
/// never applies. Only the zero value, a field left unset, is refused.
pub(crate) fn check_declarations(
    name: &str,
    hooks: &[Hook],
    policies: &[CallPolicy],
) -> Result<(), Refusal> {
    let too_large = |field: &'static str, got: usize, max: usize| Refusal::TooLarge {
        name: name.to_owned(),
        field,
        got,
        max,
    };
    if hooks.len() > limits::MAX_HOOKS {
        return Err(too_large("hooks", hooks.len(), limits::MAX_HOOKS));
    }
    if policies.len() > limits::MAX_CALL_POLICIES {
        return Err(too_large(
            "call_policies",
            policies.len(),
            limits::MAX_CALL_POLICIES,
        ));
    }
    for (i, hook) in hooks.iter().enumerate() {
        let refuse = |problem| Refusal::Hook {
            name: name.to_owned(),
            hook: shown(&hook.name),
            problem,
        };
        // A hook's name is a DNS label for the same reasons as a plugin's:
        // it becomes part of conditions, Events and metric labels.
        if validate_plugin_name(&hook.name).is_err() {
            return Err(refuse(
                "the name must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters",
            ));
        }
        if hooks[..i].iter().any(|h| h.name == hook.name) {
            return Err(refuse(
                "declared twice; hook names are unique within a plugin",
            ));
        }
        if hook.base.as_ref().is_none_or(|b| b.kind.is_empty()) {
            return Err(refuse("no base kind; a hook names the kind it is for"));
        }
        if hook.phase == 0 {
            return Err(refuse(
                "no phase; choose before-reconcile, after-reconcile, before-finalize or after-finalize",
            ));
        }
        if hook.behaviour == 0 {
            return Err(refuse(
                "no behaviour; choose sync-enforce, sync-bypass or async",
            ));
        }
    }
    for (i, policy) in policies.iter().enumerate() {
        let refuse = |problem| Refusal::CallPolicy {
            name: name.to_owned(),
            call: Call::try_from(policy.call).map_or_else(
                |_| format!("call {}", policy.call),
                |c| c.as_str_name().to_owned(),
            ),
            problem,
        };
        if policy.call == 0 {
            return Err(refuse("no call; a policy names the call it is for"));
        }
        if policies[..i].iter().any(|p| p.call == policy.call) {
            return Err(refuse("declared twice; one policy per call"));
        }
        if let Some(deadline) = &policy.deadline {
            let positive = deadline.seconds >= 0
                && (0..1_000_000_000).contains(&deadline.nanos)
                && (deadline.seconds > 0 || deadline.nanos > 0);
            if !positive {
                return Err(refuse(
                    "the deadline must be positive (leave it unset for the operator's default)",
                ));
            }
        }
    }
    Ok(())
}

/// `name` quoted for a message, cut after 80 characters: a refused name can
/// be as long as the registry's message bound.
fn shown(name: &str) -> String {
    const SHOWN: usize = 80;
    match name.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{:?}…", &name[..cut]),
        None => format!("{name:?}"),
    }
}

/// Refuses a `GetInfo` whose hooks or call policies differ from the
/// heartbeat's: the operator would otherwise act on one description and
/// show another.
pub(crate) fn check_agreement(
    name: &str,
    heartbeat: (&[Hook], &[CallPolicy]),
    info: (&[Hook], &[CallPolicy]),
) -> Result<(), Refusal> {
    let disagree = |field| Refusal::Disagree {
        name: name.to_owned(),
        field,
    };
    if heartbeat.0 != info.0 {
        return Err(disagree("hooks"));
    }
    if heartbeat.1 != info.1 {
        return Err(disagree("call policies"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_dns_labels() {
        for ok in ["postgresql", "pg-2", "a"] {
            assert!(validate_plugin_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Postgres",
            "pg_sql",
            "-pg",
            "pg-",
            "a/b",
            &"x".repeat(64),
        ] {
            let req = HeartbeatRequest {
                name: bad.to_owned(),
                instance_id: "i".into(),
                protocol: kplug_proto::PROTOCOL.into(),
                ..HeartbeatRequest::default()
            };
            let refusal = check_heartbeat(&req).unwrap_err();
            assert_eq!(refusal.reason(), "InvalidName", "{bad:?}");
            assert!(
                refusal.to_string().starts_with("invalid plugin name"),
                "{refusal}"
            );
        }
    }

    #[test]
    fn oversized_fields_are_named_with_their_bound() {
        let req = HeartbeatRequest {
            name: "p".into(),
            version: "v".repeat(limits::MAX_VERSION_LEN + 1),
            instance_id: "i".into(),
            protocol: kplug_proto::PROTOCOL.into(),
            ..Default::default()
        };
        let err = heartbeat_refusal(&req).unwrap_err();
        assert!(err.contains("version (bytes) is 129; at most 128"), "{err}");
        let req = HeartbeatRequest {
            version: "1".into(),
            offers: vec![Offer::default(); limits::MAX_OFFERS + 1],
            ..req
        };
        let err = heartbeat_refusal(&req).unwrap_err();
        assert!(err.contains("offers is 65; at most 64"), "{err}");
    }

    fn hook(name: &str) -> Hook {
        Hook {
            name: name.into(),
            base: Some(kplug_proto::v1::GroupKind {
                group: "myorg.org".into(),
                kind: "DatabaseTable".into(),
            }),
            phase: kplug_proto::v1::HookPhase::BeforeReconcile as i32,
            behaviour: kplug_proto::v1::HookBehaviour::SyncEnforce as i32,
            order: 0,
        }
    }

    fn policy(call: Call, seconds: i64, nanos: i32) -> CallPolicy {
        CallPolicy {
            call: call as i32,
            deadline: Some(prost_types::Duration { seconds, nanos }),
            failure_policy: 0,
        }
    }

    fn declaring(hooks: Vec<Hook>, call_policies: Vec<CallPolicy>) -> HeartbeatRequest {
        HeartbeatRequest {
            name: "p".into(),
            instance_id: "i".into(),
            protocol: kplug_proto::PROTOCOL.into(),
            hooks,
            call_policies,
            ..Default::default()
        }
    }

    /// The refusal's reason code and message.
    fn refused(req: &HeartbeatRequest) -> (&'static str, String) {
        let refusal = check_heartbeat(req).unwrap_err();
        (refusal.reason(), refusal.to_string())
    }

    #[test]
    fn valid_hooks_and_policies_are_accepted() {
        let unknown_phase = Hook {
            phase: 99,
            behaviour: 99,
            ..hook("from-the-future")
        };
        let unknown_call = CallPolicy {
            call: 99,
            ..policy(Call::Reconcile, 1, 0)
        };
        let req = declaring(
            vec![hook("backup"), hook("audit"), unknown_phase],
            vec![
                policy(Call::Reconcile, 30, 0),
                policy(Call::Validate, 0, 500_000_000),
                CallPolicy {
                    call: Call::Default as i32,
                    deadline: None,
                    failure_policy: kplug_proto::v1::FailurePolicy::Ignore as i32,
                },
                unknown_call,
            ],
        );
        check_heartbeat(&req).unwrap();
    }

    #[test]
    fn hooks_are_bounded_named_and_complete() {
        let many = (0..=limits::MAX_HOOKS)
            .map(|i| hook(&format!("h{i}")))
            .collect();
        let (reason, message) = refused(&declaring(many, vec![]));
        assert_eq!(reason, "TooLarge");
        assert!(message.contains("hooks is 17; at most 16"), "{message}");

        for bad in ["", "Backup", "back_up", "-x", &"x".repeat(64)] {
            let (reason, message) = refused(&declaring(vec![hook(bad)], vec![]));
            assert_eq!(reason, "InvalidHook", "{bad:?}");
            assert!(message.contains("must be a DNS label"), "{message}");
        }
        let (reason, message) = refused(&declaring(vec![hook("a"), hook("b"), hook("a")], vec![]));
        assert_eq!(reason, "InvalidHook");
        assert!(
            message.contains("plugin p: hook \"a\": declared twice"),
            "{message}"
        );

        let cases = [
            (
                Hook {
                    base: None,
                    ..hook("h")
                },
                "no base kind",
            ),
            (
                Hook {
                    phase: 0,
                    ..hook("h")
                },
                "no phase",
            ),
            (
                Hook {
                    behaviour: 0,
                    ..hook("h")
                },
                "no behaviour",
            ),
        ];
        for (bad, expected) in cases {
            let (reason, message) = refused(&declaring(vec![bad], vec![]));
            assert_eq!(reason, "InvalidHook");
            assert!(message.contains(expected), "{message}");
        }
    }

    #[test]
    fn call_policies_are_bounded_unique_and_positive() {
        let many = vec![policy(Call::Hook, 1, 0); limits::MAX_CALL_POLICIES + 1];
        let (reason, message) = refused(&declaring(vec![], many));
        assert_eq!(reason, "TooLarge");
        assert!(
            message.contains("call_policies is 17; at most 16"),
            "{message}"
        );

        let twice = vec![policy(Call::Reconcile, 5, 0), policy(Call::Reconcile, 6, 0)];
        let (reason, message) = refused(&declaring(vec![], twice));
        assert_eq!(reason, "InvalidCallPolicy");
        assert!(
            message.contains("call policy for CALL_RECONCILE: declared twice"),
            "{message}"
        );

        let (_, message) = refused(&declaring(vec![], vec![policy(Call::Unspecified, 5, 0)]));
        assert!(message.contains("no call"), "{message}");

        for (seconds, nanos) in [(0, 0), (-1, 0), (0, -5), (1, 1_000_000_000)] {
            let (reason, message) = refused(&declaring(
                vec![],
                vec![policy(Call::Validate, seconds, nanos)],
            ));
            assert_eq!(reason, "InvalidCallPolicy", "{seconds}s {nanos}ns");
            assert!(message.contains("deadline must be positive"), "{message}");
        }
    }

    #[test]
    fn capabilities_this_operator_does_not_support_are_refused_with_the_list() {
        let with = |capabilities: Vec<i32>, offers: Vec<Offer>| HeartbeatRequest {
            name: "p".into(),
            instance_id: "i".into(),
            protocol: kplug_proto::PROTOCOL.into(),
            capabilities,
            offers,
            ..Default::default()
        };
        let all: Vec<i32> = SUPPORTED.iter().map(|c| *c as i32).collect();
        check_heartbeat(&with(all, vec![])).unwrap();
        let (reason, message) = refused(&with(vec![99], vec![]));
        assert_eq!(reason, "UnsupportedCapability");
        assert!(
            message.contains("capability 99, which this operator does not know"),
            "{message}"
        );
        assert!(message.contains("CAPABILITY_MUTATE"), "{message}");
        let offer = Offer {
            implementation: "pg".into(),
            children: vec![kplug_proto::v1::GroupVersionKind {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
            }],
            ..Offer::default()
        };
        let (_, message) = refused(&with(
            vec![Capability::Reconcile as i32],
            vec![offer.clone()],
        ));
        assert!(
            message.contains("offer pg declares child kinds without CAPABILITY_CHILDREN"),
            "{message}"
        );
        check_heartbeat(&with(vec![Capability::Children as i32], vec![offer])).unwrap();
    }

    #[test]
    fn getinfo_must_declare_the_heartbeats_hooks_and_policies() {
        let hooks = [hook("backup")];
        let policies = [policy(Call::Hook, 5, 0)];
        check_agreement("p", (&hooks, &policies), (&hooks, &policies)).unwrap();
        let other = [Hook {
            order: 1,
            ..hook("backup")
        }];
        let refusal = check_agreement("p", (&hooks, &policies), (&other, &policies)).unwrap_err();
        assert_eq!(refusal.reason(), "GetInfoMismatch");
        assert!(refusal.to_string().contains("other hooks"), "{refusal}");
        let refusal = check_agreement("p", (&hooks, &policies), (&hooks, &[])).unwrap_err();
        assert!(
            refusal.to_string().contains("other call policies"),
            "{refusal}"
        );
    }
}
