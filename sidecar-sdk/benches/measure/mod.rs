//! Measuring one language's three servers: the latency of sequential calls
//! and the throughput with calls in flight, in the same rounds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{Outcome, ReconcileRequest};
use serde_json::{Value, json};
use tonic::transport::Channel;

use super::Config;
use super::echo::request;
use super::servers::{KINDS, Kind, Language, Running};

async fn call(client: &mut PluginClient<Channel>, req: &ReconcileRequest) -> Vec<u8> {
    let response = client.reconcile(req.clone()).await.unwrap().into_inner();
    assert_eq!(
        response.outcome,
        Outcome::Ok as i32,
        "Reconcile failed: {}",
        response.message
    );
    response.status
}

/// One server's numbers for one payload size, summed over the rounds.
#[derive(Default)]
pub(crate) struct Samples {
    latencies: Vec<Duration>,
    inflight_calls: usize,
    inflight_time: Duration,
}

impl Samples {
    pub(crate) fn percentile(&self, p: usize) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
    }

    pub(crate) fn throughput(&self) -> f64 {
        self.inflight_calls as f64 / self.inflight_time.as_secs_f64()
    }
}

async fn sequential(
    client: &mut PluginClient<Channel>,
    req: &ReconcileRequest,
    calls: usize,
    samples: &mut Samples,
) {
    for _ in 0..calls {
        let start = Instant::now();
        call(client, req).await;
        samples.latencies.push(start.elapsed());
    }
}

/// `calls` calls, `inflight` at a time on the one connection (as the
/// operator calls a plugin).
async fn concurrent(
    client: &PluginClient<Channel>,
    req: &ReconcileRequest,
    calls: usize,
    inflight: usize,
    samples: &mut Samples,
) {
    let left = Arc::new(AtomicUsize::new(calls));
    let start = Instant::now();
    let workers: Vec<_> = (0..inflight)
        .map(|_| {
            let (mut client, req, left) = (client.clone(), req.clone(), left.clone());
            tokio::spawn(async move {
                // Take a call while there is one left.
                while left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
                {
                    call(&mut client, &req).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    samples.inflight_time += start.elapsed();
    samples.inflight_calls += calls;
}

/// The first answer says the server echoes what it should: the SDK plugin
/// and the bare+JSON server `{"echo": spec}`, the bare one the object's
/// bytes.
async fn check_echo(client: &mut PluginClient<Channel>, req: &ReconcileRequest, kind: Kind) {
    let status = call(client, req).await;
    if kind == Kind::Bare {
        assert_eq!(status, req.object);
    } else {
        let object: Value = serde_json::from_slice(&req.object).unwrap();
        let status: Value = serde_json::from_slice(&status).expect("the status is JSON");
        assert_eq!(status, json!({ "echo": object["spec"] }));
    }
}

/// One row of the table: one language, one payload size.
pub(crate) struct Row {
    pub(crate) case: String,
    pub(crate) size: usize,
    pub(crate) kplug: Samples,
    pub(crate) bare: Samples,
    pub(crate) bare_json: Samples,
}

/// Starts the three servers of `language` and measures them, a row per
/// payload size.
pub(crate) async fn language(config: &Config, language: &Language) -> Vec<Row> {
    // Started together, then connected: the JVMs and interpreters start
    // side by side.
    let mut running: Vec<Running> = language
        .servers
        .iter()
        .zip(KINDS)
        .map(|(spec, kind)| Running::start(spec, kind))
        .collect();
    let mut clients = Vec::new();
    for server in &mut running {
        clients.push(server.client().await);
    }
    let mut rows = Vec::new();
    for &size in &config.sizes {
        let req = request(size);
        for (client, kind) in clients.iter_mut().zip(KINDS) {
            check_echo(client, &req, kind).await;
        }
        let [kplug, bare, bare_json] = measure_size(config, &mut clients, &req).await;
        rows.push(Row {
            case: language.case.clone(),
            size,
            kplug,
            bare,
            bare_json,
        });
    }
    rows
}

/// The servers' samples for one request, in the order of `clients`.
async fn measure_size(
    config: &Config,
    clients: &mut [PluginClient<Channel>],
    req: &ReconcileRequest,
) -> [Samples; 3] {
    // Warm up (connections, allocators, Node's and the JVM's JIT), not
    // measured.
    let mut scratch = Samples::default();
    for client in clients.iter_mut() {
        sequential(client, req, (config.calls / 10).max(10), &mut scratch).await;
        let calls = (config.inflight_calls / 10).max(config.inflight);
        concurrent(client, req, calls, config.inflight, &mut scratch).await;
    }
    let mut samples: [Samples; 3] = Default::default();
    let seq_calls = config.calls / config.rounds;
    let inflight_calls = (config.inflight_calls / config.rounds).max(config.inflight);
    for round in 0..config.rounds {
        // Rotate who goes first, so that none always follows another.
        let order = [0, 1, 2].map(|i| (i + round) % 3);
        for i in order {
            sequential(&mut clients[i], req, seq_calls, &mut samples[i]).await;
        }
        for i in order {
            let (client, samples) = (&clients[i], &mut samples[i]);
            concurrent(client, req, inflight_calls, config.inflight, samples).await;
        }
    }
    samples
}
