//! The servers `polyglot` compares, three per language: the SDK's echo
//! plugin, the same service in the language's bare gRPC library, and that
//! bare server with the language's standard JSON library; where `make
//! bench-servers` builds them, and running one.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kplug_proto::v1::ProbeRequest;
use kplug_proto::v1::plugin_client::PluginClient;
use tonic::transport::Channel;

use super::{SERVE_ENV, SOCKET_ENV, START_TIMEOUT};

/// What a server is, which says where it serves and what it answers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The SDK's echo plugin, through the SDK's normal entry point on
    /// `<dir>/plugins/echo/plugin.sock`: decodes the object, answers
    /// `{"echo": spec}`.
    Sdk,
    /// The bare gRPC server on `$KPLUG_BENCH_SOCKET`: copies the object's
    /// bytes into the status.
    Bare,
    /// The bare gRPC server on `$KPLUG_BENCH_SOCKET`, decoding the object
    /// and encoding `{"echo": spec}` with the standard JSON library.
    BareJson,
}

/// The kinds of [`Language::servers`], in their order.
pub(crate) const KINDS: [Kind; 3] = [Kind::Sdk, Kind::Bare, Kind::BareJson];

/// How to start one server.
pub(crate) struct ServerSpec {
    program: PathBuf,
    args: Vec<String>,
    /// Extra environment (the Rust servers' role).
    env: Vec<(&'static str, String)>,
}

/// One language's three servers.
pub(crate) struct Language {
    /// "Go SDK vs grpc-go (+ encoding/json)": the SDK, the bare gRPC
    /// library, the JSON library.
    pub(crate) case: String,
    /// The SDK's, the bare one, the bare one with JSON: [`KINDS`].
    pub(crate) servers: [ServerSpec; 3],
}

/// The servers of language `name`, where `make bench-servers` builds them.
pub(crate) fn language(name: &str, root: &Path, target: &Path) -> Language {
    let exists = |path: PathBuf| built(path, name);
    // (SDK, gRPC library, JSON library), and the three servers.
    let ((sdk, grpc, json), servers) = match name {
        "rust" => {
            let this = std::env::current_exe().unwrap();
            let role = |role: &str| ServerSpec {
                env: vec![(SERVE_ENV, role.to_string())],
                ..spec(this.clone(), &[])
            };
            (
                ("Rust", "tonic", "serde_json"),
                ["rust-sdk", "rust-bare", "rust-bare-json"].map(role),
            )
        }
        "go" => {
            let bin = target.join("bench/go");
            (
                ("Go", "grpc-go", "encoding/json"),
                ["sdkecho", "bareecho", "barejsonecho"].map(|b| spec(exists(bin.join(b)), &[])),
            )
        }
        "typescript" => {
            let build = root.join("sidecar-sdk/typescript/build/bench");
            let js = |file: &str| spec("node".into(), &[exists(build.join(file))]);
            (
                ("TypeScript", "@grpc/grpc-js", "JSON"),
                ["sdk-echo.js", "bare-echo.js", "bare-json-echo.js"].map(js),
            )
        }
        "python" => {
            let sdk = root.join("sidecar-sdk/python");
            let python = exists(sdk.join(".venv/bin/python"));
            let py = |file: &str| spec(python.clone(), &[exists(sdk.join("bench").join(file))]);
            (
                ("Python", "grpcio", "json"),
                ["sdk_echo.py", "bare_echo.py", "bare_json_echo.py"].map(py),
            )
        }
        "java" => {
            let bin = target.join("bench/java");
            (
                ("Java", "grpc-java", "Jackson"),
                ["sdk-echo", "bare-echo", "bare-json-echo"].map(|b| spec(exists(bin.join(b)), &[])),
            )
        }
        other => {
            panic!("KPLUG_BENCH_SDKS: unknown SDK {other:?} (rust, go, typescript, python, java)")
        }
    };
    Language {
        case: format!("{sdk} SDK vs {grpc} (+ {json})"),
        servers,
    }
}

/// `path`, which `make bench-servers` builds for SDK `name`.
fn built(path: PathBuf, name: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: `make bench-servers` builds it (or leave {name} out of KPLUG_BENCH_SDKS)",
        path.display()
    );
    path
}

/// A server run as `program args`.
fn spec(program: PathBuf, args: &[PathBuf]) -> ServerSpec {
    ServerSpec {
        program,
        args: args.iter().map(|a| a.display().to_string()).collect(),
        env: vec![],
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
    /// Starts `spec`, a server of `kind`, in a directory of its own, its
    /// output in a log file there (a pipe nobody reads would block it).
    pub(crate) fn start(spec: &ServerSpec, kind: Kind) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let socket = match kind {
            Kind::Sdk => dir.path().join("plugins/echo/plugin.sock"),
            Kind::Bare | Kind::BareJson => dir.path().join("bare.sock"),
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
