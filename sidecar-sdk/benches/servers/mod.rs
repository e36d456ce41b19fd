//! The servers `polyglot` compares: each SDK's echo plugin and the same
//! service in its bare gRPC library, where `make bench` builds them, and
//! running one.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kplug_proto::v1::ProbeRequest;
use kplug_proto::v1::plugin_client::PluginClient;
use tonic::transport::Channel;

use super::{SERVE_ENV, SOCKET_ENV, START_TIMEOUT};

/// How to start one server.
pub(crate) struct ServerSpec {
    program: PathBuf,
    args: Vec<String>,
    /// Extra environment (the Rust servers' role).
    env: Vec<(&'static str, String)>,
    /// Served by an SDK (on `<dir>/plugins/echo/plugin.sock`), or bare (on
    /// `$KPLUG_BENCH_SOCKET`).
    sdk: bool,
}

/// An SDK and its baseline.
pub(crate) struct Pair {
    pub(crate) sdk_name: &'static str,
    pub(crate) baseline_name: &'static str,
    pub(crate) sdk: ServerSpec,
    pub(crate) bare: ServerSpec,
}

/// The servers of one SDK's pair, where `make bench` builds them.
pub(crate) fn pair(name: &str, root: &Path, target: &Path) -> Pair {
    let exists = |path: PathBuf| built(path, name);
    match name {
        "rust" => {
            let this = std::env::current_exe().unwrap();
            let role = |role: &str, sdk: bool| ServerSpec {
                env: vec![(SERVE_ENV, role.to_string())],
                ..spec(this.clone(), &[], sdk)
            };
            Pair {
                sdk_name: "Rust SDK",
                baseline_name: "tonic",
                sdk: role("rust-sdk", true),
                bare: role("rust-bare", false),
            }
        }
        "go" => {
            let bin = target.join("bench/go");
            Pair {
                sdk_name: "Go SDK",
                baseline_name: "grpc-go",
                sdk: spec(exists(bin.join("sdkecho")), &[], true),
                bare: spec(exists(bin.join("bareecho")), &[], false),
            }
        }
        "typescript" => {
            let build = root.join("sidecar-sdk/typescript/build/bench");
            Pair {
                sdk_name: "TypeScript SDK",
                baseline_name: "@grpc/grpc-js",
                sdk: spec("node".into(), &[exists(build.join("sdk-echo.js"))], true),
                bare: spec("node".into(), &[exists(build.join("bare-echo.js"))], false),
            }
        }
        "python" => {
            let sdk = root.join("sidecar-sdk/python");
            let python = exists(sdk.join(".venv/bin/python"));
            Pair {
                sdk_name: "Python SDK",
                baseline_name: "grpcio",
                sdk: spec(
                    python.clone(),
                    &[exists(sdk.join("bench/sdk_echo.py"))],
                    true,
                ),
                bare: spec(python, &[exists(sdk.join("bench/bare_echo.py"))], false),
            }
        }
        other => panic!("KPLUG_BENCH_SDKS: unknown SDK {other:?} (rust, go, typescript, python)"),
    }
}

/// `path`, which `make bench` builds for SDK `name`.
fn built(path: PathBuf, name: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: `make bench` builds it (or leave {name} out of KPLUG_BENCH_SDKS)",
        path.display()
    );
    path
}

/// A server run as `program args`.
fn spec(program: PathBuf, args: &[PathBuf], sdk: bool) -> ServerSpec {
    ServerSpec {
        program,
        args: args.iter().map(|a| a.display().to_string()).collect(),
        env: vec![],
        sdk,
    }
}

/// A running server; killed when dropped.
pub(crate) struct Running {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Running {
    /// Starts `spec` in a directory of its own, its output in a log file
    /// there (a pipe nobody reads would block it).
    pub(crate) fn start(spec: &ServerSpec) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let socket = if spec.sdk {
            dir.path().join("plugins/echo/plugin.sock")
        } else {
            dir.path().join("bare.sock")
        };
        let log = dir.path().join("server.log");
        let out = File::create(&log).unwrap();
        let child = Command::new(&spec.program)
            .args(&spec.args)
            .envs(spec.env.iter().cloned())
            .env("KPLUG_SOCKET_DIR", dir.path())
            .env(SOCKET_ENV, &socket)
            // No span export: it would be measured too.
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", spec.program.display()));
        Running {
            child,
            socket,
            log,
            _dir: dir,
        }
    }

    /// Waits until the server answers a Probe, then connects the client.
    pub(crate) async fn client(&mut self) -> PluginClient<Channel> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the server exited ({status}) before serving:\n{}",
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no answer on {} after {START_TIMEOUT:?}:\n{}",
                self.socket.display(),
                self.output()
            );
            if self.socket.exists() {
                // A fresh channel per attempt: a lazy channel that failed
                // to connect would back off before trying again.
                let mut client = PluginClient::new(kplug_proto::socket::channel(&self.socket));
                let probe = client.probe(ProbeRequest {});
                if let Ok(Ok(response)) = tokio::time::timeout(Duration::from_secs(1), probe).await
                    && response.get_ref().ready
                {
                    return client;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
