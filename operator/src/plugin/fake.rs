//! A plugin instance for unit tests, never dialled.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kplug_proto::v1::{Capability, Offer};
use tokio::sync::Semaphore;

use super::{CallPolicies, Defaults, PluginInstance};
use crate::metrics::PluginMetrics;

impl PluginInstance {
    /// A ready instance that is never dialled: for unit tests of the
    /// reconcile, whose calls go through a fake backend.
    pub(crate) fn fake(
        name: &str,
        version: &str,
        offers: Vec<Offer>,
        capabilities: Vec<Capability>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            instance_id: format!("{name}-1"),
            description: String::new(),
            socket: PathBuf::from(format!("/nonexistent/{name}.sock")),
            offers,
            capabilities,
            hooks: Vec::new(),
            mutations: Vec::new(),
            policies: CallPolicies::resolve(
                &[],
                Defaults {
                    call: Duration::from_secs(1),
                    admission: Duration::from_secs(1),
                },
            ),
            ready: true.into(),
            last_seen: Mutex::new(Instant::now()),
            channel: tonic::transport::Endpoint::from_static("http://[::1]:1").connect_lazy(),
            in_flight: Arc::new(Semaphore::new(1)),
            max_in_flight: 1,
            closed: Arc::default(),
            probe_timeout: Duration::from_secs(1),
            max_response_bytes: 1024,
            uid: 0,
            metrics: PluginMetrics::register(
                &mut prometheus_client::registry::Registry::default(),
                Duration::from_secs(1),
            ),
        }
    }
}
