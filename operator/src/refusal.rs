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
use kplug_proto::v1::{HeartbeatRequest, Offer};

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
            Self::Mismatch { .. } => "GetInfoMismatch",
            Self::Impostor(_) => "ImplementationOwned",
            Self::WrongUid(_) => "WrongUid",
            Self::NoCredentials(_) => "NoPeerCredentials",
            Self::Unregistered { .. } => "Unregistered",
        }
    }
}

/// Checks a heartbeat's own fields: name, instance id, sizes, protocol.
/// (Its socket is checked when it is dialled, its offers' owners once
/// `GetInfo` confirms them.)
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
    if req.protocol != kplug_proto::PROTOCOL {
        return Err(Refusal::Protocol {
            name: req.name.clone(),
            got: req.protocol.clone(),
            want: kplug_proto::PROTOCOL,
        });
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
    ];
    match checks.into_iter().flatten().next() {
        Some(refusal) => Err(refusal),
        None => Ok(()),
    }
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
}
