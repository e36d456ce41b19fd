//! The broken plugin's life around its calls: binding its socket, its
//! heartbeats, and its shutdown, each broken as `--break` asks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kplug_proto::rules::backoff_delay;
use kplug_proto::v1::registry_client::RegistryClient;
use kplug_proto::v1::*;
use tokio::net::UnixListener;

use super::{Break, NAME, capabilities, hooks, mutations, offers};

/// Binds the plugin's socket by the rule (`kplug_proto::socket`), or, for
/// the socket breaks, against it.
pub(crate) async fn bind(dir: &Path, broken: Option<Break>) -> Result<UnixListener, String> {
    let path = dir.join(kplug_proto::plugin_socket(NAME));
    match broken {
        Some(Break::StealSocket | Break::DeleteAnything | Break::KeepStale) => {
            std::fs::create_dir_all(path.parent().expect("the socket has a directory"))
                .map_err(|e| e.to_string())?;
            if broken != Some(Break::KeepStale) {
                std::fs::remove_file(&path).ok();
            }
            UnixListener::bind(&path).map_err(|e| format!("{}: {e}", path.display()))
        }
        _ => kplug_proto::socket::bind_plugin(dir, NAME)
            .await
            .map_err(|e| e.to_string()),
    }
}

/// Heartbeats until the task is dropped, backing off by the rule unless told
/// otherwise.
pub(crate) async fn heartbeat(
    dir: PathBuf,
    instance_id: String,
    mut interval: Duration,
    broken: Option<Break>,
) {
    let mut registry = RegistryClient::new(kplug_proto::socket::channel(
        &dir.join(kplug_proto::REGISTRY_SOCKET),
    ));
    let (mut failures, mut sent, mut registered) = (0_u32, 0_u32, false);
    loop {
        let mut request = tonic::Request::new(HeartbeatRequest {
            mutations: mutations(),
            name: NAME.into(),
            version: if broken == Some(Break::ChangingVersion) {
                format!("1.0.{sent}")
            } else {
                "1.0.0".into()
            },
            instance_id: instance_id.clone(),
            protocol: if broken == Some(Break::WrongProtocol) {
                "kplug.v0".into()
            } else {
                kplug_proto::PROTOCOL.into()
            },
            socket: kplug_proto::plugin_socket(NAME),
            offers: offers(),
            capabilities: capabilities(),
            hooks: hooks(broken, true),
            call_policies: Vec::new(),
        });
        request.set_timeout(kplug_proto::rules::HEARTBEAT_CALL_DEADLINE);
        sent += 1;
        let wait = match registry.heartbeat(request).await {
            Ok(response) => {
                failures = 0;
                registered = true;
                let asked = response
                    .into_inner()
                    .interval
                    .and_then(|d| Duration::try_from(d).ok());
                if broken != Some(Break::IgnoreInterval) {
                    interval = asked.filter(|d| !d.is_zero()).unwrap_or(interval);
                }
                interval
            }
            Err(_) if registered && broken == Some(Break::GiveUp) => return,
            Err(_) if broken == Some(Break::NoBackoff) => Duration::from_millis(10),
            Err(_) => {
                failures += 1;
                let unit = uuid::Uuid::new_v4().as_u128() as f64 / 2_f64.powi(128);
                backoff_delay(failures, interval, unit)
            }
        };
        tokio::time::sleep(wait).await;
    }
}

/// Unregisters and stops serving, in the order the broken mode asks
/// (the right order: Unregister, then stop serving and let calls finish).
pub(crate) async fn shut_down<T>(
    dir: &Path,
    instance_id: &str,
    broken: Option<Break>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: &mut tokio::task::JoinHandle<T>,
) {
    let unregister = async {
        let mut registry = RegistryClient::new(kplug_proto::socket::channel(
            &dir.join(kplug_proto::REGISTRY_SOCKET),
        ));
        let mut request = tonic::Request::new(UnregisterRequest {
            name: NAME.into(),
            instance_id: instance_id.to_owned(),
        });
        request.set_timeout(kplug_proto::rules::UNREGISTER_DEADLINE);
        registry.unregister(request).await.ok();
    };
    if broken == Some(Break::StopServingFirst) {
        stop.send(()).ok();
        server.await.ok();
        unregister.await;
    } else {
        if broken != Some(Break::NoUnregister) {
            unregister.await;
        }
        stop.send(()).ok();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .ok();
    }
}
