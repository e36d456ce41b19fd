//! The kit's registry: it plays the operator's `kplug.v1.Registry` on
//! `registry.sock` and records every call, with when it arrived and when it
//! was answered, for the checks to judge.
//!
//! It accepts every heartbeat (judging them is the checks' job), or, while
//! [`Registry::fail`] is on, answers each with `UNAVAILABLE`, which a plugin
//! must treat like an absent operator: back off and retry. Each
//! [`Registry::start`] is a new operator that knows no plugin, as after an
//! operator restart.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kplug_proto::limits::MAX_REGISTRY_MESSAGE_BYTES;
use kplug_proto::v1::registry_server::{Registry as RegistryApi, RegistryServer};
use kplug_proto::v1::{HeartbeatRequest, HeartbeatResponse, UnregisterRequest, UnregisterResponse};
use tokio::net::UnixListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;

/// The TTL the kit's registry announces; it never removes a plugin itself.
const TTL: Duration = Duration::from_secs(15);

/// One heartbeat as the registry saw it.
#[derive(Clone, Debug)]
pub(crate) struct Heartbeat {
    pub(crate) request: HeartbeatRequest,
    /// When the request arrived.
    pub(crate) received: Instant,
    /// When the registry answered it; a plugin's wait for its next heartbeat
    /// starts after this.
    pub(crate) answered: Instant,
    /// Whether it was answered with acceptance (else `UNAVAILABLE`).
    pub(crate) accepted: bool,
}

/// One Unregister call.
#[derive(Clone, Debug)]
pub(crate) struct Unregister {
    pub(crate) request: UnregisterRequest,
    pub(crate) received: Instant,
}

#[derive(Debug, Default)]
struct Record {
    heartbeats: Vec<Heartbeat>,
    unregisters: Vec<Unregister>,
}

#[derive(Debug)]
struct Behaviour {
    fail: bool,
    interval: Duration,
    unregister_delay: Duration,
}

/// What every registry started by the kit shares: its behaviour and the
/// record of the current one.
#[derive(Clone)]
struct Shared {
    record: Arc<Mutex<Record>>,
    behaviour: Arc<Mutex<Behaviour>>,
    changed: Arc<watch::Sender<()>>,
}

struct Service(Shared);

#[tonic::async_trait]
impl RegistryApi for Service {
    async fn heartbeat(
        &self,
        request: tonic::Request<HeartbeatRequest>,
    ) -> Result<tonic::Response<HeartbeatResponse>, tonic::Status> {
        let received = Instant::now();
        let (fail, interval) = {
            let b = self.0.behaviour.lock().expect("registry state lock");
            (b.fail, b.interval)
        };
        let heartbeat = Heartbeat {
            request: request.into_inner(),
            received,
            answered: Instant::now(),
            accepted: !fail,
        };
        self.0
            .record
            .lock()
            .expect("registry state lock")
            .heartbeats
            .push(heartbeat);
        self.0.changed.send_replace(());
        if fail {
            return Err(tonic::Status::unavailable(
                "kplug-conformance: the registry fails on purpose (checking the plugin's backoff)",
            ));
        }
        Ok(tonic::Response::new(HeartbeatResponse {
            capabilities: Default::default(),
            accepted: true,
            reason: String::new(),
            ttl: prost_types::Duration::try_from(TTL).ok(),
            interval: prost_types::Duration::try_from(interval).ok(),
        }))
    }

    async fn unregister(
        &self,
        request: tonic::Request<UnregisterRequest>,
    ) -> Result<tonic::Response<UnregisterResponse>, tonic::Status> {
        let unregister = Unregister {
            request: request.into_inner(),
            received: Instant::now(),
        };
        let delay = self
            .0
            .behaviour
            .lock()
            .expect("registry state lock")
            .unregister_delay;
        self.0
            .record
            .lock()
            .expect("registry state lock")
            .unregisters
            .push(unregister);
        self.0.changed.send_replace(());
        // The operator answers once the instance's calls in flight are done;
        // holding the answer lets the kit check that the plugin still serves
        // meanwhile.
        tokio::time::sleep(delay).await;
        Ok(tonic::Response::new(UnregisterResponse { removed: true }))
    }
}

/// The registry socket in a socket dir, started and stopped by the kit.
pub(crate) struct Registry {
    path: PathBuf,
    shared: Shared,
    running: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl Registry {
    /// A registry for `socket_dir`, not serving yet, answering heartbeats
    /// with `interval`.
    pub(crate) fn new(socket_dir: &Path, interval: Duration) -> Self {
        Self {
            path: socket_dir.join(kplug_proto::REGISTRY_SOCKET),
            shared: Shared {
                record: Arc::default(),
                behaviour: Arc::new(Mutex::new(Behaviour {
                    fail: false,
                    interval,
                    unregister_delay: Duration::ZERO,
                })),
                changed: Arc::new(watch::channel(()).0),
            },
            running: None,
        }
    }

    /// Serves a new registry on `registry.sock`, with an empty record: it
    /// knows no plugin, like an operator that just started.
    pub(crate) async fn start(&mut self) -> std::io::Result<()> {
        self.stop().await;
        *self.shared.record.lock().expect("registry state lock") = Record::default();
        match tokio::fs::remove_file(&self.path).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = UnixListener::bind(&self.path)?;
        let (stop, stopped) = oneshot::channel();
        let service = RegistryServer::new(Service(self.shared.clone()))
            .max_decoding_message_size(MAX_REGISTRY_MESSAGE_BYTES);
        let task = tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                    stopped.await.ok();
                })
                .await;
            if let Err(e) = served {
                eprintln!("kplug-conformance: the registry stopped: {e}");
            }
        });
        self.running = Some((stop, task));
        Ok(())
    }

    /// Stops serving and removes `registry.sock`, as when the operator's
    /// container goes away. Connections are closed.
    pub(crate) async fn stop(&mut self) {
        if let Some((stop, mut task)) = self.running.take() {
            stop.send(()).ok();
            // A graceful stop waits for the plugins' open connections, which
            // honour GOAWAY at once; abort if one does not, so that a
            // misbehaving plugin cannot stall the kit.
            if tokio::time::timeout(Duration::from_secs(2), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
        std::fs::remove_file(&self.path).ok();
    }

    /// Answer every heartbeat with `UNAVAILABLE` (`true`) or accept them.
    pub(crate) fn fail(&self, fail: bool) {
        self.shared
            .behaviour
            .lock()
            .expect("registry state lock")
            .fail = fail;
    }

    /// Hold each Unregister answer this long.
    pub(crate) fn delay_unregister(&self, delay: Duration) {
        self.shared
            .behaviour
            .lock()
            .expect("registry state lock")
            .unregister_delay = delay;
    }

    /// The interval heartbeats are answered with.
    pub(crate) fn interval(&self) -> Duration {
        self.shared
            .behaviour
            .lock()
            .expect("registry state lock")
            .interval
    }

    /// Every heartbeat the current registry received, in order.
    pub(crate) fn heartbeats(&self) -> Vec<Heartbeat> {
        self.shared
            .record
            .lock()
            .expect("registry state lock")
            .heartbeats
            .clone()
    }

    /// Every Unregister the current registry received, in order.
    pub(crate) fn unregisters(&self) -> Vec<Unregister> {
        self.shared
            .record
            .lock()
            .expect("registry state lock")
            .unregisters
            .clone()
    }

    /// Waits until `done` holds for the heartbeats received so far, or
    /// `timeout` passes; returns the heartbeats either way and whether `done`
    /// held.
    pub(crate) async fn wait_heartbeats(
        &self,
        timeout: Duration,
        done: impl Fn(&[Heartbeat]) -> bool,
    ) -> (Vec<Heartbeat>, bool) {
        let mut changed = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let heartbeats = self.heartbeats();
            if done(&heartbeats) {
                return (heartbeats, true);
            }
            if tokio::time::timeout_at(deadline, changed.changed())
                .await
                .is_err()
            {
                let heartbeats = self.heartbeats();
                let held = done(&heartbeats);
                return (heartbeats, held);
            }
        }
    }

    /// Waits for the first Unregister, up to `timeout`.
    pub(crate) async fn wait_unregister(&self, timeout: Duration) -> Option<Unregister> {
        let mut changed = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(first) = self.unregisters().into_iter().next() {
                return Some(first);
            }
            tokio::time::timeout_at(deadline, changed.changed())
                .await
                .ok()?
                .ok()?;
        }
    }
}
