//! The handshake that lists a new instance: the heartbeat is checked, the
//! plugin's socket confined and dialled, and `GetInfo` and `Probe` called.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kplug_checks::confinement::confine;
use kplug_checks::heartbeat::{
    check_capabilities, check_declarations, check_mutations, check_sizes,
};
use kplug_proto::limits;
use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{GetInfoRequest, GetInfoResponse, HeartbeatRequest};
use tokio::sync::{Notify, Semaphore};
use tonic::Request;
use tonic::transport::Channel;

use super::Registry;
use crate::connection::dial;
use crate::plugin::{CallError, CallPolicies, Defaults, PluginInstance};
use crate::refusal::{Refusal, check_agreement};

impl Registry {
    /// Lists a new instance: its socket confined and dialled, its
    /// `GetInfo` checked and agreeing with the heartbeat, its
    /// implementations claimed, and `Probe` called once.
    pub(super) async fn handshake(
        &self,
        req: &HeartbeatRequest,
        uid: u32,
    ) -> Result<PluginInstance, Refusal> {
        let config = &self.shared.config;
        let socket =
            confine(&config.socket_dir, &req.socket).map_err(|source| Refusal::Socket {
                name: req.name.clone(),
                source,
            })?;
        let closed = Arc::new(Notify::new());
        let channel = dial(&socket, uid, config.handshake_timeout, closed.clone())
            .await
            .map_err(|e| Refusal::Dial {
                name: req.name.clone(),
                socket: socket.clone(),
                message: error_chain(&e),
            })?;
        let info = self.get_info(&req.name, &channel).await?;
        check_info(req, &info)?;
        self.shared.ownership.claim(
            &info.name,
            info.offers.iter().map(|o| o.implementation.as_str()),
        )?;
        let instance = self.instance(
            req,
            info,
            Connection {
                socket,
                channel,
                closed,
                uid,
            },
        );
        match instance.probe().await {
            Ok(probe) => {
                instance.ready.store(probe.ready, Ordering::Release);
                if !probe.ready {
                    tracing::info!(plugin = %instance.label(), message = probe.message, "plugin registered but not ready");
                }
            }
            Err(error) => {
                tracing::warn!(plugin = %instance.label(), %error, "Probe failed; not routing work yet")
            }
        }
        Ok(instance)
    }

    /// Calls `GetInfo` on plugin `name`, within the handshake's timeout.
    async fn get_info(&self, name: &str, channel: &Channel) -> Result<GetInfoResponse, Refusal> {
        let timeout = self.shared.config.handshake_timeout;
        let get_info = async {
            let mut request = Request::new(GetInfoRequest {});
            request.set_timeout(timeout);
            PluginClient::new(channel.clone())
                .max_decoding_message_size(limits::MAX_REGISTRY_MESSAGE_BYTES)
                .get_info(request)
                .await
        };
        let source = match tokio::time::timeout(timeout, get_info).await {
            Ok(Ok(info)) => return Ok(info.into_inner()),
            Ok(Err(status)) => CallError::Status {
                plugin: name.to_owned(),
                call: "GetInfo",
                code: status.code(),
                message: status.message().to_owned(),
            },
            Err(_) => CallError::Timeout {
                plugin: name.to_owned(),
                call: "GetInfo",
                after: timeout,
            },
        };
        Err(Refusal::GetInfo {
            name: name.to_owned(),
            source,
        })
    }

    /// The instance `info` describes, reached over `connection`.
    fn instance(
        &self,
        req: &HeartbeatRequest,
        info: GetInfoResponse,
        connection: Connection,
    ) -> PluginInstance {
        let config = &self.shared.config;
        let max_in_flight = config.max_in_flight.max(1);
        PluginInstance {
            name: info.name,
            version: info.version,
            instance_id: req.instance_id.clone(),
            description: info.description,
            socket: connection.socket,
            offers: info.offers,
            capabilities: info
                .capabilities
                .into_iter()
                .filter_map(|c| kplug_proto::v1::Capability::try_from(c).ok())
                .collect(),
            policies: CallPolicies::resolve(
                &info.call_policies,
                Defaults {
                    call: config.call_timeout,
                    admission: config.admission_call_timeout,
                },
            ),
            hooks: info.hooks,
            mutations: info.mutations,
            ready: false.into(),
            last_seen: Mutex::new(Instant::now()),
            channel: connection.channel,
            in_flight: Arc::new(Semaphore::new(max_in_flight as usize)),
            max_in_flight,
            closed: connection.closed,
            probe_timeout: config.handshake_timeout,
            max_response_bytes: config.max_response_bytes,
            uid: connection.uid,
            metrics: self.shared.metrics.clone(),
        }
    }
}

/// A dialled plugin socket.
struct Connection {
    socket: PathBuf,
    channel: Channel,
    /// Notified when the connection closes.
    closed: Arc<Notify>,
    /// The plugin process's user, from the socket's peer credentials.
    uid: u32,
}

/// Whether `info` is the plugin the heartbeat `req` announced, speaking
/// this protocol, within the limits, and declaring what it may.
fn check_info(req: &HeartbeatRequest, info: &GetInfoResponse) -> Result<(), Refusal> {
    if info.name != req.name || info.protocol != kplug_proto::PROTOCOL {
        return Err(Refusal::Mismatch {
            name: req.name.clone(),
            got: info.name.clone(),
            protocol: info.protocol.clone(),
            want: kplug_proto::PROTOCOL,
        });
    }
    check_sizes(&info.name, &info.version, &info.description, &info.offers)?;
    check_declarations(&info.name, &info.hooks, &info.call_policies)?;
    check_capabilities(&info.name, &info.capabilities, &info.offers)?;
    check_mutations(&info.name, &info.capabilities, &info.mutations)?;
    check_agreement(
        &info.name,
        (&req.hooks, &req.call_policies),
        (&info.hooks, &info.call_policies),
    )
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}
