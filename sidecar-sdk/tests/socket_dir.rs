//! The socket dir, as a new user meets it: a plugin started before its
//! operator (or beside the wrong directory) says once, at warning level,
//! where it looks for the registry and where that came from; a socket dir
//! that does not exist is a start-up error, never created; and a plugin
//! that stops cleanly leaves no socket and no empty directory behind.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use kplug_proto::rules::{self, SocketDirOrigin};
use kplug_sidecar::{BoxError, Offer, Plugin, PluginInfo, Request, Response, Server};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// `target/<profile>/examples/hello`, which `cargo test` builds.
fn hello() -> Command {
    let mut command = Command::new(kplug_testenv::workspace_binary("examples/hello"));
    command
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("KPLUG_HEARTBEAT_INTERVAL", "0.2")
        .env("RUST_LOG", "kplug_sidecar=debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs the hello example for `time`, then stops it with SIGTERM.
fn run_for(mut command: Command, time: Duration) -> (Output, String) {
    let child = command.spawn().unwrap();
    std::thread::sleep(time);
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    let _ = kill(pid, Signal::SIGTERM);
    let output = child.wait_with_output().unwrap();
    let logs = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output, logs)
}

fn lines_with<'a>(logs: &'a str, text: &str) -> Vec<&'a str> {
    logs.lines().filter(|l| l.contains(text)).collect()
}

#[test]
fn without_a_registry_the_plugin_warns_once_naming_the_variable_then_retries_at_debug() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = hello();
    command.env(kplug_proto::SOCKET_DIR_ENV, dir.path());
    // 1.5 s: the first retries come after 0.1, 0.2, 0.4 and 0.8 s.
    let (output, logs) = run_for(command, Duration::from_millis(1500));
    assert!(output.status.success(), "{logs}");

    let want = rules::registry_waiting_message(dir.path(), SocketDirOrigin::Environment);
    let warned = lines_with(&logs, &want);
    assert_eq!(warned.len(), 1, "one warning, not one per retry:\n{logs}");
    assert!(warned[0].contains("WARN"), "{logs}");
    assert!(
        want.contains("(from KPLUG_SOCKET_DIR)") && want.contains("registry.sock"),
        "{want}"
    );
    let retries = lines_with(&logs, "heartbeat failed");
    assert!(retries.len() >= 3, "{logs}");
    assert!(retries.iter().all(|l| l.contains("DEBUG")), "{logs}");
    assert!(
        !logs
            .lines()
            .any(|l| l.contains("INFO") && l.contains("registry")),
        "no INFO line about the registry while it is missing:\n{logs}"
    );
}

#[test]
fn a_missing_socket_dir_is_a_start_up_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("sockets");
    let mut command = hello();
    command.env(kplug_proto::SOCKET_DIR_ENV, &missing);
    let output = command.output().unwrap();
    let logs = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{logs}");
    let want = rules::socket_dir_missing_message(&missing, SocketDirOrigin::Environment);
    assert!(
        logs.contains(&format!("plugin hello cannot start: {want}")),
        "{logs}"
    );
    assert!(
        !missing.exists(),
        "neither the socket dir nor plugins/ is made"
    );

    // plugins/ in an existing socket dir is the plugin's to create.
    let mut command = hello();
    command.env(kplug_proto::SOCKET_DIR_ENV, dir.path());
    let (output, logs) = run_for(command, Duration::from_millis(500));
    assert!(output.status.success(), "{logs}");
    assert!(dir.path().join("plugins").is_dir(), "{logs}");
}

struct Quiet;

impl Plugin for Quiet {
    async fn reconcile(&self, _: Request) -> Result<Response, BoxError> {
        Ok(Response::ok())
    }
}

fn quiet() -> PluginInfo {
    PluginInfo::new("quiet", "1.0.0").offer(Offer::new("example.com", "Greeting", "Quiet"))
}

async fn serve_briefly(dir: &Path, before_stop: impl FnOnce()) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = Server::new(quiet(), Quiet, dir).heartbeat_interval(Duration::from_millis(200));
    let socket = server.socket_path();
    let running = tokio::spawn(server.run_until(async {
        let _ = stopped.await;
    }));
    for _ in 0..200 {
        if socket.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        socket.exists(),
        "the plugin did not bind {}",
        socket.display()
    );
    before_stop();
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_clean_exit_removes_the_socket_and_the_emptied_plugin_directory() {
    let dir = tempfile::tempdir().unwrap();
    serve_briefly(dir.path(), || {}).await;
    assert!(!dir.path().join("plugins/quiet").exists());
    assert!(
        dir.path().join("plugins").is_dir(),
        "plugins/ is shared: it stays"
    );
    assert!(dir.path().is_dir());

    // A directory that holds anything else stays, with what it holds.
    let notes = dir.path().join("plugins/quiet/notes");
    serve_briefly(dir.path(), || std::fs::write(&notes, b"kept").unwrap()).await;
    assert_eq!(std::fs::read(&notes).unwrap(), b"kept");
    assert!(!dir.path().join("plugins/quiet/plugin.sock").exists());
}
