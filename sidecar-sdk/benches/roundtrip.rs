//! `Reconcile` round trip through the SDK over a Unix socket, next to a bare
//! tonic service answering the same call on the same kind of socket (the
//! baseline: what the SDK's decoding, task spawn and response building cost
//! on top of gRPC).
//!
//! Run: `cargo bench -p kplug-sidecar --bench roundtrip`. Besides criterion's
//! estimates it prints p50/p99 from 5,000 sequential calls per case.

mod echo;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::plugin_server::PluginServer;
use kplug_proto::v1::*;
use kplug_sidecar::Server;
use tokio::runtime::Runtime;
use tonic::transport::Channel;

use echo::{Bare, Echo, echo_info, request};

struct Setup {
    _dir: tempfile::TempDir,
    sdk: PluginClient<Channel>,
    bare: PluginClient<Channel>,
}

fn setup(rt: &Runtime) -> Setup {
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        // The SDK server heartbeats to a registry that is not there; it
        // keeps serving and backs off quietly.
        let server = Server::new(echo_info(), Echo, dir.path());
        let sdk_socket = server.socket_path();
        tokio::spawn(server.run_until(std::future::pending()));
        let bare_socket = dir.path().join("bare.sock");
        let listener = tokio::net::UnixListener::bind(&bare_socket).unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(PluginServer::new(Bare::Bytes))
                .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
        );
        while !sdk_socket.exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Setup {
            sdk: PluginClient::new(kplug_proto::socket::channel(&sdk_socket)),
            bare: PluginClient::new(kplug_proto::socket::channel(&bare_socket)),
            _dir: dir,
        }
    })
}

async fn call(client: &mut PluginClient<Channel>, req: &ReconcileRequest) {
    let response = client.reconcile(req.clone()).await.unwrap().into_inner();
    assert_eq!(response.outcome, Outcome::Ok as i32);
}

fn percentiles(
    rt: &Runtime,
    client: &mut PluginClient<Channel>,
    req: &ReconcileRequest,
) -> (Duration, Duration) {
    rt.block_on(async {
        for _ in 0..500 {
            call(client, req).await;
        }
        let mut samples: Vec<Duration> = Vec::with_capacity(5000);
        for _ in 0..5000 {
            let start = Instant::now();
            call(client, req).await;
            samples.push(start.elapsed());
        }
        samples.sort();
        (
            samples[samples.len() / 2],
            samples[samples.len() * 99 / 100],
        )
    })
}

fn roundtrip(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut s = setup(&rt);
    let mut group = c.benchmark_group("reconcile_roundtrip_uds");
    for (label, size) in [("64B", 64), ("8KiB", 8 * 1024)] {
        let req = request(size);
        group.bench_with_input(
            BenchmarkId::new("bare_tonic_echo", label),
            &req,
            |b, req| {
                b.to_async(&rt).iter(|| {
                    let mut client = s.bare.clone();
                    async move { call(&mut client, req).await }
                });
            },
        );
        group.bench_with_input(BenchmarkId::new("kplug_sidecar", label), &req, |b, req| {
            b.to_async(&rt).iter(|| {
                let mut client = s.sdk.clone();
                async move { call(&mut client, req).await }
            });
        });
    }
    group.finish();

    // `cargo test --all-targets` runs benches once as smoke tests (without
    // `--bench`); the percentile run only makes sense when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    println!("\nlatency over 5000 sequential calls (same run, same socket kind):");
    for (label, size) in [("64B", 64), ("8KiB", 8 * 1024)] {
        let req = request(size);
        let (b50, b99) = percentiles(&rt, &mut s.bare, &req);
        let (k50, k99) = percentiles(&rt, &mut s.sdk, &req);
        println!(
            "  {label:>5}  bare tonic echo p50 {b50:>9.1?} p99 {b99:>9.1?}   kplug-sidecar p50 {k50:>9.1?} p99 {k99:>9.1?}"
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1)).sample_size(50);
    targets = roundtrip
}
criterion_main!(benches);
