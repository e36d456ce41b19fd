//! Why the registry refuses a heartbeat.
//!
//! What a plugin declares (its heartbeat, and again its `GetInfo`) is
//! checked by `kplug_checks::heartbeat`, the rules the conformance kit and
//! the fuzz targets apply too; the refusals here are the registry's own,
//! which depend on its state: too many plugins, a socket that cannot be
//! dialled, a `GetInfo` that fails or names another plugin, a name or an
//! implementation that belongs to someone else.
//!
//! Refusals are answered (`accepted: false` with the reason), recorded as a
//! `PluginRefused` Warning Event, and counted by reason in
//! `kplug_registrations_refused_total`.

use std::path::PathBuf;

use kplug_checks::confinement::ConfinementError;
use kplug_checks::heartbeat::DeclarationError;
use kplug_proto::v1::{CallPolicy, Hook};

use crate::ownership::{Impostor, WrongUid};
use crate::plugin::CallError;

/// The capabilities this operator supports, in the order of the proto: its
/// answer to every heartbeat lists them (`HeartbeatResponse.capabilities`),
/// and a plugin that declares another is refused.
pub(crate) use kplug_checks::heartbeat::SUPPORTED;

/// Refuses a `GetInfo` whose hooks or call policies differ from the
/// heartbeat's (`kplug_checks::heartbeat::check_agreement`), as a refusal.
pub(crate) fn check_agreement(
    name: &str,
    heartbeat: (&[Hook], &[CallPolicy]),
    info: (&[Hook], &[CallPolicy]),
) -> Result<(), Refusal> {
    Ok(kplug_checks::heartbeat::check_agreement(
        name, heartbeat, info,
    )?)
}

/// Why a heartbeat was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// What the plugin declares breaks a rule of `kplug_checks::heartbeat`.
    #[error(transparent)]
    Declaration(#[from] DeclarationError),
    #[error(
        "plugin {name}: {registered} plugins are registered, the most this operator accepts (--max-plugins); remove one or raise the limit"
    )]
    TooMany { name: String, registered: usize },
    #[error("plugin {name}: {source}")]
    Socket {
        name: String,
        #[source]
        source: ConfinementError,
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
            Self::Declaration(declaration) => declaration.reason(),
            Self::TooMany { .. } => "TooManyPlugins",
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

#[cfg(test)]
mod tests {
    use kplug_checks::heartbeat::check_heartbeat;
    use kplug_proto::v1::HeartbeatRequest;

    use super::*;

    #[test]
    fn a_declarations_refusal_keeps_its_message_and_reason() {
        let req = HeartbeatRequest {
            name: "p".into(),
            protocol: kplug_proto::PROTOCOL.into(),
            ..HeartbeatRequest::default()
        };
        let declaration = check_heartbeat(&req).unwrap_err();
        let (message, reason) = (declaration.to_string(), declaration.reason());
        let refusal = Refusal::from(declaration);
        assert_eq!((refusal.to_string(), refusal.reason()), (message, reason));
        assert_eq!(reason, "InvalidInstanceId");
    }
}
