//! The `Registry` gRPC service: `Heartbeat` (registering, renewing and
//! refusing) and `Unregister` (draining calls in flight).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kplug_checks::heartbeat::check_heartbeat;
use kplug_proto::v1::registry_server::Registry as RegistryApi;
use kplug_proto::v1::{HeartbeatRequest, HeartbeatResponse, UnregisterRequest, UnregisterResponse};
use kube::runtime::events::EventType;
use tonic::{Request, Response, Status};

use super::Registry;
use crate::plugin::PluginInstance;
use crate::refusal::Refusal;

impl Registry {
    /// Registers, renews or refuses the instance a heartbeat names; the
    /// note for the plugin (empty when all is well).
    async fn handle_heartbeat(
        &self,
        req: HeartbeatRequest,
        uid: Option<u32>,
    ) -> Result<String, Refusal> {
        let uid = self.admit(&req, uid)?;
        if let Some(known) = self.current(&req.name, &req.instance_id) {
            known.touch();
            if !known.is_ready() {
                self.update_readiness(&known).await;
            }
            return Ok(String::new());
        }
        let name_lock = Arc::clone(
            self.shared
                .handshakes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(req.name.clone())
                .or_default(),
        );
        let _one_at_a_time = name_lock.lock().await;
        // Another heartbeat of the same instance may have finished the
        // handshake while we waited.
        if let Some(known) = self.current(&req.name, &req.instance_id) {
            known.touch();
            return Ok(String::new());
        }
        let registered = self.read().len();
        if registered >= self.shared.config.max_plugins && self.read().get(&req.name).is_none() {
            return Err(Refusal::TooMany {
                name: req.name,
                registered,
            });
        }
        let instance = Arc::new(self.handshake(&req, uid).await?);
        self.shared.names.claim(&req.name, uid)?;
        let replaced = self.insert(&req.name, &instance)?;
        self.note_offers(&instance);
        self.watch_liveness(&instance);
        self.shared
            .metrics
            .set_plugin_up(&instance.name, instance.is_ready());
        self.changed();
        self.announce(&instance, replaced).await;
        Ok(if instance.is_ready() {
            String::new()
        } else {
            "registered, but Probe says not ready: no work is routed until it is".into()
        })
    }

    /// The heartbeat's UID, if its caller may speak for the name it gives.
    ///
    /// A plugin acts only as itself: its name belongs to one UID, and an
    /// instance is renewed only by the UID that registered it.
    fn admit(&self, req: &HeartbeatRequest, uid: Option<u32>) -> Result<u32, Refusal> {
        check_heartbeat(req)?;
        let Some(uid) = uid else {
            return Err(Refusal::NoCredentials(req.name.clone()));
        };
        self.shared.names.check(&req.name, uid)?;
        if self
            .shared
            .unregistered
            .contains(&req.instance_id, std::time::Instant::now())
        {
            return Err(Refusal::Unregistered {
                name: req.name.clone(),
                instance_id: req.instance_id.clone(),
            });
        }
        Ok(uid)
    }

    /// Lists `instance` under `name`, unless the registry is full; the
    /// instance it replaced, if any.
    fn insert(
        &self,
        name: &str,
        instance: &Arc<PluginInstance>,
    ) -> Result<Option<Arc<PluginInstance>>, Refusal> {
        let mut plugins = self.write();
        // Handshakes of other names run at the same time: they may have
        // filled the room since the check before the handshake (measured:
        // 65 registered of 64). The check that counts is this one, made
        // with the insert.
        if plugins.len() >= self.shared.config.max_plugins && !plugins.contains_key(name) {
            let registered = plugins.len();
            drop(plugins);
            self.shared.ownership.release(name);
            self.shared.names.release(name);
            return Err(Refusal::TooMany {
                name: name.to_owned(),
                registered,
            });
        }
        Ok(plugins.insert(name.to_owned(), Arc::clone(instance)))
    }

    /// Remembers the implementations `instance` offers.
    fn note_offers(&self, instance: &PluginInstance) {
        let mut offered = self
            .shared
            .offered
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for offer in &instance.offers {
            if let Some(base) = &offer.base {
                offered.insert((
                    base.group.clone(),
                    base.kind.clone(),
                    offer.implementation.clone(),
                ));
            }
        }
    }

    /// The Event of a registration, or of a replaced instance.
    async fn announce(&self, instance: &PluginInstance, replaced: Option<Arc<PluginInstance>>) {
        let offers = describe_offers(instance);
        match replaced {
            Some(old) => {
                // In-flight calls on the old instance keep their channel and
                // finish; new calls go to the new one from now on.
                self.note(
                    EventType::Normal,
                    "PluginReplaced",
                    format!(
                        "plugin {} replaced its running instance (version {}); serves {offers}",
                        instance.label(),
                        old.version,
                    ),
                )
                .await;
                tracing::info!(plugin = %instance.name, old = %old.instance_id, new = %instance.instance_id, "instance replaced");
            }
            None => {
                self.note(
                    EventType::Normal,
                    "PluginRegistered",
                    format!("plugin {} registered; serves {offers}", instance.label()),
                )
                .await;
            }
        }
    }

    async fn update_readiness(&self, instance: &Arc<PluginInstance>) {
        let ready = instance.probe().await.is_ok_and(|p| p.ready);
        if ready && !instance.ready.swap(true, Ordering::AcqRel) {
            self.shared.metrics.set_plugin_up(&instance.name, true);
            self.changed();
            self.note(
                EventType::Normal,
                "PluginReady",
                format!("plugin {} is ready", instance.label()),
            )
            .await;
        }
    }

    async fn handle_unregister(&self, req: UnregisterRequest, uid: Option<u32>) -> bool {
        let Some(instance) = self.current(&req.name, &req.instance_id) else {
            return false;
        };
        if uid != Some(instance.uid) {
            tracing::warn!(plugin = %req.name, caller_uid = ?uid, "Unregister from another UID refused");
            self.shared.metrics.count_refusal("WrongUid");
            return false;
        }
        // Remembered before the removal, so that no heartbeat handled in
        // between can register the instance again.
        self.shared
            .unregistered
            .insert(&req.instance_id, std::time::Instant::now());
        self.remove(
            &req.name,
            &req.instance_id,
            "it unregistered (shutting down)",
            EventType::Normal,
        )
        .await;
        // Drain: wait until every permit is back, i.e. no call is in flight,
        // then close the semaphore so late callers fail fast (and retry on a
        // newer instance) instead of reaching a process that is exiting.
        let drained = tokio::time::timeout(
            self.shared.config.call_timeout,
            instance.in_flight.acquire_many(instance.max_in_flight),
        )
        .await;
        if drained.is_err() {
            tracing::warn!(plugin = %instance.label(), "calls still in flight after the call timeout; letting it go anyway");
        }
        instance.in_flight.close();
        true
    }
}

#[tonic::async_trait]
impl RegistryApi for Registry {
    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let uid = peer_uid(&request);
        let req = request.into_inner();
        let name = req.name.clone();
        let result = self.handle_heartbeat(req, uid).await;
        self.shared.metrics.count_heartbeat(result.is_ok());
        let config = &self.shared.config;
        let (accepted, reason) = match result {
            Ok(note) => (true, note),
            Err(refusal) => {
                self.shared.metrics.count_refusal(refusal.reason());
                // Refusals are answered, not raised: the plugin logs the
                // reason and keeps trying (a fixed plugin or a newer operator
                // may accept it). The same refusal, or a flood of them, is
                // noted once per period; the metric counts every one.
                let message = refusal.to_string();
                let key = format!("{name}/{}", refusal.reason());
                // A late heartbeat of an instance that unregistered is part
                // of a normal shutdown: counted, not a Warning.
                if !refusal.is_expected()
                    && self
                        .shared
                        .refusal_notices
                        .admit(&key, std::time::Instant::now())
                {
                    self.note(
                        EventType::Warning,
                        "PluginRefused",
                        format!("heartbeat refused: {message}"),
                    )
                    .await;
                } else {
                    tracing::debug!(plugin = name, %message, "heartbeat refused (noted already)");
                }
                (false, message)
            }
        };
        Ok(Response::new(HeartbeatResponse {
            accepted,
            reason,
            ttl: prost_types::Duration::try_from(config.heartbeat_ttl).ok(),
            interval: prost_types::Duration::try_from(config.heartbeat_interval).ok(),
            capabilities: crate::refusal::SUPPORTED
                .iter()
                .map(|c| *c as i32)
                .collect(),
        }))
    }

    async fn unregister(
        &self,
        request: Request<UnregisterRequest>,
    ) -> Result<Response<UnregisterResponse>, Status> {
        let uid = peer_uid(&request);
        let removed = self.handle_unregister(request.into_inner(), uid).await;
        Ok(Response::new(UnregisterResponse { removed }))
    }
}

/// The caller's UID, from the registry connection's `SO_PEERCRED`.
fn peer_uid<T>(request: &Request<T>) -> Option<u32> {
    request
        .extensions()
        .get::<tonic::transport::server::UdsConnectInfo>()
        .and_then(|info| info.peer_cred)
        .map(|cred| cred.uid())
}

fn describe_offers(instance: &PluginInstance) -> String {
    let offers: Vec<_> = instance
        .offers
        .iter()
        .map(|o| {
            let base = o.base.clone().unwrap_or_default();
            format!("{}.{} as {}", base.kind, base.group, o.implementation)
        })
        .collect();
    if offers.is_empty() {
        "nothing".into()
    } else {
        offers.join(", ")
    }
}
