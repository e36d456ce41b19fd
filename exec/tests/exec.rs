//! kplug-exec as a real process with real shell scripts: the conformance
//! kit's every check, the request and environment a command gets, the exit
//! code answers, the timeout killing the whole process group, and the
//! concurrency bound.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kplug_conformance::Options;
use kplug_conformance::checks::Verdict;
use kplug_proto::v1::plugin_client::PluginClient;
use kplug_proto::v1::{Outcome, ReconcileRequest, ReconcileResponse};
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tonic::transport::Channel;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .join("plugin.yaml")
}

#[tokio::test]
async fn a_shell_plugin_passes_every_check_of_the_conformance_kit() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        socket_dir: dir.path().join("sockets"),
        command: vec![
            env!("CARGO_BIN_EXE_kplug-exec").to_owned(),
            "--manifest".to_owned(),
            fixture("greet").display().to_string(),
        ],
        only: None,
        cases: None,
        start_timeout: Duration::from_secs(30),
    };
    let outcomes = kplug_conformance::run(&options).await.unwrap();
    let report = kplug_conformance::report::text("kplug-exec greet", &outcomes);
    for o in &outcomes {
        let expected_skip = o.check.name == "cases";
        assert_eq!(
            matches!(o.verdict, Verdict::Skip(_)),
            expected_skip,
            "{}:\n{report}",
            o.check.name
        );
        assert!(!matches!(o.verdict, Verdict::Fail(_)), "{report}");
    }
}

/// kplug-exec serving `tests/fixtures/calls`, with `$OUT` set to a scratch
/// directory, and a client for its socket.
struct Calls {
    _dir: tempfile::TempDir,
    out: PathBuf,
    process: Child,
    client: PluginClient<Channel>,
}

impl Calls {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let sockets = dir.path().join("sockets");
        let process = Command::new(env!("CARGO_BIN_EXE_kplug-exec"))
            .arg("--manifest")
            .arg(fixture("calls"))
            .env("KPLUG_SOCKET_DIR", &sockets)
            .env("OUT", &out)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let socket = sockets.join("plugins/calls-sh/plugin.sock");
        for _ in 0..300 {
            if socket.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            socket.exists(),
            "kplug-exec did not bind {}",
            socket.display()
        );
        let client = PluginClient::new(kplug_proto::socket::channel(&socket));
        Self {
            _dir: dir,
            out,
            process,
            client,
        }
    }

    async fn reconcile(&self, name: &str) -> ReconcileResponse {
        let object = json!({
            "apiVersion": "example.com/v1", "kind": "Greeting",
            "metadata": {"name": name, "namespace": "shop"}, "spec": {"salutation": "hi"},
        });
        self.client
            .clone()
            .reconcile(ReconcileRequest {
                implementation: "Calls".into(),
                object: object.to_string().into_bytes(),
                extensions: vec![],
            })
            .await
            .unwrap()
            .into_inner()
    }
}

impl Drop for Calls {
    fn drop(&mut self) {
        self.process.start_kill().ok();
    }
}

#[tokio::test]
async fn a_command_gets_the_request_on_stdin_and_the_call_in_its_environment() {
    let calls = Calls::start().await;
    let response = calls.reconcile("env").await;
    assert_eq!(response.outcome, Outcome::Ok as i32, "{response:?}");
    let env = std::fs::read_to_string(calls.out.join("env")).unwrap();
    assert_eq!(env, "reconcile Calls shop env");
    let stdin: Value =
        serde_json::from_str(&std::fs::read_to_string(calls.out.join("stdin.json")).unwrap())
            .unwrap();
    assert_eq!(stdin["call"], "reconcile");
    assert_eq!(stdin["implementation"], "Calls");
    assert_eq!(stdin["object"]["spec"]["salutation"], "hi");
    assert_eq!(stdin["extensions"], json!([]));
}

#[tokio::test]
async fn exit_75_asks_to_retry_with_the_end_of_stderr() {
    let calls = Calls::start().await;
    let response = calls.reconcile("retry").await;
    assert_eq!(response.outcome, Outcome::Retry as i32, "{response:?}");
    assert_eq!(response.retry_after.unwrap().seconds, 10);
    assert!(
        response
            .message
            .ends_with("asked to retry (exit 75): the database is locked"),
        "{}",
        response.message
    );
}

#[tokio::test]
async fn a_command_past_its_timeout_is_killed_with_its_process_group() {
    let calls = Calls::start().await;
    let response = calls.reconcile("slow").await;
    assert_eq!(response.outcome, Outcome::Failed as i32, "{response:?}");
    assert!(
        response
            .message
            .contains("ran past its timeout of 1 s and was killed"),
        "{}",
        response.message
    );
    assert!(
        response.message.ends_with(": started copying"),
        "{}",
        response.message
    );
    // The script's own child (sleep 300) went with it.
    let child: i32 = std::fs::read_to_string(calls.out.join("child"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut gone = false;
    for _ in 0..100 {
        // Gone, or a zombie waiting for init to reap it: no longer running.
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        if stat.is_empty()
            || stat
                .split(") ")
                .nth(1)
                .is_some_and(|rest| rest.starts_with('Z'))
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        gone,
        "the command's child {child} still runs after the timeout"
    );
    // And the plugin goes on serving.
    assert_eq!(calls.reconcile("env").await.outcome, Outcome::Ok as i32);
}

#[tokio::test]
async fn runs_of_a_command_never_exceed_its_concurrency() {
    let calls = Calls::start().await;
    let names = ["serial-a", "serial-b", "serial-c"];
    // All three at once: without the bound they would overlap.
    let responses = futures::future::join_all(names.iter().map(|n| calls.reconcile(n))).await;
    assert!(
        responses.iter().all(|r| r.outcome == Outcome::Ok as i32),
        "{responses:?}"
    );
    // concurrency: 1 — each run ends before the next starts.
    let log = std::fs::read_to_string(calls.out.join("log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 6, "{log}");
    for pair in lines.chunks(2) {
        let started = pair[0].strip_prefix("start ").expect(&log);
        assert_eq!(pair[1], format!("end {started}"), "runs overlapped:\n{log}");
    }
}
