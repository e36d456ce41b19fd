//! What a plugin declares, checked: its heartbeat, and again its
//! `GetInfo`, before the operator dials or stores anything.
//!
//! The operator's registry answers a refusal (`accepted: false` with the
//! reason), records it as a `PluginRefused` Warning Event and counts it by
//! [`DeclarationError::reason`] in `kplug_registrations_refused_total`;
//! refusals that depend on the registry's state (too many plugins, a name
//! or an implementation that belongs to someone else, a socket that cannot
//! be dialled) are the operator's own.

mod declarations;

use kplug_proto::limits;
use kplug_proto::rules::{NameError, validate_plugin_name};
use kplug_proto::v1::{Capability, HeartbeatRequest, Mutation, Offer};

pub use declarations::{check_agreement, check_declarations};

/// Why what a plugin declares is refused. Messages name the plugin and
/// what to change.
#[derive(Debug, thiserror::Error)]
pub enum DeclarationError {
    /// The plugin's name is not a DNS label.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The instance id is empty (the plugin's name).
    #[error("plugin {0}: instance_id is empty; send a fresh random id per process start")]
    InstanceId(String),
    /// A field or a list is over its bound of `kplug_proto::limits`.
    #[error("plugin {name}: {field} is {got}; at most {max} are accepted")]
    TooLarge {
        /// The plugin.
        name: String,
        /// What is too large, with its unit.
        field: &'static str,
        /// Its size or count.
        got: usize,
        /// The bound.
        max: usize,
    },
    /// A protocol other than [`kplug_proto::PROTOCOL`].
    #[error("plugin {name}: protocol {got:?} is not supported; this operator speaks {want:?}")]
    Protocol {
        /// The plugin.
        name: String,
        /// The protocol it speaks.
        got: String,
        /// The protocol the operator speaks.
        want: &'static str,
    },
    /// A hook that is misnamed, declared twice or incomplete.
    #[error("plugin {name}: hook {hook}: {problem}")]
    Hook {
        /// The plugin.
        name: String,
        /// The hook's name, quoted and cut for the message.
        hook: String,
        /// What is wrong and what to do.
        problem: &'static str,
    },
    /// A call policy that names no call, is declared twice or has a
    /// deadline that is not positive.
    #[error("plugin {name}: call policy for {call}: {problem}")]
    CallPolicy {
        /// The plugin.
        name: String,
        /// The call, by its proto name (or number, when unknown).
        call: String,
        /// What is wrong and what to do.
        problem: &'static str,
    },
    /// A capability the operator does not support, or a declaration
    /// without the capability it needs.
    #[error("plugin {name}: {problem}")]
    Capability {
        /// The plugin.
        name: String,
        /// What is wrong and what to do.
        problem: String,
    },
    /// `GetInfo` declares other hooks or call policies than the heartbeat.
    #[error(
        "plugin {name}: GetInfo declares other {field} than the heartbeat; a heartbeat carries the full description, exactly as GetInfo"
    )]
    Disagree {
        /// The plugin.
        name: String,
        /// What differs.
        field: &'static str,
    },
}

impl DeclarationError {
    /// A CamelCase code for the refusal (the `reason` label of the
    /// operator's `kplug_registrations_refused_total`).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Name(_) => "InvalidName",
            Self::InstanceId(_) => "InvalidInstanceId",
            Self::TooLarge { .. } => "TooLarge",
            Self::Protocol { .. } => "UnsupportedProtocol",
            Self::Disagree { .. } => "GetInfoMismatch",
            Self::Hook { .. } => "InvalidHook",
            Self::CallPolicy { .. } => "InvalidCallPolicy",
            Self::Capability { .. } => "UnsupportedCapability",
        }
    }
}

/// Checks a heartbeat's own fields: name, instance id, sizes, protocol,
/// hooks and call policies, capabilities and mutations. (Its socket is
/// checked when it is dialled, its offers' owners once `GetInfo` confirms
/// them: those are the operator's.)
///
/// # Errors
/// The first rule the heartbeat breaks.
pub fn check_heartbeat(req: &HeartbeatRequest) -> Result<(), DeclarationError> {
    validate_plugin_name(&req.name)?;
    if req.instance_id.is_empty() {
        return Err(DeclarationError::InstanceId(req.name.clone()));
    }
    if req.instance_id.len() > limits::MAX_INSTANCE_ID_LEN {
        return Err(DeclarationError::TooLarge {
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
        return Err(DeclarationError::Protocol {
            name: req.name.clone(),
            got: req.protocol.clone(),
            want: kplug_proto::PROTOCOL,
        });
    }
    Ok(())
}

/// The capabilities this operator supports, in the order of the proto: its
/// answer to every heartbeat lists them (`HeartbeatResponse.capabilities`).
pub const SUPPORTED: [Capability; 7] = [
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
///
/// # Errors
/// [`DeclarationError::Capability`], listing what the operator supports.
pub fn check_capabilities(
    name: &str,
    capabilities: &[i32],
    offers: &[Offer],
) -> Result<(), DeclarationError> {
    let refuse = |problem: String| DeclarationError::Capability {
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
///
/// # Errors
/// The first rule the mutations break.
pub fn check_mutations(
    name: &str,
    capabilities: &[i32],
    mutations: &[Mutation],
) -> Result<(), DeclarationError> {
    let refuse = |problem: String| DeclarationError::Capability {
        name: name.to_owned(),
        problem,
    };
    if mutations.len() > limits::MAX_MUTATIONS {
        return Err(DeclarationError::TooLarge {
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

/// The bounds of `kplug_proto::limits` on what a plugin declares, in its
/// heartbeat and again in `GetInfo`.
///
/// # Errors
/// [`DeclarationError::TooLarge`] for the first field over its bound.
pub fn check_sizes(
    name: &str,
    version: &str,
    description: &str,
    offers: &[Offer],
) -> Result<(), DeclarationError> {
    let too_large = |field: &'static str, got: usize, max: usize| {
        (got > max).then(|| DeclarationError::TooLarge {
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

#[cfg(test)]
mod tests {
    use kplug_proto::v1::{Call, CallPolicy, Hook};

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
        let err = check_heartbeat(&req).unwrap_err().to_string();
        assert!(err.contains("version (bytes) is 129; at most 128"), "{err}");
        let req = HeartbeatRequest {
            version: "1".into(),
            offers: vec![Offer::default(); limits::MAX_OFFERS + 1],
            ..req
        };
        let err = check_heartbeat(&req).unwrap_err().to_string();
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
